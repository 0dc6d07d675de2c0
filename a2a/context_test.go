package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/memsim"
)

// fakeBackend records calls; fail makes the named call fail, block makes
// DispatchSend wait for release.
type fakeBackend struct {
	mu      sync.Mutex
	calls   []string
	closes  int
	fail    string
	block   chan struct{}
	entered chan struct{}
}

var errFake = errors.New("fake transport failure")

func (f *fakeBackend) record(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	if f.fail == name {
		return errFake
	}
	return nil
}

func (f *fakeBackend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	if f.block != nil {
		close(f.entered)
		<-f.block
	}
	return f.record("DispatchSend")
}
func (f *fakeBackend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	return f.record("DispatchRecv")
}
func (f *fakeBackend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	return f.record("CombineSend")
}
func (f *fakeBackend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	return f.record("CombineRecv")
}
func (f *fakeBackend) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes++
	return nil
}

func smallConfig() a2a.Config {
	return a2a.Config{WorldSize: 2, MaxTokens: 4, Hidden: 4, DispatchType: a2a.BF16, CombineType: a2a.BF16,
		Experts: 4, ExpertsPerToken: 2}
}

type buffers struct {
	in   a2a.DispatchInput
	dout a2a.DispatchOutput
	cin  a2a.CombineInput
	cout a2a.CombineOutput
}

func newBuffers(l *a2a.Layout, m int) *buffers {
	return &buffers{
		in: a2a.DispatchInput{Tokens: m, X: make([]byte, m*l.TokenBytes),
			Indices: []uint32{0, 1, 2, 3, 1, 2, 3, 0}[:m*l.ExpertsPerToken]},
		dout: a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)},
		cin:  a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)},
		cout: a2a.CombineOutput{Out: make([]byte, m*l.CombineBytes), Weights: make([]float32, m*l.ExpertsPerToken)},
	}
}

func TestContextCallOrder(t *testing.T) {
	f := &fakeBackend{}
	c, err := a2a.New(smallConfig(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b := newBuffers(c.Layout(), 4)

	var oe *a2a.OrderError
	for name, call := range map[string]func() error{
		"DispatchRecv": func() error { return c.DispatchRecv(ctx, &b.dout) },
		"CombineSend":  func() error { return c.CombineSend(ctx, &b.cin) },
		"CombineRecv":  func() error { return c.CombineRecv(ctx, &b.cout) },
	} {
		if err := call(); !errors.Is(err, a2a.ErrCallOrder) || !errors.As(err, &oe) || oe.Call != name {
			t.Fatalf("%s before DispatchSend: %v", name, err)
		}
	}
	for it := 0; it < 2; it++ {
		if err := c.DispatchSend(ctx, &b.in); err != nil {
			t.Fatal(err)
		}
		if err := c.DispatchSend(ctx, &b.in); !errors.Is(err, a2a.ErrCallOrder) {
			t.Fatalf("second DispatchSend: %v", err)
		}
		if err := c.CombineSend(ctx, &b.cin); !errors.Is(err, a2a.ErrCallOrder) {
			t.Fatalf("CombineSend before DispatchRecv: %v", err)
		}
		if err := c.DispatchRecv(ctx, &b.dout); err != nil {
			t.Fatal(err)
		}
		if err := c.DispatchSend(ctx, &b.in); !errors.Is(err, a2a.ErrCallOrder) {
			t.Fatalf("DispatchSend before combine: %v", err)
		}
		if err := c.Combine(ctx, &b.cin, &b.cout); err != nil {
			t.Fatal(err)
		}
	}
	want := "DispatchSend DispatchRecv CombineSend CombineRecv DispatchSend DispatchRecv CombineSend CombineRecv"
	if got := joinCalls(f); got != want {
		t.Fatalf("calls: %s", got)
	}
}

func joinCalls(f *fakeBackend) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := ""
	for i, c := range f.calls {
		if i > 0 {
			s += " "
		}
		s += c
	}
	return s
}

func TestContextBadArgumentsChangeNothing(t *testing.T) {
	f := &fakeBackend{}
	c, err := a2a.New(smallConfig(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l := c.Layout()
	b := newBuffers(l, 4)
	bad := []a2a.DispatchInput{
		{Tokens: 5, X: make([]byte, 5*l.TokenBytes), Indices: make([]uint32, 10)},
		{Tokens: 4, X: make([]byte, 3), Indices: b.in.Indices},
		{Tokens: 4, X: b.in.X, XStride: 2, Indices: b.in.Indices},
		{Tokens: 1, X: b.in.X, Indices: []uint32{3, 3}},
		{Tokens: 1, X: b.in.X, Indices: []uint32{3, 9}},
	}
	for i := range bad {
		if err := c.DispatchSend(ctx, &bad[i]); !errors.Is(err, a2a.ErrInvalidArgument) {
			t.Fatalf("bad input %d: %v", i, err)
		}
	}
	short := b.dout
	short.X = short.X[:len(short.X)-1]
	if err := c.Dispatch(ctx, &b.in, &short); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("short output: %v", err)
	}
	if joinCalls(f) != "" {
		t.Fatalf("backend called: %s", joinCalls(f))
	}
	if err := c.Dispatch(ctx, &b.in, &b.dout); err != nil {
		t.Fatal(err)
	}
	shortOut := b.cout
	shortOut.Weights = shortOut.Weights[:3]
	if err := c.Combine(ctx, &b.cin, &shortOut); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("short weights: %v", err)
	}
	if err := c.Combine(ctx, &b.cin, &b.cout); err != nil {
		t.Fatal(err)
	}
}

func TestContextBrokenAndClosed(t *testing.T) {
	f := &fakeBackend{fail: "DispatchRecv"}
	c, err := a2a.New(smallConfig(), f)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := newBuffers(c.Layout(), 2)
	if err := c.DispatchSend(ctx, &b.in); err != nil {
		t.Fatal(err)
	}
	if err := c.DispatchRecv(ctx, &b.dout); !errors.Is(err, errFake) {
		t.Fatalf("failing recv: %v", err)
	}
	for _, err := range []error{c.DispatchSend(ctx, &b.in), c.DispatchRecv(ctx, &b.dout), c.CombineSend(ctx, &b.cin)} {
		if !errors.Is(err, a2a.ErrBroken) || !errors.Is(err, errFake) {
			t.Fatalf("after failure: %v", err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f.closes != 1 {
		t.Fatalf("backend closed %d times", f.closes)
	}
	if err := c.DispatchSend(ctx, &b.in); !errors.Is(err, a2a.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestContextBusy(t *testing.T) {
	f := &fakeBackend{block: make(chan struct{}), entered: make(chan struct{})}
	c, err := a2a.New(smallConfig(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b := newBuffers(c.Layout(), 1)
	done := make(chan error)
	go func() { done <- c.DispatchSend(ctx, &b.in) }()
	<-f.entered
	if err := c.DispatchRecv(ctx, &b.dout); !errors.Is(err, a2a.ErrBusy) {
		t.Fatalf("concurrent call: %v", err)
	}
	if err := c.Combine(ctx, &b.cin, &b.cout); !errors.Is(err, a2a.ErrBusy) {
		t.Fatalf("concurrent combine: %v", err)
	}
	close(f.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := c.DispatchRecv(ctx, &b.dout); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejects(t *testing.T) {
	f := &fakeBackend{}
	bad := smallConfig()
	bad.NVLinkSize = 3
	if _, err := a2a.New(bad, f); !errors.Is(err, a2a.ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	if f.closes != 1 {
		t.Fatalf("backend of a refused config closed %d times", f.closes)
	}
	if _, err := a2a.New(smallConfig(), nil); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("nil backend: %v", err)
	}
}

// TestContextTimeout: a peer that never calls leaves the others waiting
// until their ctx ends; they get ErrTimeout, then ErrBroken.
func TestContextTimeout(t *testing.T) {
	cfg := smallConfig()
	world, err := memsim.NewWorld(cfg, memsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2a.New(cfg, world.Backend(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := newBuffers(c.Layout(), 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Dispatch(ctx, &b.in, &b.dout); !errors.Is(err, a2a.ErrTimeout) {
		t.Fatalf("lonely dispatch: %v", err)
	}
	if err := c.DispatchSend(context.Background(), &b.in); !errors.Is(err, a2a.ErrBroken) || !errors.Is(err, a2a.ErrTimeout) {
		t.Fatalf("after timeout: %v", err)
	}
}

// TestZeroTokensEverywhere runs several iterations in which no rank has a
// token: the reference hung here.
func TestZeroTokensEverywhere(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 4, Hidden: 4, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 2, NICsPerGPU: 2}
	world, err := memsim.NewWorld(cfg, memsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, cfg.WorldSize)
	for r := range errs {
		c := cfg
		c.Rank = r
		ctx, err := a2a.New(c, world.Backend(r))
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		b := newBuffers(ctx.Layout(), 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for it := 0; it < 3 && errs[r] == nil; it++ {
				if errs[r] = ctx.Dispatch(tctx, &b.in, &b.dout); errs[r] == nil {
					errs[r] = ctx.Combine(tctx, &b.cin, &b.cout)
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := world.Residue(); err != nil {
		t.Fatal(err)
	}
}

// memberBackend is a fakeBackend that can change members.
type memberBackend struct {
	fakeBackend
	joining bool
}

func (f *memberBackend) Quiesce(ctx context.Context) error { return f.record("Quiesce") }
func (f *memberBackend) SetActive(ctx context.Context, p *a2a.Planner, m *a2a.Membership) error {
	return f.record("SetActive")
}
func (f *memberBackend) Joining() bool { return f.joining }

// TestSetActiveRanksRules: the membership call keeps the call-order
// contract (only between iterations, after a failure, or first on a
// joining rank), takes only growing generations in another bank and masks
// that hold the calling rank, revives a broken context, and is refused by
// a backend that cannot run without some ranks.
func TestSetActiveRanksRules(t *testing.T) {
	cfg := smallConfig()
	ctx := context.Background()
	all, without1 := []bool{true, true}, []bool{true, false}

	c, err := a2a.New(cfg, &fakeBackend{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 1, Active: all}); !errors.Is(err, a2a.ErrNotSupported) {
		t.Fatalf("plain backend: %v", err)
	}

	fb := &memberBackend{fakeBackend: fakeBackend{fail: "CombineSend"}}
	c, err = a2a.New(cfg, fb)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]a2a.Membership{
		"generation 0":       {Generation: 0, Active: all},
		"same bank":          {Generation: a2a.ImmBanks, Active: all},
		"short mask":         {Generation: 1, Active: []bool{true}},
		"calling rank out":   {Generation: 1, Active: []bool{false, true}},
		"no mask":            {Generation: 1},
		"long mask":          {Generation: 1, Active: []bool{true, true, true}},
		"calling rank alone": {Generation: 1, Active: []bool{false, false}},
	} {
		if err := c.SetActiveRanks(ctx, m); !errors.Is(err, a2a.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(fb.calls) != 0 {
		t.Fatalf("refused calls reached the backend: %v", fb.calls)
	}
	l := c.Layout()
	b := newBuffers(l, 2)
	if err := c.DispatchSend(ctx, &b.in); err != nil {
		t.Fatal(err)
	}
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 1, Active: without1}); !errors.Is(err, a2a.ErrCallOrder) {
		t.Fatalf("mid-iteration: %v", err)
	}
	if err := c.DispatchRecv(ctx, &b.dout); err != nil {
		t.Fatal(err)
	}
	if err := c.CombineSend(ctx, &b.cin); !errors.Is(err, errFake) {
		t.Fatalf("combine send: %v", err)
	}
	if err := c.DispatchSend(ctx, &b.in); !errors.Is(err, a2a.ErrBroken) {
		t.Fatalf("broken: %v", err)
	}
	// The survivors' way on: the failure is cleared, the next iteration
	// plans without rank 1 (its experts 2 and 3 dropped, and reported).
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 1, Active: without1}); err != nil {
		t.Fatalf("revive: %v", err)
	}
	if g := c.Generation(); g != 1 {
		t.Fatalf("generation %d", g)
	}
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 1 + a2a.ImmBanks, Active: all}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("the current bank again: %v", err)
	}
	fb.fail = ""
	b.dout.DroppedExperts = make([]int32, l.Experts)
	if err := c.Dispatch(ctx, &b.in, &b.dout); err != nil {
		t.Fatal(err)
	}
	// Tokens {0,1} and {2,3}: experts 2 and 3 belong to rank 1.
	if b.dout.Dropped != 2 || b.dout.DroppedExperts[2] != 1 || b.dout.DroppedExperts[3] != 1 || b.dout.DroppedExperts[0] != 0 {
		t.Fatalf("dropped %d, per expert %v", b.dout.Dropped, b.dout.DroppedExperts)
	}
	want := []string{"DispatchSend", "DispatchRecv", "CombineSend", "Quiesce", "SetActive", "DispatchSend", "DispatchRecv"}
	if fmt.Sprint(fb.calls) != fmt.Sprint(want) {
		t.Fatalf("backend calls %v, want %v", fb.calls, want)
	}

	// A joining rank does nothing before it joined, and needs an exchange.
	jb := &memberBackend{joining: true}
	j, err := a2a.New(cfg, jb)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.DispatchSend(ctx, &b.in); !errors.Is(err, a2a.ErrCallOrder) {
		t.Fatalf("dispatch before joining: %v", err)
	}
	if err := j.SetActiveRanks(ctx, a2a.Membership{Generation: 3, Active: all}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("join without an exchange: %v", err)
	}
	if err := j.SetActiveRanks(ctx, a2a.Membership{Generation: 3, Active: all, Exchange: nopExchange{}}); err != nil {
		t.Fatalf("join: %v", err)
	}
	if err := j.DispatchSend(ctx, &b.in); err != nil {
		t.Fatalf("dispatch after joining: %v", err)
	}
}

type nopExchange struct{}

func (nopExchange) AllGather(ctx context.Context, data []byte) ([][]byte, error) { return nil, nil }
