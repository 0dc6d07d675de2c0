package fabric

import (
	"fmt"

	"log/slog"
	"time"

	"github.com/ferryrdma/ferry/fabric/topology"
)

// PollMode is how a worker waits when it has nothing to do.
type PollMode uint8

const (
	// PollAdaptive spins briefly, then yields, then sleeps with a growing
	// interval (woken at once by new submissions). The default: it suits
	// machines with few cores and tests.
	PollAdaptive PollMode = iota
	// PollSpin never stops polling: lowest latency, one core per worker.
	PollSpin
)

func (m PollMode) String() string {
	if m == PollSpin {
		return "spin"
	}
	return "adaptive"
}

// ParsePollMode parses "spin" or "adaptive".
func ParsePollMode(s string) (PollMode, error) {
	switch s {
	case "spin":
		return PollSpin, nil
	case "adaptive", "":
		return PollAdaptive, nil
	}
	return 0, fmt.Errorf("poll mode %q (want spin or adaptive): %w", s, ErrInvalidArgument)
}

// GroupSpec is one worker: a device with its NICs.
type GroupSpec struct {
	Device Device
	// NICs is how many domains to open (1 to 4); ignored when Domains is set.
	NICs int
	// Domains names the exact domains to open, from a provider's Domains
	// list or a topology.
	Domains []DomainInfo
	// Pin pins the worker's OS thread to CPU before its domains are
	// opened, so their memory is NUMA-local.
	Pin bool
	CPU int
}

// Config describes an engine.
type Config struct {
	// Transport is "auto" (EFA, then verbs, else an error: never a silent
	// fallback), "verbs", "null", or a libfabric provider name such as
	// "efa", "tcp;ofi_rxm" or "shm".
	Transport string
	// Node pins the provider to an address or interface; tests use
	// "127.0.0.1" so loopback is the only path.
	Node string
	// Groups lists the workers. Empty means one host group with NICs
	// domains.
	Groups []GroupSpec
	// NICs is the domain count for the default host group (default 1),
	// or per GPU when GPUs is set (0: all of the GPU's nearest NICs).
	NICs int
	// GPUs, when Groups is empty, builds one group per CUDA ordinal from
	// the machine's topology: each GPU with its nearest NICs and its
	// worker pinned to its first core (see PlaceGroups).
	GPUs []int
	// Topology overrides how the machine is read for GPUs (tests inject
	// fake sysfs roots); nil reads /sys and /proc.
	Topology *topology.Spec
	// Poll is the workers' polling policy.
	Poll PollMode
	// QueueDepth bounds in-flight ops per domain (default 1024).
	QueueDepth int
	// MaxPending bounds the transfers a worker holds accepted and not yet
	// finished (default 16384). Past it the worker stops taking requests,
	// its queue fills, and submitters wait for room until their request's
	// deadline, then fail with ErrQueueFull: back-pressure instead of
	// queues that grow while a peer stops taking writes.
	MaxPending int
	// SendBuffers and SendBufferSize size the pool behind Send (default
	// 64 x 64 KiB).
	SendBuffers    int
	SendBufferSize int
	// HandshakeTimeout bounds connection setup on connection-oriented
	// providers (default 10 s).
	HandshakeTimeout time.Duration
	// ListenPort pins the port of providers that listen on one
	// (tcp;ofi_rxm), with Node set: the engine's domains take ListenPort,
	// ListenPort+1, ... in group order, so a restarted process has the
	// same addresses (the same UDP port numbers must be free too: they
	// answer incarnation checks).
	// Descriptors of the engine it replaced are still refused there
	// (ErrStaleDescriptor): addresses carry the engine's incarnation.
	// 0 lets the system choose.
	ListenPort int
	// RequestTimeout is the deadline of every transfer whose Completion
	// carries none (see Completion.WithDeadline and WithContext): a
	// transfer still running that long after it was accepted fails with an
	// error wrapping ErrTimeout. 0 means 30 s; negative means no default
	// deadline.
	RequestTimeout time.Duration
	// LivenessInterval is how often each worker checks the peers it
	// recently sent to or watches (see Engine.WatchPeer) and sends
	// heartbeats to watched peers on providers that have them. It is also
	// how often a lost peer is tried again. 0 means 500 ms; negative turns
	// the periodic checks off (errors the provider reports still count).
	LivenessInterval time.Duration
	// StuckTimeout is how long a worker may stay inside one provider call
	// of the data path (a post or a poll) before the engine gives up on it
	// (see Engine.Close and ErrAbandoned): its transfers fail with
	// ErrAbandoned, its submits too, and its domains stay open. 0 means
	// 10 s; negative turns the watchdog off.
	StuckTimeout time.Duration
	// Logger's handler receives the engine's logs (default slog.Default()).
	Logger *slog.Logger
	// LogLevel is the least level the engine logs (default
	// DefaultLogLevel, Warn): errors and warnings only. Set it to
	// slog.LevelInfo for the open and close lines, slog.LevelDebug for the
	// workers' start and stop too. Logger's handler may filter further.
	LogLevel slog.Leveler
	// CloseOnCallbackPanic makes a panicking user callback close the engine
	// (every pending operation then fails with ErrClosed). By default the
	// panic is logged and the dispatcher goes on.
	CloseOnCallbackPanic bool
	// RegisterOnWorker keeps registration and deregistration on each
	// group's worker, one NIC after another, even where the provider
	// allows them beside it (see Engine.Register and RegistrationMode):
	// what registering cost the data path before, for comparison.
	RegisterOnWorker bool
}

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 30 * time.Second

// MaxSendBufferBytes bounds SendBuffers x SendBufferSize: the pool is
// mapped and registered as one region the first time Send is called.
const MaxSendBufferBytes = 1 << 30

// validate refuses settings that would otherwise be silently replaced by
// defaults or fail long after Open: negative counts, sizes and timeouts,
// and a send-buffer pool too large to map.
func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("engine config: "+format+": %w", append(args, ErrInvalidArgument)...)
	}
	switch {
	case c.NICs < 0:
		return bad("NICs %d", c.NICs)
	case c.QueueDepth < 0:
		return bad("QueueDepth %d", c.QueueDepth)
	case c.MaxPending < 0:
		return bad("MaxPending %d", c.MaxPending)
	case c.SendBuffers < 0 || c.SendBufferSize < 0:
		return bad("%d send buffers of %d bytes", c.SendBuffers, c.SendBufferSize)
	case c.HandshakeTimeout < 0:
		return bad("HandshakeTimeout %v", c.HandshakeTimeout)
	case c.ListenPort < 0 || c.ListenPort > 65535-MaxNICs*maxListenGroups:
		return bad("ListenPort %d", c.ListenPort)
	}
	for i, g := range c.Groups {
		if g.NICs < 0 {
			return bad("group %d (%s): NICs %d", i, g.Device, g.NICs)
		}
	}
	n, size := max(c.SendBuffers, 1), max(c.SendBufferSize, 1)
	if n > MaxSendBufferBytes/size {
		return bad("%d send buffers of %d bytes: more than %d bytes in all", c.SendBuffers, c.SendBufferSize, MaxSendBufferBytes)
	}
	return nil
}

// maxListenGroups bounds the groups whose ports ListenPort reserves.
const maxListenGroups = 64

func (c *Config) withDefaults() {
	if c.Transport == "" {
		c.Transport = TransportAuto
	}
	if c.NICs <= 0 && len(c.GPUs) == 0 {
		c.NICs = 1
	}
	if c.QueueDepth <= 0 {
		c.QueueDepth = 1024
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 16384
	}
	if c.SendBuffers <= 0 {
		c.SendBuffers = 64
	}
	if c.SendBufferSize <= 0 {
		c.SendBufferSize = 64 << 10
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.LivenessInterval == 0 {
		c.LivenessInterval = 500 * time.Millisecond
	}
	if c.StuckTimeout == 0 {
		c.StuckTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LogLevel == nil {
		c.LogLevel = DefaultLogLevel
	}
	if len(c.Groups) == 0 && len(c.GPUs) == 0 {
		c.Groups = []GroupSpec{{Device: HostDevice, NICs: c.NICs}}
	}
}
