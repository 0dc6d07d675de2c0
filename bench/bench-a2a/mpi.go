package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// alltoallvSource is the peer's program, built with mpicc when first used.
//
//go:embed alltoallv/alltoallv.c
var alltoallvSource []byte

// mpiTimeout bounds one run of the peer (both phases).
const mpiTimeout = 2 * time.Minute

// mpiPeer times Open MPI's MPI_Alltoallv on the byte counts of each case:
// the same per-pair bytes, the same number of local processes, every rank
// on this machine (mpirun --oversubscribe), so an intra-node run of
// bench-a2a has a CPU all-to-all to be compared with.
type mpiPeer struct {
	dir   string // holds the built program
	exe   string
	order string // "step" or "phase" (--mpi-order)
	err   error  // why no run is possible (mpirun or mpicc missing, the build failed)
}

// newMPIPeer builds the peer program in a temporary directory. A missing
// tool or a failed build is kept as the peer's error, reported in each
// case's row, not a reason to stop the benchmark.
func newMPIPeer(ctx context.Context, order string) *mpiPeer {
	m := &mpiPeer{order: order}
	for _, tool := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(tool); err != nil {
			m.err = fmt.Errorf("%s not found (make deps installs openmpi-bin and libopenmpi-dev): %w", tool, err)
			return m
		}
	}
	if m.dir, m.err = os.MkdirTemp("", "bench-a2a-mpi-"); m.err != nil {
		return m
	}
	src := filepath.Join(m.dir, "alltoallv.c")
	m.exe = filepath.Join(m.dir, "alltoallv")
	if m.err = os.WriteFile(src, alltoallvSource, 0o600); m.err != nil {
		return m
	}
	out, err := exec.CommandContext(ctx, "mpicc", "-O2", "-o", m.exe, src).CombinedOutput()
	if err != nil {
		m.err = fmt.Errorf("mpicc: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return m
}

func (m *mpiPeer) close() {
	if m.dir != "" {
		_ = os.RemoveAll(m.dir)
	}
}

// run times iters MPI_Alltoallv calls (after warmup) per phase on W
// processes, in m.order; disp[r*W+q] and comb[r*W+q] are the bytes r sends q. It
// returns every process's samples of each phase, in microseconds.
func (m *mpiPeer) run(ctx context.Context, W, iters, warmup int, disp, comb []uint64) (d, c []float64, err error) {
	if m.err != nil {
		return nil, nil, m.err
	}
	ctx, cancel := context.WithTimeout(ctx, mpiTimeout)
	defer cancel()
	args := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(W), m.exe, m.order,
		strconv.Itoa(iters), strconv.Itoa(warmup), strconv.Itoa(W)}
	for _, v := range append(append([]uint64(nil), disp...), comb...) {
		args = append(args, strconv.FormatUint(v, 10))
	}
	cmd := exec.CommandContext(ctx, "mpirun", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("mpirun: %w: %s", err, lastLine(stderr.String()))
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var dst *[]float64
		switch f[0] {
		case "dispatch":
			dst = &d
		case "combine":
			dst = &c
		default:
			continue
		}
		for _, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("mpirun output %q: %w", line, err)
			}
			*dst = append(*dst, v)
		}
	}
	if len(d) != W*iters || len(c) != W*iters {
		return nil, nil, errors.New("mpirun printed " + strconv.Itoa(len(d)) + " dispatch and " +
			strconv.Itoa(len(c)) + " combine samples, want " + strconv.Itoa(W*iters) + " each")
	}
	return d, c, nil
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
