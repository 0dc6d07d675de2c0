package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Instruction counts of the fabric benchmarks under callgrind: the same on
// a loaded machine as on an idle one, for the functions that run a fixed
// number of times per op. The benchmarks' writer spins, so the count of
// the whole run also holds the worker's empty passes, which vary from run
// to run; the table shows each function's own (self) instructions per op,
// the functions that differ most between the builds first.

// cgLine matches a function line of callgrind_annotate --inclusive=no:
// "  1,234 (12.34%)  file:function [binary]".
var cgLine = regexp.MustCompile(`^\s*([\d,]+)\s+\([\s\d.]+%\)\s+(\S+?):(\S+)`)

// parseCallgrind sums callgrind_annotate's self counts by function, the
// module path dropped and callgrind's recursion marks ('2) folded in.
func parseCallgrind(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := cgLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(m[2], "PROGRAM") {
			continue
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
		if err != nil {
			return nil, fmt.Errorf("parse callgrind count %q: %w", m[1], err)
		}
		fn := strings.ReplaceAll(m[3], "github.com/ferryrdma/ferry/", "")
		// The null provider's package moved (internal/, then fabric/, now
		// beside the other providers): name it as it is now.
		fn = strings.Replace(fn, "internal/memfabric.", "memfabric.", 1)
		fn = strings.Replace(fn, "fabric/memfabric.", "memfabric.", 1)
		if i := strings.Index(fn, "'"); i > 0 {
			fn = fn[:i]
		}
		out[fn] += v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse callgrind_annotate output: no function lines")
	}
	return out, nil
}

// benchPattern is the -test.bench pattern that runs exactly the named
// benchmark ("NullPaged/pages=100").
func benchPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		if i == 0 {
			p = "Benchmark" + p
		}
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// callgrindOps is how many iterations a benchmark runs under callgrind:
// ops for per-request benchmarks, ops/pages for paged ones.
func callgrindOps(name string, ops int) int {
	if _, p, ok := strings.Cut(name, "pages="); ok {
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			return max(20, ops/n)
		}
	}
	return ops
}

func runCallgrind(ctx context.Context, b *build, name string, iters int, tmp string) (map[string]float64, error) {
	if why, ok := b.missing["fabric.test"]; ok {
		return nil, fmt.Errorf("fabric.test %s", why)
	}
	out := filepath.Join(tmp, "callgrind."+b.label)
	defer os.Remove(out)
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind", "--callgrind-out-file="+out,
		b.tool("fabric.test"), "-test.run", "^$", "-test.bench", benchPattern(name), "-test.benchtime", fmt.Sprintf("%dx", iters))
	cmd.Dir = filepath.Join(b.src, "fabric")
	// callgrind stops on the runtime's preemption signal.
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("valgrind: %w: %s", err, lastLine(errb.Bytes()))
	}
	ann, err := exec.CommandContext(ctx, "callgrind_annotate", "--inclusive=no", "--threshold=100", out).Output()
	if err != nil {
		return nil, fmt.Errorf("callgrind_annotate: %w", err)
	}
	counts, err := parseCallgrind(bytes.NewReader(ann))
	if err != nil {
		return nil, err
	}
	for k := range counts {
		counts[k] /= float64(iters)
	}
	return counts, nil
}

// printCallgrind prints, per op, the total and the top functions by the
// size of their difference between the builds.
func printCallgrind(w io.Writer, name string, base, cur map[string]float64, top int) {
	var tb, tn float64
	fns := map[string]bool{}
	for k, v := range base {
		tb += v
		fns[k] = true
	}
	for k, v := range cur {
		tn += v
		fns[k] = true
	}
	list := make([]string, 0, len(fns))
	for k := range fns {
		list = append(list, k)
	}
	sort.Slice(list, func(i, j int) bool {
		di, dj := abs(cur[list[i]]-base[list[i]]), abs(cur[list[j]]-base[list[j]])
		if di != dj {
			return di > dj
		}
		return list[i] < list[j]
	})
	fmt.Fprintf(w, "# callgrind %s, instructions per op: base %.0f, new %.0f in all (with the spinning worker's empty passes, which vary)\n", name, tb, tn)
	fmt.Fprintf(w, "%10s %10s %10s  %s\n", "base", "new", "new-base", "function (self)")
	for _, k := range list[:min(top, len(list))] {
		fmt.Fprintf(w, "%10.1f %10.1f %+10.1f  %s\n", base[k], cur[k], cur[k]-base[k], k)
	}
}
