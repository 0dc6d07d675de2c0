package cudabackend

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/wire"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/osyield"
)

// Exchanger all-gathers one message per rank over the whole world, in rank
// order (rendezvous.Group does).
type Exchanger = wire.Exchanger

// Options are what a Backend runs on.
type Options struct {
	// Engine moves the bytes between domains; its groups must have
	// Config.NICsPerGPU NICs. Contexts sharing an engine need disjoint
	// ImmBase ranges.
	Engine *fabric.Engine
	// Exchange reaches every rank of the world, to publish descriptors.
	Exchange Exchanger
	// Device runs the kernels.
	Device Device
	// Node shares the transport buffers within this rank's domain.
	Node NodeMemory
	// Grid and Block size every launch (blocks, threads per block); 0
	// takes the Device's default. Block must be a multiple of 32.
	Grid, Block int
	// Timeout bounds every wait inside a kernel (default 30 s); when the
	// call's context has an earlier deadline, kernels give up shortly
	// before it. A rank that stops answering fails the others' calls
	// within it, and at once (naming the rank, a2a.RankError) when the
	// engine declares the rank lost: the worker fails, and the kernels'
	// waits give up when it does.
	Timeout time.Duration
	// Polling is how the CPU worker waits for the kernels' flags. The
	// default (PollAuto) is latency first on a GPU: the worker spins (it
	// still yields), a core per rank, because each of its sleeps would add
	// up to half a millisecond to a decode step whose kernels take tens of
	// microseconds. On the emulator, whose kernels need the cores the
	// worker would burn, it backs off to sleeps of up to half a
	// millisecond. For the engine's own workers, open the engine with
	// fabric.PollSpin on a GPU too (its adaptive default sleeps up to a
	// millisecond when idle).
	Polling Polling
	// Spin is Polling: PollSpin (kept for callers that set it).
	Spin bool
	// Overcommit leaves this backend's grid out of the rule for
	// concurrent contexts (ResidentDevice): the caller guarantees that its
	// launches never wait for another context's kernels resident on the
	// same device, e.g. by running the contexts' launches in lock step
	// (a2a/cudabackend/onedevice does). The grid must still fit the device.
	Overcommit bool
	// Join builds the backend of a restarted rank joining a running world:
	// New builds, allocates and registers everything but exchanges nothing
	// (Exchange may be nil); its Context's first call is then
	// SetActiveRanks with a Membership whose Exchange reaches the members
	// (a2a.Context.SetActiveRanks). Node peers' buffers are mapped once,
	// at New, so a restarted rank comes back only when no rank of its
	// domain stayed active (unlike the host backend's, which reshares).
	Join bool
}

// Polling is the CPU worker's waiting policy (Options.Polling).
type Polling uint8

const (
	// PollAuto spins on a GPU (DriverDevice) and backs off elsewhere.
	PollAuto Polling = iota
	// PollSpin never sleeps: the lowest latency, a core per rank.
	PollSpin
	// PollBackoff spins briefly, yields, then sleeps 1 us doubling to
	// 512 us while no flag moves: little CPU, up to ~0.5 ms more latency
	// per wait.
	PollBackoff
)

// spins reports whether the worker of a backend on dev spins.
func (p Polling) spins(dev Device) bool {
	switch p {
	case PollSpin:
		return true
	case PollBackoff:
		return false
	}
	_, gpu := dev.(*DriverDevice)
	return gpu
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Backend is the CUDA a2a backend of one rank. Make it with New and hand
// it to a2a.New, which drives it; the calls of an a2a.Context reach it
// one at a time.
type Backend struct {
	l       a2a.Layout
	dev     Device
	eng     *fabric.Engine
	node    NodeMemory
	st      Stream
	prog    Program
	k       [4]Kernel
	grid    int
	block   int
	timeout time.Duration
	spin    bool
	yielder osyield.Yielder // await's yields (sched_yield, keeping the worker's P)
	ml      metaLayout

	send, recv []uint64 // node ranks' transport buffers
	mems       []Memory
	ctrl       Control
	ctrlWords  []ControlWord // every word of ctrl, made once (no allocation per use)
	table      Memory
	meta       Memory
	params     Memory
	state      Memory // struct a2a_state
	ranks      Memory // per-rank flags (A2A_RANK_*)
	regs       []*fabric.MemoryRegion
	wire       *wire.Wiring
	planner    *a2a.Planner // the worker's: receive plans

	io      stager
	epoch   uint32 // iterations completed (the kernels' epoch)
	w       *worker
	joining bool
	closed  bool

	residentKey string // the device whose blocks this backend reserved (ResidentDevice)
	overcommit  bool   // Options.Overcommit
}

var _ a2a.MembershipBackend = (*Backend)(nil)

// New builds rank cfg.Rank's backend: it compiles (or finds in the cache)
// the kernels for cfg's shape, shares the transport buffers with its
// domain, registers them and the count table with the engine, creates the
// immediate counters and exchanges descriptors with every rank (so all
// ranks call New together), and starts the CPU worker. On error
// everything done is undone.
func New(ctx context.Context, cfg a2a.Config, opt Options) (_ *Backend, err error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if opt.Engine == nil || (opt.Exchange == nil && !opt.Join) || opt.Device == nil || opt.Node == nil {
		return nil, fmt.Errorf("a2a cuda backend: engine, exchange, device and node are required: %w", a2a.ErrInvalidArgument)
	}
	if n := opt.Engine.NICs(); n != l.NICsPerGPU {
		return nil, fmt.Errorf("a2a cuda backend: engine has %d nics, config %d: %w", n, l.NICsPerGPU, a2a.ErrInvalidArgument)
	}
	if 8*l.NVLinkSize > syncBytes {
		return nil, fmt.Errorf("a2a cuda backend: NVLinkSize %d above %d: %w", l.NVLinkSize, syncBytes/8, a2a.ErrInvalidConfig)
	}
	b := &Backend{l: l, dev: opt.Device, eng: opt.Engine, node: opt.Node, timeout: opt.Timeout,
		spin: opt.Spin || opt.Polling.spins(opt.Device), overcommit: opt.Overcommit, yielder: osyield.New(),
		joining: opt.Join,
		ml:      newMetaLayout(&l)}
	if b.timeout <= 0 {
		b.timeout = DefaultTimeout
	}
	b.grid, b.block = opt.Grid, opt.Block
	if b.grid <= 0 || b.block <= 0 {
		g, bl := b.dev.DefaultLaunch()
		b.grid, b.block = or(b.grid, g), or(b.block, bl)
	}
	if b.block%32 != 0 || b.block > 1024 {
		return nil, fmt.Errorf("a2a cuda backend: block of %d threads: want a multiple of 32 up to 1024: %w", b.block, a2a.ErrInvalidArgument)
	}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if b.planner, err = a2a.NewPlanner(l.Config); err != nil {
		return nil, err
	}
	if err := b.build(ctx); err != nil {
		return nil, err
	}
	if err := b.reserveGrid(); err != nil {
		return nil, err
	}
	if err := b.allocate(ctx); err != nil {
		return nil, err
	}
	if err := b.connect(ctx, opt.Exchange); err != nil {
		return nil, err
	}
	b.io = newStager(b.dev)
	if !opt.Join {
		b.startWorker()
	}
	return b, nil
}

func or(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// build compiles the two kernel sources into one program and checks the
// shared layouts.
func (b *Backend) build(ctx context.Context) error {
	srcs, err := Sources()
	if err != nil {
		return err
	}
	shape, special := ShapeOf(&b.l)
	var builds []Build
	taken := map[string]bool{}
	for _, src := range srcs {
		bl := Build{Source: src, Defines: Defines(src.Name, b.block, shape, special)}
		for _, name := range append(kernelNames[:], probeKernel) {
			if !taken[name] && declares(src.Code, name) {
				taken[name] = true
				bl.Kernels = append(bl.Kernels, name)
			}
		}
		builds = append(builds, bl)
	}
	if b.prog, err = b.dev.Load(ctx, builds); err != nil {
		return fmt.Errorf("a2a cuda backend: build %d kernel sources: %w", len(builds), err)
	}
	for i, name := range kernelNames {
		if b.k[i], err = b.prog.Kernel(name); err != nil {
			return fmt.Errorf("a2a cuda backend: kernel %s not built: %w", name, err)
		}
	}
	probe, err := b.prog.Kernel(probeKernel)
	if err != nil {
		return fmt.Errorf("a2a cuda backend: kernel %s not built: %w", probeKernel, err)
	}
	if b.st, err = b.prog.NewStream(); err != nil {
		return err
	}
	return b.probe(ctx, probe)
}

// probe checks that Go and the kernels lay the shared structs out alike.
func (b *Backend) probe(ctx context.Context, k Kernel) error {
	out, err := b.alloc(64, false)
	if err != nil {
		return err
	}
	if err := b.st.Launch(k, 1, 32, out.Addr()); err != nil {
		return err
	}
	// Options.Timeout bounds the waits inside the a2a kernels; the probe
	// waits for nothing, and a short Timeout must not fail it.
	sctx, cancel := context.WithTimeout(ctx, max(b.timeout, probeWait))
	defer cancel()
	if err := b.st.Sync(sctx); err != nil {
		return err
	}
	got := make([]byte, 28)
	if err := b.dev.Download(got, out.Addr()); err != nil {
		return err
	}
	w := func(i int) int { return int(binary.LittleEndian.Uint32(got[4*i:])) }
	want := []int{paramsSize, paramsAddrs * 8, paramsSize - 4, -1, stateBarrier, runWords * 4, b.block}
	for i, v := range want {
		if v >= 0 && w(i) != v {
			return fmt.Errorf("a2a cuda backend: kernel layout word %d is %d, Go expects %d: %w", i, w(i), v, ErrKernel)
		}
	}
	if w(3) > stateSize {
		return fmt.Errorf("a2a cuda backend: kernel state of %d bytes exceeds %d: %w", w(3), stateSize, ErrKernel)
	}
	return nil
}

// probeWait is the least time the probe kernel is given.
const probeWait = 10 * time.Second

func (b *Backend) alloc(n int, mapped bool) (Memory, error) {
	n = max(n, 16)
	var m Memory
	var err error
	if mapped {
		m, err = b.dev.AllocMapped(n)
	} else {
		m, err = b.dev.Alloc(n)
	}
	if err != nil {
		return nil, fmt.Errorf("a2a cuda backend: allocate %d bytes: %w", n, err)
	}
	b.mems = append(b.mems, m)
	return m, nil
}

func words(m Memory) []uint32 {
	bs := m.Bytes()
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(bs))), len(bs)/4)
}

// ctrlWord is word w of control slot s.
func (b *Backend) ctrlWord(s, w int) ControlWord { return b.ctrlWords[s*slotWords+w] }

// allocControl makes the control block: the device's choice
// (ControlDevice), or mapped memory.
func (b *Backend) allocControl() error {
	if cd, ok := b.dev.(ControlDevice); ok {
		c, err := cd.AllocControl(ctrlBytes)
		if err != nil {
			return fmt.Errorf("a2a cuda backend: allocate the control block: %w", err)
		}
		b.ctrl = c
	} else {
		m, err := b.dev.AllocMapped(ctrlBytes)
		if err != nil {
			return fmt.Errorf("a2a cuda backend: allocate the control block: %w", err)
		}
		b.ctrl = hostControl{m}
	}
	b.ctrlWords = make([]ControlWord, ctrlBytes/4)
	for i := range b.ctrlWords {
		b.ctrlWords[i] = b.ctrl.Word(4 * i)
	}
	return nil
}

// ControlKind says where the control block lives: "gdrcopy" (device
// memory written through a GDRCopy mapping) or "host-mapped".
func (b *Backend) ControlKind() string { return b.ctrl.Kind() }

// allocate shares the transport buffers and allocates everything else.
func (b *Backend) allocate(ctx context.Context) error {
	l := &b.l
	var err error
	b.send, b.recv, err = b.node.Share(ctx, int(l.SendBytes), int(l.RecvBytes)+syncBytes)
	if err != nil {
		return fmt.Errorf("a2a cuda backend: share node buffers: %w", err)
	}
	S := l.NVLinkSize
	if len(b.send) != S || len(b.recv) != S {
		return fmt.Errorf("a2a cuda backend: node memory returned %d buffers for %d ranks: %w", len(b.recv), S, a2a.ErrInvalidArgument)
	}
	if err := b.allocControl(); err != nil {
		return err
	}
	if b.table, err = b.alloc(l.CountTableBytes, true); err != nil {
		return err
	}
	if b.meta, err = b.alloc(4*b.ml.words, true); err != nil {
		return err
	}
	chunks := (l.MaxTokens + 31) / 32
	cells := int64(l.Experts) * int64(chunks) * 4
	if cells > 1<<30 {
		return fmt.Errorf("a2a cuda backend: %d experts x %d tokens need %d MiB of routing bitmaps, above 1 GiB: %w",
			l.Experts, l.MaxTokens, cells>>20, a2a.ErrInvalidConfig)
	}
	sizes := []int{paramsSize, stateSize, 3 * 8 * S, int(cells), int(cells), 4 * (l.Experts + 1),
		4 * l.MaxTokens * l.ExpertsPerToken, recordBytes(l), l.WorldSize}
	dm := make([]Memory, len(sizes))
	for i, n := range sizes {
		if dm[i], err = b.alloc(n, false); err != nil {
			return err
		}
	}
	b.params, b.state, b.ranks = dm[0], dm[1], dm[8]
	me := l.Rank - l.Node(l.Rank)*S
	// Peer tables: send buffers, receive buffers, sync slots (at the tail
	// of each receive buffer), indexed by node-local rank.
	peers := make([]byte, 0, 3*8*S)
	for _, a := range b.send {
		peers = binary.LittleEndian.AppendUint64(peers, a)
	}
	for _, a := range b.recv {
		peers = binary.LittleEndian.AppendUint64(peers, a)
	}
	for _, a := range b.recv {
		peers = binary.LittleEndian.AppendUint64(peers, a+uint64(l.RecvBytes))
	}
	pt := dm[2].Addr()
	a := addrs{send: b.send[me], recv: b.recv[me], peerSend: pt, peerRecv: pt + uint64(8*S), peerSync: pt + uint64(16*S),
		sync: b.recv[me] + uint64(l.RecvBytes), table: b.table.Addr(), ctrl: b.ctrl.Addr(), meta: b.meta.Addr(),
		dmeta: dm[7].Addr(), state: dm[1].Addr(), mask: dm[3].Addr(), prefix: dm[4].Addr(), offsets: dm[5].Addr(),
		pos: dm[6].Addr(), ranks: b.ranks.Addr()}
	if err := b.dev.Upload(pt, peers); err != nil {
		return err
	}
	if err := b.dev.Upload(b.ranks.Addr(), encodeRanks(b.planner.Members())); err != nil {
		return err
	}
	return b.dev.Upload(b.params.Addr(), encodeParams(l, a, b.ml, chunks, b.block))
}

// connect registers the buffers and wires the engine.
func (b *Backend) connect(ctx context.Context, ex Exchanger) error {
	l := &b.l
	me := l.Rank - l.Node(l.Rank)*l.NVLinkSize
	reg := func(r *fabric.MemoryRegion, err error) (*fabric.MemoryRegion, error) {
		if err == nil {
			b.regs = append(b.regs, r)
		}
		return r, err
	}
	var sendReg, recvReg *fabric.MemoryRegion
	var err error
	if l.Nodes == 1 {
		// One domain: no byte of the transport buffers crosses the fabric
		// (every copy is a node copy); it carries only the count rows and
		// zero-byte signals, which need a region to name, not these
		// buffers. A page of mapped host memory stands in for each, so
		// that a fabric unable to register device memory (no GPUDirect
		// RDMA) serves a single-node world.
		pads, err := b.alloc(2*padBytes, true)
		if err != nil {
			return err
		}
		if sendReg, err = reg(b.registerHost(pads.Bytes()[:padBytes], fabric.AccessLocal)); err != nil {
			return err
		}
		if recvReg, err = reg(b.registerHost(pads.Bytes()[padBytes:], fabric.AccessRemoteWrite)); err != nil {
			return err
		}
	} else {
		if sendReg, err = reg(b.dev.Register(b.eng, b.send[me], int(l.SendBytes), fabric.AccessLocal)); err != nil {
			return err
		}
		if recvReg, err = reg(b.dev.Register(b.eng, b.recv[me], int(l.RecvBytes), fabric.AccessRemoteWrite)); err != nil {
			return err
		}
	}
	tableReg, err := reg(b.registerHost(b.table.Bytes(), fabric.AccessRemoteWrite))
	if err != nil {
		return err
	}
	flags := map[a2a.Tag]fabric.Flag{
		a2a.TagDispatch: b.rdmaFlag(slotDispatchRDMA),
		a2a.TagCombine:  b.rdmaFlag(slotCombineRDMA),
	}
	b.wire, err = wire.New(ctx, l, wire.Options{Engine: b.eng, Exchange: ex, Send: sendReg, Recv: recvReg,
		Table: tableReg, Device: b.dev.EngineDevice(), Flags: flags, Join: b.joining})
	return err
}

// padBytes is the size of each stand-in region of a single-domain world.
const padBytes = 4096

// registerHost registers host memory (mapped or not) with the engine.
func (b *Backend) registerHost(m []byte, access fabric.Access) (*fabric.MemoryRegion, error) {
	return b.eng.Register(fabric.MemorySpan{Addr: uintptr(unsafe.Pointer(unsafe.SliceData(m))), Len: uint64(len(m)),
		Device: fabric.HostDevice, DmabufFD: -1}, access)
}

// epochFlag is a fabric.Flag in the control block: each Set publishes the
// next epoch, which a kernel waits for (it never clears the flag). With a
// flush (RDMAFlusher), Set first makes the NIC's writes that completed
// visible to the kernels; a failed flush raises nothing and fails the
// worker, so the kernels give up instead of reading unflushed rows.
type epochFlag struct {
	w      ControlWord
	flush  func() error
	failed func(error)
}

func (f epochFlag) Set() {
	if f.flush != nil {
		if err := f.flush(); err != nil {
			f.failed(fmt.Errorf("flush gpudirect rdma writes: %w", err))
			return
		}
	}
	// The slot's one writer (the engine's counter for the phase, or the
	// worker when it expects no immediate): no read-modify-write needed.
	f.w.Store(f.w.Load() + 1)
}

// rdmaFlag is the flag the engine raises in slot s once every immediate
// of a phase arrived: after the device's flush, where it has one.
func (b *Backend) rdmaFlag(s int) epochFlag {
	f := epochFlag{w: b.ctrlWord(s, 0)}
	if fl, ok := b.dev.(RDMAFlusher); ok {
		f.flush, f.failed = fl.FlushRDMA, b.failWorker
	}
	return f
}

// closeWait bounds how long Close waits for kernels still running.
const closeWait = 10 * time.Second

// Close stops the worker, waits (briefly) for kernels and transfers still
// in flight, and releases everything. It is idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.stopWorker()
	defer b.releaseGrid()
	var errs []error
	if b.st != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		errs = append(errs, b.st.Sync(ctx))
		cancel()
	}
	if b.wire != nil {
		errs = append(errs, b.wire.Close())
	}
	for _, r := range b.regs {
		errs = append(errs, b.eng.Unregister(r))
	}
	if b.st != nil {
		errs = append(errs, b.st.Close())
	}
	if b.prog != nil {
		errs = append(errs, b.prog.Close())
	}
	for _, m := range b.mems {
		errs = append(errs, m.Free())
	}
	if b.ctrl != nil {
		errs = append(errs, b.ctrl.Free())
	}
	if b.io != nil {
		errs = append(errs, b.io.free())
	}
	if b.node != nil {
		errs = append(errs, b.node.Close())
	}
	return errors.Join(errs...)
}

// resident counts the blocks of the live backends' grids per device
// (ResidentDevice.Key): the rule for concurrent contexts.
var resident struct {
	sync.Mutex
	used map[string]int
}

// reserveGrid checks the grid against the device (ResidentDevice) and
// reserves its blocks beside those of the other live backends there.
func (b *Backend) reserveGrid() error {
	rd, ok := b.dev.(ResidentDevice)
	if !ok {
		return nil
	}
	limit := -1
	for i, k := range b.k {
		n, err := b.prog.MaxResidentBlocks(k, b.block)
		if err != nil {
			return fmt.Errorf("a2a cuda backend: occupancy of %s: %w", kernelNames[i], err)
		}
		if limit < 0 || n < limit {
			limit = n
		}
	}
	if b.grid > limit {
		return fmt.Errorf("a2a cuda backend: grid of %d blocks of %d threads: %s holds at most %d at once; use Options.Grid <= %d: %w",
			b.grid, b.block, b.dev.Name(), limit, limit, a2a.ErrInvalidConfig)
	}
	if b.overcommit {
		return nil
	}
	resident.Lock()
	defer resident.Unlock()
	key := rd.Key()
	if used := resident.used[key]; used+b.grid > limit {
		return fmt.Errorf("a2a cuda backend: grid of %d blocks does not fit beside the %d blocks of the a2a contexts "+
			"live on %s (it holds %d blocks of %d threads at once); use Options.Grid <= %d or close a context: %w",
			b.grid, used, b.dev.Name(), limit, b.block, max(limit-used, 0), a2a.ErrInvalidConfig)
	}
	if resident.used == nil {
		resident.used = map[string]int{}
	}
	resident.used[key] += b.grid
	b.residentKey = key
	return nil
}

// releaseGrid gives the reserved blocks back.
func (b *Backend) releaseGrid() {
	if b.residentKey == "" {
		return
	}
	resident.Lock()
	defer resident.Unlock()
	if resident.used[b.residentKey] -= b.grid; resident.used[b.residentKey] <= 0 {
		delete(resident.used, b.residentKey)
	}
	b.residentKey = ""
}

// Traffic returns what tag's fabric writes (posted by the worker) carried
// since New: a2a.TrafficCounter.
func (b *Backend) Traffic(t a2a.Tag) a2a.Traffic { return b.wire.Traffic(t) }

var _ a2a.TrafficCounter = (*Backend)(nil)
