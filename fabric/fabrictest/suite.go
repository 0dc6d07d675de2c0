package fabrictest

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Params selects the transport the suite runs on: its name, the node
// address to bind (libfabric's tcp wants "127.0.0.1" in tests), NICs per
// engine (1-4) and the poll mode.
type Params struct {
	Transport string
	Node      string
	NICs      int
	Poll      fabric.PollMode
	// TargetNICs, when set, is the target engine's (B's) NIC count; zero
	// means NICs. RunPairings sets it.
	TargetNICs int
}

// target returns the parameters of the target engine B.
func (p Params) target() Params {
	if p.TargetNICs != 0 {
		p.NICs = p.TargetNICs
	}
	return p
}

// targetNICs is B's NIC count.
func (p Params) targetNICs() int { return p.target().NICs }

// Timeout bounds every wait in the suite.
const Timeout = 20 * time.Second

// Env is two engines (a writer A and a target B) with registered buffers.
type Env struct {
	T      testing.TB
	P      Params
	A, B   *fabric.Engine
	Src    *fabric.HostBuffer
	Dst    *fabric.HostBuffer
	Aux    *fabric.HostBuffer // spare memory that outlives the engines
	SrcReg *fabric.MemoryRegion
	DstReg *fabric.MemoryRegion
	Desc   fabric.Descriptor
}

// BufSize is the size of each side's buffer.
const BufSize = 4 << 20

// OpenEngine opens an engine for p and closes it at cleanup, checking
// that nothing leaks.
func OpenEngine(tb testing.TB, p Params) *fabric.Engine {
	tb.Helper()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: p.Transport, Node: p.Node, NICs: p.NICs, Poll: p.Poll})
	if errors.Is(err, fabric.ErrNotSupported) {
		testutil.Skip(tb, FeatureOf(p.Transport), "transport %s cannot open here: %v", p.Transport, err)
	}
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		require.NoError(tb, e.Close(ctx))
		require.Zero(tb, e.Regions(), "registrations left after close")
	})
	return e
}

// NewEnv opens two engines and registers a source on A and a remote-writable
// destination on B.
func NewEnv(tb testing.TB, p Params) *Env {
	tb.Helper()
	env := &Env{T: tb, P: p}
	var err error
	// Buffers are allocated before the engines so that their cleanups run
	// after the engines closed: memory must outlive its registration.
	env.Src, err = fabric.AllocHost(BufSize)
	require.NoError(tb, err)
	env.Dst, err = fabric.AllocHost(BufSize)
	require.NoError(tb, err)
	env.Aux, err = fabric.AllocHost(1 << 16)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = env.Src.Free(); _ = env.Dst.Free(); _ = env.Aux.Free() })
	env.A, env.B = OpenEngine(tb, p), OpenEngine(tb, p.target())
	r := rand.New(rand.NewPCG(1, 2))
	for i := range env.Src.Bytes() {
		env.Src.Bytes()[i] = byte(r.Uint32())
	}
	env.SrcReg, err = env.A.RegisterHost(env.Src, fabric.AccessLocal)
	require.NoError(tb, err)
	env.DstReg, err = env.B.RegisterHost(env.Dst, fabric.AccessRemoteWrite)
	require.NoError(tb, err)
	env.Desc, err = env.DstReg.Descriptor()
	require.NoError(tb, err)
	return env
}

// Ctx returns a context bounded by Timeout.
func Ctx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	tb.Cleanup(cancel)
	return ctx
}

// Wait submits through fn with a Transfer and waits for it.
func Wait(tb testing.TB, fn func(c fabric.Completion) error) error {
	tb.Helper()
	t := fabric.NewTransfer()
	if err := fn(fabric.Notify(t)); err != nil {
		return err
	}
	return t.Wait(Ctx(tb))
}

// ImmCollector records every immediate no counter claimed.
type ImmCollector struct {
	mu   sync.Mutex
	seen map[uint32]int
	n    atomic.Int64
}

// Collect installs a collector on e.
func Collect(e *fabric.Engine) *ImmCollector {
	c := &ImmCollector{seen: map[uint32]int{}}
	e.OnImm(func(imm uint32) {
		c.mu.Lock()
		c.seen[imm]++
		c.mu.Unlock()
		c.n.Add(1)
	})
	return c
}

// Count returns how many times imm arrived.
func (c *ImmCollector) Count(imm uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[imm]
}

// WaitTotal waits until n immediates arrived in total.
func (c *ImmCollector) WaitTotal(tb testing.TB, n int64) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for c.n.Load() < n {
		if time.Now().After(deadline) {
			tb.Fatalf("waited for %d immediates, got %d", n, c.n.Load())
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// Settle gives late immediates a moment to arrive (to check none do).
func Settle() { time.Sleep(50 * time.Millisecond); runtime.Gosched() }

// Run runs the whole suite for p.
func Run(t *testing.T, p Params) {
	t.Run("Single", func(t *testing.T) { testSingle(t, p) })
	t.Run("SingleAtEndOfRegion", func(t *testing.T) { testSingleAtEnd(t, p) })
	t.Run("SingleRoundRobinAfterPaged", func(t *testing.T) { testRoundRobinMix(t, p) })
	t.Run("Paged", func(t *testing.T) { testPaged(t, p) })
	t.Run("PagedManyBackPressure", func(t *testing.T) { testPagedMany(t, p) })
	t.Run("Imm", func(t *testing.T) { testImm(t, p) })
	t.Run("Barrier", func(t *testing.T) { testBarrier(t, p) })
	t.Run("Scatter", func(t *testing.T) { testScatter(t, p) })
	t.Run("Read", func(t *testing.T) { testRead(t, p) })
	t.Run("PagedRead", func(t *testing.T) { testPagedRead(t, p) })
	t.Run("ReadRacingWrites", func(t *testing.T) { testReadRacingWrites(t, p) })
	t.Run("ReadRefused", func(t *testing.T) { testReadRefused(t, p) })
	t.Run("ScatterRead", func(t *testing.T) { testScatterRead(t, p) })
	t.Run("ImmCountExpected", func(t *testing.T) { testImmCount(t, p) })
	t.Run("ImmCounterCredit", func(t *testing.T) { testCredit(t, p) })
	t.Run("FlagCounter", func(t *testing.T) { testFlag(t, p) })
	t.Run("ImmRegisterRace", func(t *testing.T) { testImmRegisterRace(t, p) })
	t.Run("ImmHeldUntilClaimed", func(t *testing.T) { testImmHeld(t, p) })
	t.Run("Completions", func(t *testing.T) { testCompletions(t, p) })
	t.Run("SendRecv", func(t *testing.T) { testSendRecv(t, p) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, p) })
	t.Run("UnregisterAfterSubmit", func(t *testing.T) { testUnregisterAfterSubmit(t, p) })
	t.Run("Close", func(t *testing.T) { testClose(t, p) })
	t.Run("InfoStats", func(t *testing.T) { testInfo(t, p) })
	t.Run("Connect", func(t *testing.T) { testConnect(t, p) })
	runLeases(t, p)
}
