package fabricbench

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

var loopbackProviders = []struct{ provider, node string }{
	{"mem", ""}, {"shm", ""}, {"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"},
}

func TestLoopbackVerified(t *testing.T) {
	for _, p := range loopbackProviders {
		for _, nics := range []int{1, 2} {
			t.Run(p.provider+"/nics="+string(rune('0'+nics)), func(t *testing.T) {
				s := smallSpec(p.provider, nics)
				s.Node = p.node
				rep, err := Loopback(testCtx(t), s, nil)
				skipIfUnusable(t, err)
				require.NoError(t, err)
				// paged x2 sizes, single x2, imm: every one checked.
				require.Len(t, rep.Cases, 5)
				checkReport(t, rep, 5)
				require.False(t, rep.Failed())
				require.Equal(t, nics, rep.Header.NICs)
				require.True(t, rep.Header.LoopbackProvider)
				require.NotEmpty(t, rep.Header.Note)
			})
		}
	}
}

// A corrupting hook changes one received byte of each checked case: the
// check must catch it, the row must say FAIL, and the error must be
// ErrVerify.
func TestVerifyFailureIsReported(t *testing.T) {
	s := smallSpec("mem", 1)
	s.Workloads = []string{Paged, Single}
	s.Corrupt = func(b []byte) { b[len(b)/2] ^= 0xFF }
	var out bytes.Buffer
	p, err := NewPrinter(Output{}, nil, &out, io.Discard)
	require.NoError(t, err)
	rep, err := Loopback(testCtx(t), s, p)
	require.ErrorIs(t, err, ErrVerify)
	require.True(t, rep.Failed())
	require.NoError(t, p.Finish(rep, err))
	table := out.String()
	require.Equal(t, 4, strings.Count(table, " FAIL\n"), table)
	require.Contains(t, table, "# error:")
	require.Contains(t, table, "# FAILED: 4 cases, 0 verified, 4 failed")
}

// The null provider moves no bytes: verification is switched off and the
// header says the figures are the engine's overhead.
func TestNullPagedRate(t *testing.T) {
	s := Spec{Provider: "null", Workloads: []string{Paged}, Sizes: []uint64{64}, Pages: []int{10000}, Verify: true,
		Iters: 20, Warmup: 5, Buffer: 8 << 20}
	rep, err := Loopback(testCtx(t), s, nil)
	require.NoError(t, err)
	require.Len(t, rep.Cases, 1)
	require.False(t, rep.Header.Verify)
	require.Contains(t, rep.Header.Note, "overhead")
	c := rep.Cases[0]
	require.Positive(t, c.Mops)
	require.False(t, c.Checked)
	require.Equal(t, "no", c.Verdict())
	t.Logf("engine over null, paged 64 B x 10000: %.2f Mops (p50 %.0f us per 10000 pages)", c.Mops, c.Lat.P50)
}

func TestServeClientTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	for _, p := range []struct{ provider, node string }{{"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}, {"ipc", ""}} {
		t.Run(p.provider, func(t *testing.T) {
			s := smallSpec(p.provider, 2)
			s.Node = p.node
			addr := startServer(t, s)
			rep, err := RunClient(testCtx(t), s, addr, nil)
			skipIfUnusable(t, err)
			require.NoError(t, err)
			require.Equal(t, "client", rep.Header.Mode)
			require.Equal(t, 2, rep.Header.NICs)
			checkReport(t, rep, 5)
		})
	}
}

// startServer runs this test binary as a server and returns its address;
// the server is stopped with SIGTERM (so it closes its endpoints) at
// cleanup, and must then exit 0.
func startServer(t *testing.T, s Spec) fabric.Address {
	t.Helper()
	js, err := json.Marshal(s)
	require.NoError(t, err)
	srv := testutil.Spawn(t, "serve", testutil.SpawnOptions{Env: []string{envSpec + "=" + string(js)}, Lines: true,
		Stop: syscall.SIGTERM})
	deadline := time.Now().Add(60 * time.Second)
	for {
		l := srv.ReadLine(time.Until(deadline))
		if a, ok := strings.CutPrefix(l, "Main Address: "); ok {
			addr, err := fabric.ParseAddress(a)
			require.NoError(t, err)
			return addr
		}
		t.Logf("serve: %s", l)
	}
}

func TestRanksSpawn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	s := smallSpec("shm", 1)
	s.Sizes = []uint64{4096}
	js, err := json.Marshal(s)
	require.NoError(t, err)
	out := rendezvoustest.MustRun(t, 3, "rank", rendezvoustest.Options{Env: []string{envSpec + "=" + string(js)},
		Timeout: 3 * time.Minute}).Stdout
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && !strings.HasPrefix(line, "#") {
			require.Contains(t, []string{"0->1", "1->2", "2->0"}, f[1], line)
			require.Equal(t, "yes", f[len(f)-1], line)
			rows++
		}
	}
	require.Equal(t, 3*3, rows, "3 checked cases per pair")
	require.Contains(t, out, "# done: 9 cases, 9 verified, 0 failed")
}

func TestRaw(t *testing.T) {
	for _, p := range []struct{ provider, node string }{{"shm", ""}, {"tcp;ofi_rxm", "127.0.0.1"}} {
		t.Run(p.provider, func(t *testing.T) {
			s := smallSpec(p.provider, 1)
			s.Node = p.node
			rep, err := Raw(testCtx(t), s, nil)
			skipIfUnusable(t, err)
			require.NoError(t, err)
			require.False(t, rep.Header.Engine)
			for _, c := range rep.Cases {
				require.True(t, c.Verified, "%s %d", c.Workload, c.Bytes)
				require.Positive(t, c.Lat.Mean)
			}
		})
	}
	for _, p := range []string{"null", "ipc"} {
		_, err := Raw(testCtx(t), Spec{Provider: p}, nil)
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, "raw runs libfabric only, not %s", p)
	}
}

// The JSON output is one record per line, written as the run goes: a
// begin record, a case record per row, an end record.
func TestJSONLines(t *testing.T) {
	var js, table bytes.Buffer
	p, err := NewPrinter(Output{JSON: "-"}, []string{"fabric-debug", "loopback"}, &js, &table)
	require.NoError(t, err)
	rep, err := Loopback(testCtx(t), smallSpec("mem", 1), p)
	require.NoError(t, err)
	require.NoError(t, p.Finish(rep, err))
	require.Contains(t, table.String(), "# workload", "the table goes to stderr")

	lines := strings.Split(strings.TrimSuffix(js.String(), "\n"), "\n")
	require.Len(t, lines, 1+len(rep.Cases)+1)
	recs := make([]map[string]any, len(lines))
	for i, l := range lines {
		require.NoError(t, json.Unmarshal([]byte(l), &recs[i]), l)
	}
	require.Equal(t, "begin", recs[0]["type"])
	require.Equal(t, "fabric-debug", recs[0]["tool"])
	require.Contains(t, recs[0]["verified_means"], "poisoned")
	setup := recs[0]["setup"].(map[string]any)
	for _, k := range []string{"provider", "transport", "reason", "nics", "poll", "mode", "memory", "loopback_provider", "note"} {
		require.Contains(t, setup, k)
	}
	require.Equal(t, "adaptive", setup["poll"])
	for _, c := range recs[1 : len(recs)-1] {
		require.Equal(t, "case", c["type"])
		for _, k := range []string{"workload", "bytes", "pages", "iters", "warmup", "lat_us", "gbit_s", "mop_s", "checked", "verified"} {
			require.Contains(t, c, k)
		}
		lat := c["lat_us"].(map[string]any)
		for _, k := range []string{"n", "mean", "sd", "min", "p50", "p99", "max"} {
			require.Contains(t, lat, k)
		}
		require.Equal(t, true, c["verified"])
	}
	end := recs[len(recs)-1]
	require.Equal(t, "end", end["type"])
	require.EqualValues(t, len(rep.Cases), end["cases"])
	require.EqualValues(t, len(rep.Cases), end["verified"])
	require.EqualValues(t, 0, end["failed"])
}

// The chart is a PNG of the documented size, with a series per workload
// and page count, sizes in order; an empty report still draws its axes.
func TestPlotIsPNG(t *testing.T) {
	s := smallSpec("mem", 1)
	s.Pages = []int{50, 10}
	rep, err := Loopback(testCtx(t), s, nil)
	require.NoError(t, err)
	for _, r := range []*Report{rep, {Header: Header{Mode: "loopback"}}} {
		var buf bytes.Buffer
		require.NoError(t, r.WritePlot(&buf))
		img, err := png.Decode(&buf)
		require.NoError(t, err)
		require.Equal(t, 864, img.Bounds().Dx(), "9 in at 96 dpi")
		require.InDelta(t, 518, img.Bounds().Dy(), 1, "5.4 in at 96 dpi")
	}
	ss := rep.plotSeries()
	require.Len(t, ss, 3)
	names := []string{ss[0].name, ss[1].name, ss[2].name}
	require.Equal(t, []string{"paged x50", "paged x10", "single"}, names)
	for _, s := range ss {
		require.Len(t, s.pts, 2, s.name)
		require.Equal(t, []float64{4096, 64 << 10}, []float64{s.pts[0].X, s.pts[1].X}, s.name)
		require.Positive(t, s.pts[0].Y)
	}
	require.Equal(t, []string{"1K", "2K", "4K"}, tickLabels(sizeTicks{}.Ticks(1024, 4096)))
	wide := tickLabels(sizeTicks{}.Ticks(1024, 64<<20))
	require.Len(t, wide, 17)
	require.Equal(t, []string{"1K", "", "4K"}, wide[:3], "every other label on a wide axis")
	require.Equal(t, "64M", wide[16])
}

func tickLabels(ts []plot.Tick) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Label
	}
	return out
}

func TestBadSpecs(t *testing.T) {
	ctx := testCtx(t)
	for name, s := range map[string]Spec{
		"nics":     {Provider: "mem", NICs: 9},
		"workload": {Provider: "mem", Workloads: []string{"scatter"}},
		"size":     {Provider: "mem", Sizes: []uint64{1 << 40}},
		"pages":    {Provider: "mem", Pages: []int{0}},
		"buffer":   {Provider: "mem", Buffer: 100},
	} {
		_, err := Loopback(ctx, s, nil)
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, name)
	}
	_, err := Loopback(ctx, Spec{Provider: "mem", GPUs: []int{-1}}, nil)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	_, err = Loopback(ctx, Spec{Provider: "mem", GPUs: []int{0}, GPUPlacement: "nearest"}, nil)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	_, err = Loopback(ctx, Spec{Provider: "shmm"}, nil)
	// Every transport name is explicit: a typo is unknown, with the list.
	require.ErrorIs(t, err, fabric.ErrUnknownProvider)
	require.Contains(t, err.Error(), `unknown transport "shmm" (valid: auto, `)
}

// A client whose server is gone fails within its timeout; one whose NIC
// count differs from the server's runs.
func TestClientErrors(t *testing.T) {
	ctx := testCtx(t)
	gone, err := OpenSide(ctx, Spec{Provider: "mem", NICs: 1, Buffer: 1 << 20}.WithDefaults())
	require.NoError(t, err)
	addr := gone.Engine.MainAddress()
	require.NoError(t, gone.Close())
	start := time.Now()
	_, err = RunClient(ctx, Spec{Provider: "mem", Buffer: 1 << 20, Timeout: 2 * time.Second}, addr, nil)
	require.Error(t, err)
	require.Less(t, time.Since(start), 30*time.Second)

	sctx, stop := context.WithCancel(ctx)
	ready := make(chan fabric.Address, 1)
	served := make(chan error, 1)
	go func() {
		served <- ServeSpec(sctx, Spec{Provider: "mem", NICs: 2, Buffer: 1 << 20}, io.Discard,
			func(a fabric.Address, _ PeerInfo) { ready <- a })
	}()
	defer func() { stop(); require.NoError(t, <-served) }()
	// A 1-NIC client of a 2-NIC server: the groups differ, and every case
	// still verifies (bytes and fabric.ExpectedImms immediates).
	rep, err := RunClient(ctx, Spec{Provider: "mem", NICs: 1, Buffer: 1 << 20, Sizes: []uint64{4096}, Pages: []int{10},
		Iters: 2, Verify: true}, <-ready, nil)
	require.NoError(t, err)
	require.Len(t, rep.Cases, 3)
	for _, c := range rep.Cases {
		require.True(t, c.Verified, "%+v", c)
	}
}

// An immediate with a value no case expects fails the verified case it
// lands in, and so does an immediate-only write that never arrives.
func TestStrayImmediateFailsCheck(t *testing.T) {
	ctx := testCtx(t)
	s := Spec{Provider: "mem", Buffer: 1 << 20}.WithDefaults()
	w, err := OpenSide(ctx, s)
	require.NoError(t, err)
	defer w.Close()
	tg, err := OpenSide(ctx, s)
	require.NoError(t, err)
	defer tg.Close()

	j := Job{Case: Case{Workload: Imm, Iters: 3, Verify: true}, Dst: tg.Desc, Span: s.Buffer}
	exp, err := tg.Expect(j, 1, nil)
	require.NoError(t, err)
	_, err = w.Write(ctx, j)
	require.NoError(t, err)
	tr := fabric.NewTransfer()
	require.NoError(t, w.Engine.SubmitImm(fabric.ImmWrite{Imm: 77, Dst: tg.Desc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(ctx))
	require.Eventually(t, func() bool { return tg.stray.Load() == 1 }, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, exp.Check(ctx, 0, 0), ErrVerify)

	exp, err = tg.Expect(j, 1, nil)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = exp.Check(short, 0, 0)
	require.ErrorIs(t, err, ErrVerify)
	require.ErrorIs(t, err, fabric.ErrTimeout)
}
