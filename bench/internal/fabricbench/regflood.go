package fabricbench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
)

// The flood-while-register benchmark: what registering a large region
// costs the transfers of the group it is registered on. A writer engine
// floods a target with writes (Bytes each, Depth in flight) without
// pause. Each round registers a fresh region of RegisterBytes on the
// writer's group (fresh memory, so the registration faults and pins every
// page, as a first registration does) and counts the flood's completions
// during exactly that window, then counts them over an equally long
// window with no registration: the ratio of the two rates is the figure.
// The same runs once with registration beside the worker (what the
// provider allows) and once kept on the worker (Config.RegisterOnWorker,
// the engine's behaviour before registration moved), on fresh engines.
// Then registration alone is timed on engines of 1, 2 and 4 NICs.

// RegFloodSpec configures RegFlood.
type RegFloodSpec struct {
	Transport string
	Node      string
	// FloodNICs is the writer's and target's NIC count for the flood.
	FloodNICs int
	// Bytes is each write's size; Depth the writes kept in flight.
	Bytes uint64
	Depth int
	// RegisterBytes is the size of the region registered beside the
	// flood.
	RegisterBytes uint64
	// Rounds of (registering window, quiet window) per mode; RegRounds
	// registrations per NIC count timed alone (default Rounds).
	Rounds, RegRounds int
	// RegNICs are the NIC counts registration is timed on alone.
	RegNICs []int
	// HugePages backs the registered region (AllocHostWith).
	HugePages fabric.HugePages
	// Window, when set, is the registering window's least length: a
	// registration that ends sooner is undone and done again (the pages
	// then only pinned) until the window has passed, so the flood is
	// measured over Window of registration work rather than over a
	// registration shorter than its own queue's drain time. Zero: one
	// registration per window, the window at least 200 ms.
	Window time.Duration
	// Prefault writes every page of the region before its registering
	// window (and outside the quiet ones), so the registration pins
	// pages that are already there, as it does for a pool the program
	// already uses, instead of also allocating and zeroing them.
	Prefault bool
	// Timeout bounds the whole run.
	Timeout time.Duration
	// StuckTimeout is the engines' Config.StuckTimeout: registering on
	// the worker holds it inside a provider call for as long as the
	// registration takes, which on a slow machine (a VM without KVM) is
	// longer than the default; the benchmark measures that stall, it
	// must not end it (default 10 minutes).
	StuckTimeout time.Duration
	// Progress, when set, gets a line per round as the run goes.
	Progress io.Writer
	// OnWorker lists the modes to run: false is registration beside the
	// worker (as the provider allows), true kept on it (default both).
	OnWorker []bool
}

func (s RegFloodSpec) withDefaults() RegFloodSpec {
	if s.FloodNICs <= 0 {
		s.FloodNICs = 1
	}
	if s.Bytes == 0 {
		s.Bytes = 64 << 10
	}
	if s.Depth <= 0 {
		s.Depth = 64
	}
	if s.RegisterBytes == 0 {
		s.RegisterBytes = 1 << 30
	}
	if s.Rounds <= 0 {
		s.Rounds = 5
	}
	if s.RegNICs == nil {
		s.RegNICs = []int{1, 2, 4}
	}
	if s.Timeout <= 0 {
		s.Timeout = 10 * time.Minute
	}
	if s.RegRounds <= 0 {
		s.RegRounds = s.Rounds
	}
	if s.StuckTimeout == 0 {
		s.StuckTimeout = 10 * time.Minute
	}
	if s.Progress == nil {
		s.Progress = io.Discard
	}
	if len(s.OnWorker) == 0 {
		s.OnWorker = []bool{false, true}
	}
	return s
}

// RegFloodRow is one mode's flood figures.
type RegFloodRow struct {
	Mode      string    // "beside" or "on-worker"
	RegMode   string    // what the engine reported (RegistrationStats.Modes)
	Quiet     float64   // flood bytes/s with no registration, median
	During    float64   // flood bytes/s while registering, median
	Ratio     float64   // median of the rounds' During/Quiet
	Rounds    []float64 // each round's During/Quiet
	RegTime   time.Duration
	UnregTime time.Duration
}

// RegTimeRow is registration alone on an engine of NICs NICs.
type RegTimeRow struct {
	NICs      int
	Mode      string
	RegTime   time.Duration // median
	UnregTime time.Duration // median
	Err       error         // why this NIC count could not run
}

// RegFloodReport is RegFlood's result.
type RegFloodReport struct {
	Spec  RegFloodSpec
	Flood []RegFloodRow
	Reg   []RegTimeRow
}

// RegFlood runs the benchmark.
func RegFlood(ctx context.Context, s RegFloodSpec) (*RegFloodReport, error) {
	s = s.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	rep := &RegFloodReport{Spec: s}
	for _, onWorker := range s.OnWorker {
		row, err := regFloodMode(ctx, s, onWorker)
		if err != nil {
			return rep, err
		}
		rep.Flood = append(rep.Flood, row)
	}
	for _, onWorker := range s.OnWorker {
		for _, n := range s.RegNICs {
			rep.Reg = append(rep.Reg, regTime(ctx, s, n, onWorker))
		}
	}
	return rep, nil
}

func (s RegFloodSpec) config(nics int, onWorker bool) fabric.Config {
	return fabric.Config{Transport: s.Transport, Node: s.Node, NICs: nics, RegisterOnWorker: onWorker, StuckTimeout: s.StuckTimeout}
}

func modeName(onWorker bool) string {
	if onWorker {
		return "on-worker"
	}
	return "beside"
}

// closeEngines closes what opened.
func closeEngines(es ...*fabric.Engine) {
	for _, e := range es {
		if e != nil {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = e.Close(cctx)
			cancel()
		}
	}
}

func regFloodMode(ctx context.Context, s RegFloodSpec, onWorker bool) (RegFloodRow, error) {
	row := RegFloodRow{Mode: modeName(onWorker)}
	// The buffers are freed after the engines closed (defers run last
	// first): a target's provider may still touch its region until then.
	span := s.Bytes * uint64(s.Depth)
	src, err := fabric.AllocHost(int(s.Bytes))
	if err != nil {
		return row, err
	}
	defer src.Free()
	dst, err := fabric.AllocHost(int(span))
	if err != nil {
		return row, err
	}
	defer dst.Free()
	a, err := fabric.Open(ctx, s.config(s.FloodNICs, onWorker))
	if err != nil {
		return row, err
	}
	b, err := fabric.Open(ctx, s.config(s.FloodNICs, false))
	if err != nil {
		closeEngines(a)
		return row, err
	}
	defer closeEngines(a, b)
	row.RegMode = a.RegistrationStats().Modes[0].String()
	sreg, err := a.RegisterHost(src, fabric.AccessLocal)
	if err != nil {
		return row, err
	}
	dreg, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
	if err != nil {
		return row, err
	}
	desc, _ := dreg.Descriptor()

	f := &flood{e: a, src: sreg, dst: desc, bytes: s.Bytes, depth: s.Depth}
	fctx, stop := context.WithCancel(ctx)
	floodErr := make(chan error, 1)
	go func() { floodErr <- f.run(fctx) }()
	defer func() {
		stop()
		<-floodErr
	}()
	// Warm up: connections made, the rate settled.
	time.Sleep(300 * time.Millisecond)

	var quiet, during, ratios []float64
	var regs, unregs []time.Duration
	rate := func(c0, c1 int64, d time.Duration) float64 { return float64(c1-c0) * float64(s.Bytes) / d.Seconds() }
	prevWin := 300 * time.Millisecond
	// A prefaulted region is allocated and written once and registered
	// again every round (a pool the program keeps); fresh memory is new
	// every round, so each registration faults it in.
	var kept *fabric.HostBuffer
	if s.Prefault {
		if kept, err = s.allocRegion(); err != nil {
			return row, err
		}
		defer kept.Free()
	}
	for r := 0; r < s.Rounds; r++ {
		big := kept
		if big == nil {
			if big, err = s.allocRegion(); err != nil {
				return row, err
			}
		}
		free := func() {
			if big != kept {
				_ = big.Free()
			}
		}
		// Quiet before, as long as the last registering window.
		b0, bt0 := f.tc.Done(), time.Now()
		time.Sleep(prevWin)
		b1, bt1 := f.tc.Done(), time.Now()
		// Registering: the window runs from the call to its return. With
		// a Window, registrations that end sooner are undone and done
		// again until it has passed, so the whole window carries
		// registration work; without, it runs on to minWindow at least,
		// so a registration that costs little still gets a rate to
		// compare (it then includes some quiet time).
		c0, t0 := f.tc.Done(), time.Now()
		reg, err := a.RegisterHost(big, fabric.AccessRemoteWrite)
		t1 := time.Now()
		n := 1
		for err == nil && s.Window > 0 && time.Since(t0) < s.Window {
			if err = a.Unregister(reg); err == nil {
				reg, err = a.RegisterHost(big, fabric.AccessRemoteWrite)
				n++
			}
		}
		if err != nil {
			free()
			return row, fmt.Errorf("register %s beside the flood: %w", FormatBytes(s.RegisterBytes), err)
		}
		if d := time.Until(t0.Add(minWindow)); d > 0 && s.Window == 0 {
			time.Sleep(d)
		}
		c1, t2 := f.tc.Done(), time.Now()
		win := t2.Sub(t0)
		// Quiet after, as long as the registering window (at most
		// maxQuiet: a registration of a minute on a slow machine need not
		// be matched by minutes of flooding).
		a0, at0 := f.tc.Done(), time.Now()
		time.Sleep(min(win, maxQuiet))
		a1, at1 := f.tc.Done(), time.Now()
		u0 := time.Now()
		if err := a.Unregister(reg); err != nil {
			free()
			return row, err
		}
		unregs = append(unregs, time.Since(u0))
		free()
		if err := f.err(); err != nil {
			return row, err
		}
		dr := rate(c0, c1, win)
		qr := rate(0, (b1-b0)+(a1-a0), bt1.Sub(bt0)+at1.Sub(at0))
		during, quiet = append(during, dr), append(quiet, qr)
		if qr > 0 {
			ratios = append(ratios, dr/qr)
		}
		regs = append(regs, t1.Sub(t0))
		prevWin = min(win, maxQuiet)
		fmt.Fprintf(s.Progress, "round %d %s: register %v (%d registration(s) in the window), flood %.3f GB/s during (%v window), %.3f GB/s quiet, ratio %.2f\n",
			r+1, row.Mode, t1.Sub(t0).Round(time.Millisecond), n, dr/1e9, win.Round(time.Millisecond), qr/1e9, dr/max(qr, 1))
	}
	row.Rounds = ratios
	row.Quiet, row.During, row.Ratio = median(quiet), median(during), median(ratios)
	row.RegTime, row.UnregTime = medianDur(regs), medianDur(unregs)
	return row, nil
}

// minWindow is the shortest registering window a rate is taken over;
// maxQuiet the longest quiet window compared with it.
const (
	minWindow = 200 * time.Millisecond
	maxQuiet  = 15 * time.Second
)

// flood keeps depth writes of bytes in flight from src to dst until its
// context ends; tc counts the completed writes.
type flood struct {
	e     *fabric.Engine
	src   *fabric.MemoryRegion
	dst   fabric.Descriptor
	bytes uint64
	depth int
	tc    fabric.TransferCounter
}

func (f *flood) err() error {
	if f.tc.Errors() > 0 {
		return fmt.Errorf("flood: %d writes failed, the first with: %w", f.tc.Errors(), f.tc.Err())
	}
	return nil
}

func (f *flood) run(ctx context.Context) error {
	var sent int64
	for i := 0; ctx.Err() == nil; i++ {
		if sent-f.tc.Done() >= int64(f.depth) {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := f.tc.Wait(wctx, sent-int64(f.depth)+1)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				return fmt.Errorf("flood: %w", err)
			}
			continue
		}
		w := fabric.SingleWrite{Src: f.src, Length: f.bytes, Dst: f.dst, DstOffset: uint64(i%f.depth) * f.bytes}
		if err := f.e.SubmitSingle(w, fabric.Count(&f.tc)); err != nil {
			return fmt.Errorf("flood: %w", err)
		}
		sent++
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f.tc.Wait(wctx, sent)
}

// regTime times registering and unregistering RegisterBytes of fresh
// memory on an engine of nics NICs, nothing else running.
func regTime(ctx context.Context, s RegFloodSpec, nics int, onWorker bool) RegTimeRow {
	row := RegTimeRow{NICs: nics, Mode: modeName(onWorker)}
	e, err := fabric.Open(ctx, s.config(nics, onWorker))
	if err != nil {
		row.Err = err
		return row
	}
	defer closeEngines(e)
	var regs, unregs []time.Duration
	// As in the flood: a prefaulted region is written once and kept.
	var kept *fabric.HostBuffer
	if s.Prefault {
		if kept, err = s.allocRegion(); err != nil {
			row.Err = err
			return row
		}
		defer kept.Free()
	}
	for r := 0; r < s.RegRounds; r++ {
		big := kept
		if big == nil {
			if big, err = s.allocRegion(); err != nil {
				row.Err = err
				return row
			}
		}
		t0 := time.Now()
		reg, err := e.RegisterHost(big, fabric.AccessRemoteWrite)
		t1 := time.Now()
		if err == nil {
			err = e.Unregister(reg)
		}
		t2 := time.Now()
		if big != kept {
			_ = big.Free()
		}
		if err != nil {
			row.Err = err
			return row
		}
		regs, unregs = append(regs, t1.Sub(t0)), append(unregs, t2.Sub(t1))
		fmt.Fprintf(s.Progress, "alone %d nic(s) %s: register %v, unregister %v\n", nics, row.Mode,
			t1.Sub(t0).Round(time.Microsecond), t2.Sub(t1).Round(time.Microsecond))
	}
	row.RegTime, row.UnregTime = medianDur(regs), medianDur(unregs)
	return row
}

// allocRegion allocates the region a round registers, prefaulted when
// the spec says so.
func (s RegFloodSpec) allocRegion() (*fabric.HostBuffer, error) {
	big, err := fabric.AllocHostWith(int(s.RegisterBytes), fabric.HostOptions{HugePages: s.HugePages})
	if err != nil {
		return nil, err
	}
	what := "fresh"
	if s.Prefault {
		t0 := time.Now()
		populate(big)
		what = fmt.Sprintf("prefaulted in %v", time.Since(t0).Round(time.Millisecond))
	}
	fmt.Fprintf(s.Progress, "region: %s of %d KiB pages, %s\n", FormatBytes(s.RegisterBytes), big.PageSize()>>10, what)
	return big, nil
}

// populate makes every page of b present and written: one madvise call
// where the kernel has MADV_POPULATE_WRITE (5.14), else a write to each
// page.
func populate(b *fabric.HostBuffer) {
	mem := b.Bytes()
	if len(mem) == 0 || unix.Madvise(mem, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	for i := 0; i < len(mem); i += b.PageSize() {
		mem[i] = 0
	}
}

// Variant names the region's memory: page size asked for and whether it
// was prefaulted.
func (s RegFloodSpec) Variant() string {
	v := "base pages"
	if s.HugePages != fabric.HugePagesNever {
		v = "huge pages"
	}
	if s.Prefault {
		return v + ", prefaulted"
	}
	return v + ", fresh"
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianDur(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// Print writes the report as two tables.
func (r *RegFloodReport) Print(w io.Writer) {
	s := r.Spec
	win := "one registration per window"
	if s.Window > 0 {
		win = fmt.Sprintf("registering again until %v have passed", s.Window)
	}
	fmt.Fprintf(w, "flood-while-register: %s, flood of %s writes x %d in flight on %d NIC(s), registering %s per round (%s; %s), %d rounds\n",
		s.Transport, FormatBytes(s.Bytes), s.Depth, s.FloodNICs, FormatBytes(s.RegisterBytes), s.Variant(), win, s.Rounds)
	fmt.Fprintf(w, "%-10s %-17s %12s %12s %7s %10s %10s  %s\n", "mode", "engine reports", "quiet GB/s", "during GB/s", "ratio", "register", "unregister", "rounds")
	for _, f := range r.Flood {
		rounds := make([]string, len(f.Rounds))
		for i, v := range f.Rounds {
			rounds[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "%-10s %-17s %12.3f %12.3f %7.2f %10s %10s  %s\n", f.Mode, f.RegMode, f.Quiet/1e9, f.During/1e9, f.Ratio,
			f.RegTime.Round(time.Microsecond), f.UnregTime.Round(time.Microsecond), strings.Join(rounds, " "))
	}
	fmt.Fprintf(w, "registration of %s alone (median of %d):\n", FormatBytes(s.RegisterBytes), s.RegRounds)
	fmt.Fprintf(w, "%-5s %-10s %12s %12s\n", "nics", "mode", "register", "unregister")
	for _, g := range r.Reg {
		if g.Err != nil {
			fmt.Fprintf(w, "%-5d %-10s not run: %v\n", g.NICs, g.Mode, g.Err)
			continue
		}
		fmt.Fprintf(w, "%-5d %-10s %12s %12s\n", g.NICs, g.Mode, g.RegTime.Round(time.Microsecond), g.UnregTime.Round(time.Microsecond))
	}
}
