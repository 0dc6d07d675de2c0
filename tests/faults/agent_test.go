package faults

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
)

// An agent is this test binary re-executed as one side of a case: a target
// (owns the destination buffer, checks every chunk, acknowledges it) or a
// writer (writes chunks into the target's slots, reusing a slot once it was
// acknowledged). It takes its settings from the environment, talks to the
// test through stdin (commands) and stdout (events, one JSON object a
// line), and measures its own leaks after closing its engine.

// configEnv carries the agent's settings; its role (target, writer,
// reap) is its testutil role.
const configEnv = "FERRY_FAULT_CONFIG"

type agentConfig struct {
	Transport        string
	Node             string
	Chunk            int // bytes per write
	Slots            int // chunks in flight (the target's buffer)
	Chunks           int // writer: chunks to write
	Seed             uint64
	RequestTimeout   time.Duration
	HandshakeTimeout time.Duration
	LivenessInterval time.Duration
	StuckTimeout     time.Duration
	CloseTimeout     time.Duration
}

func (c agentConfig) engineConfig() fabric.Config {
	return fabric.Config{Transport: c.Transport, Node: c.Node, NICs: 1, RequestTimeout: c.RequestTimeout,
		HandshakeTimeout: c.HandshakeTimeout, LivenessInterval: c.LivenessInterval, StuckTimeout: c.StuckTimeout}
}

// event is what an agent reports; fields are used as the kind needs.
type event struct {
	Kind string `json:"kind"` // ready, error, lost, result, closed
	Addr string `json:"addr,omitempty"`
	Desc string `json:"desc,omitempty"`
	At   int64  `json:"at,omitempty"` // unix nanoseconds
	Err  string `json:"err,omitempty"`

	PeerLost  bool `json:"peer_lost,omitempty"`
	Timeout   bool `json:"timeout,omitempty"`
	Abandoned bool `json:"abandoned,omitempty"`

	// writer results
	Submitted  int64  `json:"submitted,omitempty"`
	Succeeded  int64  `json:"succeeded,omitempty"`
	Failed     int64  `json:"failed,omitempty"`
	Refused    int64  `json:"refused,omitempty"`
	Acked      int64  `json:"acked,omitempty"`
	LastEndAt  int64  `json:"last_end_at,omitempty"`
	Unfinished int64  `json:"unfinished,omitempty"`
	Stats      string `json:"stats,omitempty"`

	// target results
	Verified   int64 `json:"verified,omitempty"`
	Mismatches int64 `json:"mismatches,omitempty"`

	// closed: leak checks
	CloseErr       string `json:"close_err,omitempty"`
	GoroutinesLeft int    `json:"goroutines_left,omitempty"`
	FDsLeft        int    `json:"fds_left,omitempty"`
	FDsLeftNames   string `json:"fds_left_names,omitempty"` // what the leaked descriptors point at
	Regions        int    `json:"regions,omitempty"`
}

var outMu sync.Mutex

func emit(ev event) {
	b, _ := json.Marshal(ev)
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf("EVENT %s\n", b)
}

// runAgent runs the agent role names and returns the exit
// status.
func runAgent(role string) int {
	var cfg agentConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent config:", err)
		return 2
	}
	var err error
	cmds := commands() // before the goroutine baseline: it outlives the engine
	switch role {
	case "target":
		err = runTarget(cfg, cmds)
	case "writer":
		err = runWriter(cfg, cmds)
	case "reap":
		// Opening an shm endpoint removes what dead processes left.
		err = withEngine(cfg, func(*fabric.Engine) error { return nil })
	default:
		err = fmt.Errorf("unknown agent %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

// withEngine opens and closes a throwaway engine (libfabric sets up its
// process-wide state the first time), takes the goroutine and descriptor
// baseline, runs f with a fresh engine, closes it and reports what was
// left behind.
func withEngine(cfg agentConfig, f func(*fabric.Engine) error) error {
	warm, err := fabric.Open(context.Background(), cfg.engineConfig())
	if err != nil {
		return err
	}
	_ = warm.Close(context.Background())
	g0, fds0 := runtime.NumGoroutine(), openFDs()
	e, err := fabric.Open(context.Background(), cfg.engineConfig())
	if err != nil {
		return err
	}
	ferr := f(e)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.CloseTimeout)
	cerr := e.Close(ctx)
	cancel()
	closed := event{Kind: "closed", Regions: e.Regions()}
	if cerr != nil {
		closed.CloseErr = cerr.Error()
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	closed.GoroutinesLeft = runtime.NumGoroutine() - g0
	// Descriptors are closed synchronously by Close; the wait only
	// absorbs a provider thread finishing its own teardown.
	var left []string
	for {
		left = newFDs(fds0, openFDs())
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	closed.FDsLeft = len(left)
	closed.FDsLeftNames = strings.Join(left, " ")
	emit(closed)
	return ferr
}

// openFDs maps each open descriptor number to what it points at.
func openFDs() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	fds := make(map[string]string, len(ents))
	self := fmt.Sprintf("/proc/%d/fd", os.Getpid())
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		if target == self {
			continue // the listing's own descriptor
		}
		fds[e.Name()] = target
	}
	return fds
}

// newFDs lists the descriptors of now that before did not have (or had
// pointing elsewhere), as "number->target".
func newFDs(before, now map[string]string) []string {
	var left []string
	for fd, target := range now {
		if before[fd] != target {
			left = append(left, fd+"->"+target)
		}
	}
	sort.Strings(left)
	return left
}

// commands reads the test's commands from stdin.
func commands() <-chan []string {
	ch := make(chan []string, 4)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			ch <- strings.Fields(sc.Text())
		}
		close(ch)
	}()
	return ch
}

// fillChunk writes chunk k's pattern for seed into b (a multiple of 8).
func fillChunk(b []byte, seed uint64, k int) {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
	x := seed ^ uint64(k)*0x9e3779b97f4a7c15
	for i := range w {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		w[i] = z ^ z>>31
	}
}

// checkChunk reports whether b holds chunk k's pattern.
func checkChunk(b []byte, seed uint64, k int, scratch []byte) bool {
	fillChunk(scratch, seed, k)
	return string(b) == string(scratch)
}

func runTarget(cfg agentConfig, cmds <-chan []string) error {
	return withEngine(cfg, func(e *fabric.Engine) error {
		buf, err := fabric.AllocHost(cfg.Slots * cfg.Chunk)
		if err != nil {
			return err
		}
		defer buf.Free()
		reg, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
		if err != nil {
			return err
		}
		desc, _ := reg.Descriptor()
		dtext, _ := desc.MarshalText()
		arrived := make(chan uint32, 2*cfg.Slots)
		quit := make(chan struct{})
		e.OnImm(func(imm uint32) {
			select {
			case arrived <- imm:
			case <-quit:
			}
		})
		e.OnPeerLost(func(pe *fabric.PeerError) {
			emit(event{Kind: "lost", At: time.Now().UnixNano(), Addr: pe.Peer.String(), Err: pe.Error()})
		})
		emit(event{Kind: "ready", Addr: e.MainAddress().String(), Desc: string(dtext)})
		var writer fabric.Address
		for writer.IsZero() {
			c, ok := <-cmds
			if !ok {
				return errors.New("stdin closed before the writer's address")
			}
			if len(c) == 2 && c[0] == "peer" {
				if writer, err = fabric.ParseAddress(c[1]); err != nil {
					return err
				}
			}
		}
		stop, err := e.WatchPeer(writer)
		if err != nil {
			return err
		}
		defer stop()
		var verified, mismatches atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			scratch := make([]byte, cfg.Chunk)
			ack := make([]byte, 8)
			for {
				var imm uint32
				select {
				case imm = <-arrived:
				case <-quit:
					return
				}
				k := int(imm)
				slot := buf.Bytes()[(k%cfg.Slots)*cfg.Chunk:][:cfg.Chunk]
				if checkChunk(slot, cfg.Seed, k, scratch) {
					verified.Add(int64(cfg.Chunk))
				} else {
					mismatches.Add(1)
				}
				binary.LittleEndian.PutUint64(ack, uint64(k))
				ctx, cancel := context.WithTimeout(context.Background(), cfg.RequestTimeout)
				_ = e.Send(ctx, writer, ack, fabric.Completion{})
				cancel()
			}
		}()
		for c := range cmds {
			if len(c) > 0 && c[0] == "quit" {
				break
			}
		}
		close(quit)
		<-done
		emit(event{Kind: "result", Verified: verified.Load(), Mismatches: mismatches.Load(), Stats: statsLine(e)})
		return nil
	})
}

func statsLine(e *fabric.Engine) string {
	s := e.Stats()
	return fmt.Sprintf("completed %d failed %d expired %d peers-lost %d unmatched %d late %d",
		s.Completed, s.Failed, s.Expired, s.PeersLost, s.Unmatched, s.Late)
}

func runWriter(cfg agentConfig, cmds <-chan []string) error {
	return withEngine(cfg, func(e *fabric.Engine) error {
		buf, err := fabric.AllocHost(cfg.Slots * cfg.Chunk)
		if err != nil {
			return err
		}
		defer buf.Free()
		src, err := e.RegisterHost(buf, fabric.AccessLocal)
		if err != nil {
			return err
		}
		acks := make(chan int, 4*cfg.Slots)
		if err := e.BouncingRecvs(4*cfg.Slots, 64, func(b []byte) {
			if len(b) == 8 {
				acks <- int(binary.LittleEndian.Uint64(b))
			}
		}, nil); err != nil {
			return err
		}
		emit(event{Kind: "ready", Addr: e.MainAddress().String()})
		var dst fabric.Descriptor
		for len(dst.NICs) == 0 {
			c, ok := <-cmds
			if !ok {
				return errors.New("stdin closed before the target's descriptor")
			}
			if len(c) == 3 && c[0] == "peer" {
				if dst, err = fabric.ParseDescriptor(c[2]); err != nil {
					return err
				}
			}
		}
		// The writer waits for acknowledgements from the target: it
		// watches it, as an application waiting for a peer's answers
		// should, so that waiting ends when the target dies.
		stop, err := e.WatchPeer(dst.NICs[0].Addr)
		if err != nil {
			return err
		}
		defer stop()
		w := &writer{cfg: cfg, e: e, src: src, buf: buf, dst: dst, acks: acks}
		w.run()
		for c := range cmds {
			if len(c) > 0 && c[0] == "quit" {
				break
			}
		}
		return nil
	})
}

// writer streams chunks into the target's slots.
type writer struct {
	cfg  agentConfig
	e    *fabric.Engine
	src  *fabric.MemoryRegion
	buf  *fabric.HostBuffer
	dst  fabric.Descriptor
	acks chan int

	submitted, succeeded, failed, refused, acked atomic.Int64
	firstErr                                     atomic.Pointer[error]
	lastEnd                                      atomic.Int64
}

func (w *writer) fail(err error) {
	if w.firstErr.CompareAndSwap(nil, &err) {
		emit(event{Kind: "error", At: time.Now().UnixNano(), Err: err.Error(),
			PeerLost: errors.Is(err, fabric.ErrPeerLost), Timeout: errors.Is(err, fabric.ErrTimeout),
			Abandoned: errors.Is(err, fabric.ErrAbandoned)})
	}
}

func (w *writer) run() {
	cfg := w.cfg
	busy := make([]int, cfg.Slots) // chunk+1 whose ack a slot waits for, 0 when free
	written := make([]bool, cfg.Slots)
	pendingWrite := make([]chan struct{}, cfg.Slots)
	takeAck := func(k int) {
		s := k % cfg.Slots
		if busy[s] == k+1 {
			busy[s] = 0
			w.acked.Add(1)
		}
	}
	for k := 0; k < cfg.Chunks && w.firstErr.Load() == nil; k++ {
		s := k % cfg.Slots
		wait := time.NewTimer(cfg.RequestTimeout + 2*time.Second)
		for busy[s] != 0 && w.firstErr.Load() == nil {
			select {
			case a := <-w.acks:
				takeAck(a)
			case <-wait.C:
				w.fail(fmt.Errorf("chunk %d: no acknowledgement of chunk %d within %v", k, busy[s]-1, cfg.RequestTimeout))
			case <-time.After(10 * time.Millisecond):
				if err := w.e.PeerStatus(w.dst.NICs[0].Addr); err != nil {
					w.fail(err)
				}
			}
		}
		wait.Stop()
		if w.firstErr.Load() != nil {
			break
		}
		if written[s] {
			// The NIC must be done with the slot's previous chunk.
			select {
			case <-pendingWrite[s]:
			case <-time.After(cfg.RequestTimeout + cfg.StuckTimeout + 2*time.Second):
				w.fail(fmt.Errorf("chunk %d: the write of chunk %d never ended", k, k-cfg.Slots))
			}
			if w.firstErr.Load() != nil {
				break
			}
		}
		fillChunk(w.buf.Bytes()[s*cfg.Chunk:][:cfg.Chunk], cfg.Seed, k)
		ch := make(chan struct{})
		pendingWrite[s], written[s], busy[s] = ch, true, k+1
		err := w.e.SubmitSingle(fabric.SingleWrite{Src: w.src, SrcOffset: uint64(s * cfg.Chunk), Length: uint64(cfg.Chunk),
			Dst: w.dst, DstOffset: uint64(s * cfg.Chunk), Imm: fabric.Immediate(uint32(k))},
			fabric.OnDone(func(err error) {
				if err != nil {
					w.failed.Add(1)
					w.fail(err)
				} else {
					w.succeeded.Add(1)
				}
				w.lastEnd.Store(time.Now().UnixNano())
				close(ch)
			}))
		if err != nil {
			w.refused.Add(1)
			w.fail(err)
			close(ch)
			break
		}
		w.submitted.Add(1)
	}
	// Every submitted write must end: within its deadline, or at once
	// for a lost peer.
	limit := time.After(cfg.RequestTimeout + cfg.StuckTimeout + 5*time.Second)
	for s := range pendingWrite {
		if !written[s] {
			continue
		}
		select {
		case <-pendingWrite[s]:
		case <-limit:
		}
	}
	if w.firstErr.Load() == nil {
		// The last acknowledgements.
		limit := time.After(cfg.RequestTimeout)
	acks:
		for w.acked.Load() < int64(cfg.Chunks) {
			select {
			case a := <-w.acks:
				takeAck(a)
			case <-limit:
				w.fail(fmt.Errorf("%d of %d chunks acknowledged", w.acked.Load(), cfg.Chunks))
				break acks
			}
		}
	}
	ev := event{Kind: "result", Submitted: w.submitted.Load(), Succeeded: w.succeeded.Load(), Failed: w.failed.Load(),
		Refused: w.refused.Load(), Acked: w.acked.Load(), LastEndAt: w.lastEnd.Load(), Stats: statsLine(w.e)}
	ev.Unfinished = ev.Submitted - ev.Succeeded - ev.Failed
	if p := w.firstErr.Load(); p != nil {
		ev.Err = (*p).Error()
	}
	emit(ev)
}
