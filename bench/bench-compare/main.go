package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

type options struct {
	base      string
	n         int
	cases     string
	poll      string
	goBench   string
	benchtime string
	timeout   time.Duration
	json      string
	keep      bool
	callgrind int // ops per fabric benchmark under callgrind; 0: none
	cgTop     int
	basePatch string // a patch applied to the base's tree before it builds
}

// build is one revision's binaries.
type build struct {
	label string // "base" or "new"
	desc  string // revision and subject, for the header
	src   string // source tree the binaries came from
	bin   string // folder holding fabric-debug, bench-a2a, fabric.test
	// missing names the binaries this revision could not build, with why.
	missing map[string]string
}

func (b *build) tool(name string) string { return filepath.Join(b.bin, name) }

// caseDef is one paired case: a command and how its figures are read.
type caseDef struct {
	name  string // --cases key
	title string // table label
	tool  string // fabric-debug, bench-a2a or fabric.test
	args  []string
	// read turns the command's standard output into figures by metric
	// label, and the poll mode it reports ("" if none).
	read func(stdout []byte) (map[string]float64, string, error)
}

// metric describes a figure's unit and direction.
type metric struct {
	unit         string
	higherBetter bool
}

func metricOf(label string) metric {
	switch {
	case strings.HasSuffix(label, "Gbit/s"):
		return metric{"Gbit/s", true}
	case strings.HasSuffix(label, "Mop/s"):
		return metric{"Mop/s", true}
	case strings.HasSuffix(label, "p50"):
		return metric{"µs", false}
	case strings.HasSuffix(label, "allocs/op"):
		return metric{"allocs/op", false}
	case strings.HasSuffix(label, "B/op"):
		return metric{"B/op", false}
	default:
		return metric{"ns/op", false}
	}
}

func fdCaseDef(name, title string, workload string, size int64, args ...string) caseDef {
	return caseDef{name: name, title: title, tool: "fabric-debug", args: append([]string{"loopback"}, args...),
		read: func(out []byte) (map[string]float64, string, error) {
			rep, err := parseFabricDebug(bytes.NewReader(out))
			if err != nil {
				return nil, "", err
			}
			c, err := rep.find(workload, size)
			if err != nil {
				return nil, rep.Poll, err
			}
			return fdFigures(c), rep.Poll, nil
		}}
}

// fdFigures are a fabric-debug case's figures. The rate at the median
// iteration (bytes or pages over the p50 latency) is computed the same way
// from every build's output; the rate the tool reports is not: earlier
// builds printed the mean of the iterations' rates, later ones the timed
// payload over the timed iterations' total time, which a few slow
// iterations on a loaded machine pull far down. Both are shown; compare
// the p50 ones.
func fdFigures(c fdCase) map[string]float64 {
	m := map[string]float64{}
	if c.Workload == "paged" {
		m["tool's Mop/s"] = c.Mops
		if c.P50us > 0 {
			m["p50 Mop/s"] = float64(c.Pages) / c.P50us
		}
		return m
	}
	m["tool's Gbit/s"] = c.Gbits
	if c.P50us > 0 {
		m["p50 Gbit/s"] = float64(c.Bytes) * 8 / (c.P50us * 1e3)
	}
	return m
}

// allCases are the cases in table order.
func allCases(o options) []caseDef {
	poll := []string{"--poll", o.poll}
	tcp := []string{"--provider", "tcp;ofi_rxm", "--node", "127.0.0.1", "--workloads", "single", "--sizes", "64M", "--iters", "20", "--warmup", "5"}
	paged := func(p string) []string {
		return []string{"--provider", p, "--workloads", "paged", "--sizes", "64", "--pages", "10000"}
	}
	cat := func(a ...[]string) []string {
		var out []string
		for _, x := range a {
			out = append(out, x...)
		}
		return out
	}
	const mib64 = 64 << 20
	cs := []caseDef{
		fdCaseDef("tcp-64M", "tcp;ofi_rxm single 64 MiB", "single", mib64, cat(tcp, poll)...),
		fdCaseDef("tcp-64M-raw", "tcp;ofi_rxm single 64 MiB --raw", "single", mib64, cat(tcp, poll, []string{"--raw"})...),
		fdCaseDef("shm-paged", "shm paged 64 B x 10000", "paged", 64, cat(paged("shm"), poll)...),
		fdCaseDef("shm-paged-raw", "shm paged 64 B x 10000 --raw", "paged", 64, cat(paged("shm"), poll, []string{"--raw"})...),
		fdCaseDef("ipc-paged", "ipc paged 64 B x 10000", "paged", 64, cat(paged("ipc"), poll)...),
		fdCaseDef("null-paged", "null paged 64 B x 10000", "paged", 64, cat(paged("null"), poll)...),
		fdCaseDef("ipc-64M", "ipc single 64 MiB", "single", mib64,
			cat([]string{"--provider", "ipc", "--workloads", "single", "--sizes", "64M", "--iters", "20", "--warmup", "5"}, poll)...),
		{name: "a2a-host", title: "bench-a2a host W=2 shm", tool: "bench-a2a",
			args: []string{"--world-size", "2", "--spawn", "--backend", "host", "--provider", "shm", "--iters", "30", "--warmup", "5", "--json", "-"},
			read: func(out []byte) (map[string]float64, string, error) {
				m, err := parseA2A(bytes.NewReader(out))
				return m, "", err
			}},
	}
	for i := range cs {
		if cs[i].tool == "fabric-debug" {
			cs[i].args = append(cs[i].args, "--json", "-")
		}
	}
	if o.goBench != "" && o.goBench != "none" {
		cs = append(cs, caseDef{name: "go-bench", title: "go test ./fabric -bench", tool: "fabric.test",
			args: []string{"-test.run", "^$", "-test.bench", o.goBench, "-test.benchtime", o.benchtime, "-test.benchmem"},
			read: func(out []byte) (map[string]float64, string, error) {
				bs, err := parseGoBench(bytes.NewReader(out))
				if err != nil {
					return nil, "", err
				}
				m := map[string]float64{}
				for name, g := range bs {
					for _, unit := range []string{"ns/op", "allocs/op"} {
						if v, ok := g[unit]; ok {
							m[name+" "+unit] = v
						}
					}
				}
				return m, "", nil
			}})
	}
	return cs
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.base, "base", "", "the revision to compare the work tree with (required)")
	fs.IntVar(&o.n, "n", 7, "alternations: rounds of every case on both builds")
	fs.StringVar(&o.cases, "cases", "", "comma list of cases (default all): tcp-64M, tcp-64M-raw, shm-paged, shm-paged-raw, ipc-paged, null-paged, ipc-64M, a2a-host, go-bench")
	fs.StringVar(&o.poll, "poll", "adaptive", "fabric-debug's worker polling: spin or adaptive")
	fs.StringVar(&o.goBench, "go-bench", "Null(Imm|Paged)$", "go test -bench pattern for ./fabric (none: skip)")
	fs.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "limit on each run of a case")
	fs.StringVar(&o.json, "json", "", "also write the samples and summaries as JSON to FILE")
	fs.BoolVar(&o.keep, "keep", false, "keep the built binaries (their folder is printed)")
	fs.IntVar(&o.callgrind, "callgrind", 0, "also count each fabric benchmark's instructions per op under valgrind --tool=callgrind, over this many ops (0: not)")
	fs.IntVar(&o.cgTop, "callgrind-top", 25, "functions shown per benchmark under --callgrind")
	fs.StringVar(&o.basePatch, "base-patch", "", "apply this patch (git apply) to the base's tree before building it, e.g. a benchmark fix the base lacks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.base == "" || o.n < 1 || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: bench-compare --base REV [--n 7] [--cases LIST] [--poll adaptive|spin] [--go-bench PATTERN] [--json FILE]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := compare(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench-compare: %v\n", err)
		return 1
	}
	return 0
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// buildAt builds the binaries of the source tree src into bin. A binary
// that does not build is recorded as missing, with the compiler's last
// line; its cases are skipped for this build.
func buildAt(ctx context.Context, b *build, stderr io.Writer) {
	b.missing = map[string]string{}
	steps := []struct {
		name string
		args []string
	}{
		{"fabric-debug", []string{"build", "-o", b.tool("fabric-debug"), "./bench/fabric-debug"}},
		{"bench-a2a", []string{"build", "-o", b.tool("bench-a2a"), "./bench/bench-a2a"}},
		{"fabric.test", []string{"test", "-c", "-o", b.tool("fabric.test"), "./fabric"}},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, "go", s.args...)
		cmd.Dir = b.src
		if out, err := cmd.CombinedOutput(); err != nil {
			b.missing[s.name] = fmt.Sprintf("does not build: %s", lastLine(out))
			fmt.Fprintf(stderr, "# %s: %s %s\n", b.label, s.name, b.missing[s.name])
		}
	}
}

// sample is one run of one case on one build.
type sample struct {
	Round   int                `json:"round"`
	Build   string             `json:"build"`
	Case    string             `json:"case"`
	Figures map[string]float64 `json:"figures,omitempty"`
	Error   string             `json:"error,omitempty"`
	Seconds float64            `json:"seconds"`
}

func runCase(ctx context.Context, o options, b *build, c caseDef) (map[string]float64, string, error) {
	if why, ok := b.missing[c.tool]; ok {
		return nil, "", fmt.Errorf("%s %s", c.tool, why)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.tool(c.tool), c.args...)
	cmd.Dir = b.bin
	if c.tool == "fabric.test" {
		cmd.Dir = filepath.Join(b.src, "fabric") // where go test runs it
	}
	cmd.Env = append(os.Environ(), "FI_TCP_IFACE=lo")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return nil, "", fmt.Errorf("ran past %v", o.timeout)
	}
	if err != nil {
		why := lastLine(errb.Bytes())
		if why == "" {
			why = lastLine(out.Bytes())
		}
		return nil, "", fmt.Errorf("%w: %s", err, why)
	}
	return c.read(out.Bytes())
}

// row is one figure of one case, both builds' samples.
type row struct {
	Case   string    `json:"case"`
	Metric string    `json:"metric"`
	Unit   string    `json:"unit"`
	Higher bool      `json:"higher_is_better"`
	Base   []float64 `json:"base"`
	New    []float64 `json:"new"`
	// Paired are the per-round ratios new ÷ base.
	Paired []float64 `json:"paired"`
}

func compare(ctx context.Context, o options, stdout, stderr io.Writer) error {
	root, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	baseRev, err := git(ctx, root, "rev-parse", "--verify", o.base+"^{commit}")
	if err != nil {
		return fmt.Errorf("resolve base: %w", err)
	}
	cases := allCases(o)
	if o.cases != "" {
		want := map[string]bool{}
		for _, n := range strings.Split(o.cases, ",") {
			want[strings.TrimSpace(n)] = true
		}
		var sel []caseDef
		for _, c := range cases {
			if want[c.name] {
				sel = append(sel, c)
				delete(want, c.name)
			}
		}
		if len(want) > 0 {
			var unknown []string
			for n := range want {
				unknown = append(unknown, n)
			}
			sort.Strings(unknown)
			return fmt.Errorf("unknown cases: %s", strings.Join(unknown, ", "))
		}
		cases = sel
	}

	tmp, err := os.MkdirTemp("", "bench-compare-")
	if err != nil {
		return err
	}
	wt := filepath.Join(tmp, "base-src")
	if _, err := git(ctx, root, "worktree", "add", "--detach", wt, baseRev); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	defer func() {
		// A fresh context: the run's may be cancelled by now.
		if _, err := git(context.Background(), root, "worktree", "remove", "--force", wt); err != nil {
			fmt.Fprintf(stderr, "bench-compare: %v\n", err)
		}
		if o.keep {
			fmt.Fprintf(stderr, "# binaries kept in %s\n", tmp)
			return
		}
		_ = os.RemoveAll(tmp)
	}()

	baseSubject, _ := git(ctx, root, "log", "-1", "--format=%h %s", baseRev)
	if o.basePatch != "" {
		patch, err := filepath.Abs(o.basePatch)
		if err != nil {
			return err
		}
		if _, err := git(ctx, wt, "apply", patch); err != nil {
			return fmt.Errorf("base patch: %w", err)
		}
	}
	baseDesc := trim(baseSubject, 72)
	if o.basePatch != "" {
		baseDesc = trim(baseSubject, 40) + " + patch " + filepath.Base(o.basePatch)
	}
	head, _ := git(ctx, root, "log", "-1", "--format=%h", "HEAD")
	dirty := ""
	if st, _ := git(ctx, root, "status", "--porcelain", "--untracked-files=no"); st != "" {
		dirty = " with uncommitted changes"
	}
	builds := []*build{
		{label: "base", desc: baseDesc, src: wt, bin: filepath.Join(tmp, "base")},
		{label: "new", desc: "work tree at " + head + dirty, src: root, bin: filepath.Join(tmp, "new")},
	}
	for _, b := range builds {
		if err := os.MkdirAll(b.bin, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "# building %s (%s)\n", b.label, b.desc)
		buildAt(ctx, b, stderr)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(stdout, "# bench-compare: %d alternations, base first in even rounds; ratio = new ÷ base (>1 better for Gbit/s and Mop/s, <1 better for ns/op, µs, allocs/op)\n", o.n)
	fmt.Fprintf(stdout, "# base: %s\n# new:  %s\n", builds[0].desc, builds[1].desc)
	fmt.Fprintf(stdout, "# fabric-debug --poll %s; load average at start: %s\n", o.poll, strings.Join(strings.Fields(string(load))[:3], " "))

	rows := map[string]*row{}
	var order []string
	var samples []sample
	skipped := map[string]string{} // build/case -> why
	polls := map[string][]string{} // distinct poll modes each build reported
	start := time.Now()
	for round := 0; round < o.n; round++ {
		for _, c := range cases {
			pair := []*build{builds[0], builds[1]}
			if round%2 == 1 {
				pair[0], pair[1] = pair[1], pair[0]
			}
			got := map[string]map[string]float64{}
			for _, b := range pair {
				key := b.label + "/" + c.name
				if _, ok := skipped[key]; ok {
					continue
				}
				t0 := time.Now()
				figs, poll, err := runCase(ctx, o, b, c)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s := sample{Round: round, Build: b.label, Case: c.name, Figures: figs, Seconds: time.Since(t0).Seconds()}
				if err != nil {
					s.Error = err.Error()
					// A build that cannot run a case at all (first round)
					// is skipped for the rest; a later failure is a
					// failed sample, reported.
					if round == 0 {
						skipped[key] = err.Error()
						fmt.Fprintf(stderr, "# %s cannot run %s, skipped: %v\n", b.label, c.name, err)
					} else {
						fmt.Fprintf(stderr, "# round %d: %s %s failed: %v\n", round, b.label, c.name, err)
					}
				}
				if poll != "" && !slices.Contains(polls[b.label], poll) {
					polls[b.label] = append(polls[b.label], poll)
				}
				samples = append(samples, s)
				got[b.label] = figs
			}
			var names []string
			for name := range got["base"] {
				names = append(names, name)
			}
			for name := range got["new"] {
				if _, ok := got["base"][name]; !ok {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			for _, name := range names {
				k := c.name + "\x00" + name
				r := rows[k]
				if r == nil {
					m := metricOf(name)
					r = &row{Case: c.title, Metric: name, Unit: m.unit, Higher: m.higherBetter}
					rows[k] = r
					order = append(order, k)
				}
				bv, bok := got["base"][name]
				nv, nok := got["new"][name]
				if bok {
					r.Base = append(r.Base, bv)
				}
				if nok {
					r.New = append(r.New, nv)
				}
				if bok && nok && bv != 0 {
					r.Paired = append(r.Paired, nv/bv)
				}
			}
		}
		fmt.Fprintf(stderr, "# round %d of %d done (%.0f s)\n", round+1, o.n, time.Since(start).Seconds())
	}

	// Order rows by case order, then metric name.
	caseIdx := map[string]int{}
	for i, c := range cases {
		caseIdx[c.name] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		ci, mi, _ := strings.Cut(order[i], "\x00")
		cj, mj, _ := strings.Cut(order[j], "\x00")
		if caseIdx[ci] != caseIdx[cj] {
			return caseIdx[ci] < caseIdx[cj]
		}
		return mi < mj
	})
	var list []*row
	for _, k := range order {
		list = append(list, rows[k])
	}
	pollNote := fmt.Sprintf("base %s; new %s", orDash(strings.Join(polls["base"], ", ")), orDash(strings.Join(polls["new"], ", ")))
	fmt.Fprintf(stdout, "# poll mode fabric-debug reported: %s; the fabric benchmarks' writer spins\n", pollNote)
	printTable(stdout, list)
	for _, c := range cases {
		for _, b := range builds {
			if why, ok := skipped[b.label+"/"+c.name]; ok {
				fmt.Fprintf(stdout, "# skipped: %s on %s: %s\n", c.name, b.label, why)
			}
		}
	}
	printCeilings(stdout, rows)
	if o.callgrind > 0 {
		for _, k := range order {
			c, metric, _ := strings.Cut(k, "\x00")
			name, ok := strings.CutSuffix(metric, " ns/op")
			if c != "go-bench" || !ok {
				continue
			}
			iters := callgrindOps(name, o.callgrind)
			fmt.Fprintf(stderr, "# callgrind: %s, %d iterations per build\n", name, iters)
			bc, err := runCallgrind(ctx, builds[0], name, iters, tmp)
			if err != nil {
				fmt.Fprintf(stdout, "# callgrind %s: base: %v\n", name, err)
				continue
			}
			nc, err := runCallgrind(ctx, builds[1], name, iters, tmp)
			if err != nil {
				fmt.Fprintf(stdout, "# callgrind %s: new: %v\n", name, err)
				continue
			}
			printCallgrind(stdout, name, bc, nc, o.cgTop)
		}
	}
	fmt.Fprintf(stdout, "# %.0f s in all\n", time.Since(start).Seconds())

	if o.json != "" {
		doc := struct {
			Base    string   `json:"base"`
			New     string   `json:"new"`
			N       int      `json:"n"`
			Poll    string   `json:"poll"`
			Rows    []*row   `json:"rows"`
			Samples []sample `json:"samples"`
		}{builds[0].desc, builds[1].desc, o.n, o.poll, list, samples}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// fmtStats prints median [min, max] of a sample, or why there is none.
func fmtStats(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := summarize(v)
	return fmt.Sprintf("%s [%s, %s]", num(s.Median), num(s.Min), num(s.Max))
}

// num prints a figure with about four significant digits.
func num(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// printTable prints a row per case and figure: each build's median [min,
// max], the ratio of the medians and the median of the per-round ratios.
func printTable(w io.Writer, rows []*row) {
	type line struct{ c, m, b, n, r, p string }
	lines := []line{{"case", "figure", "base median [min, max]", "new median [min, max]", "new÷base", "paired"}}
	for _, r := range rows {
		ratio, paired := "-", "-"
		if len(r.Base) > 0 && len(r.New) > 0 {
			if b := summarize(r.Base).Median; b != 0 {
				ratio = fmt.Sprintf("%.3f", summarize(r.New).Median/b)
			}
		}
		if len(r.Paired) > 0 {
			paired = fmt.Sprintf("%.3f", summarize(r.Paired).Median)
		}
		lines = append(lines, line{r.Case, r.Metric, fmtStats(r.Base), fmtStats(r.New), ratio, paired})
	}
	wid := [6]int{}
	for _, l := range lines {
		for i, s := range []string{l.c, l.m, l.b, l.n, l.r, l.p} {
			wid[i] = max(wid[i], len([]rune(s)))
		}
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s  %s  %s  %s  %s  %s\n", pad(l.c, wid[0]), pad(l.m, wid[1]), pad(l.b, wid[2]), pad(l.n, wid[3]), pad(l.r, wid[4]), l.p)
	}
}

func pad(s string, n int) string {
	return s + strings.Repeat(" ", max(0, n-len([]rune(s))))
}

// printCeilings prints engine ÷ raw loop for the cases that have both, per
// build, from the medians of the p50 rates.
func printCeilings(w io.Writer, rows map[string]*row) {
	for _, p := range []struct{ eng, raw, label string }{
		{"tcp-64M\x00p50 Gbit/s", "tcp-64M-raw\x00p50 Gbit/s", "tcp;ofi_rxm 64 MiB"},
		{"shm-paged\x00p50 Mop/s", "shm-paged-raw\x00p50 Mop/s", "shm paged 64 B"},
	} {
		e, r := rows[p.eng], rows[p.raw]
		if e == nil || r == nil {
			continue
		}
		part := func(ev, rv []float64) string {
			if len(ev) == 0 || len(rv) == 0 || summarize(rv).Median == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", summarize(ev).Median/summarize(rv).Median)
		}
		fmt.Fprintf(w, "# ceiling %s, engine ÷ raw loop (medians of the p50 rates): base %s, new %s\n", p.label, part(e.Base, r.Base), part(e.New, r.New))
	}
}
