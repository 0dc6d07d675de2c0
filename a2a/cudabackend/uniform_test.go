package cudabackend

import (
	"regexp"
	"strings"
	"testing"
)

// TestAbortDecisionsBlockUniform checks the kernel sources for the two
// ways a launch that aborts could hang or split a block at a barrier:
//   - the launch's abort flag, which any block may set at any moment, read
//     per thread (a2a_aborted) where every thread of a block runs: two
//     warps can read different answers and leave for different barriers.
//     Such code must decide with a2a_block_aborted (one answer per block,
//     taken at a barrier); a2a_aborted is allowed only in the helpers that
//     one thread runs (a2a_wait, a2a_arrive) and under threadIdx.x == 0;
//   - an unbounded grid barrier (fd_grid_sync): a grid that never gathers
//     must end in the kernel's timeout status, so the kernels use
//     a2a_grid_sync (fd_grid_sync_for with the launch's timeout).
//
// The emulator's chaos mode (TestEmuChaosAborts in package emu) checks the
// same at run time: a divergent barrier fails the launch.
func TestAbortDecisionsBlockUniform(t *testing.T) {
	oneThread := map[string]bool{"a2a_aborted": true, "a2a_block_aborted": true, "a2a_wait": true, "a2a_arrive": true}
	funcRE := regexp.MustCompile(`(?:^|[\s*])(a2a_\w+)\(`)
	for _, name := range []string{"a2a_common.cuh", "a2a_dispatch.cu", "a2a_combine.cu"} {
		b, err := kernelFS.ReadFile("kernels/" + name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		fn := ""
		for i, line := range lines {
			// Definitions start in the first column (the files' style).
			if m := funcRE.FindStringSubmatch(line); m != nil && line[0] != '\t' && line[0] != ' ' &&
				!strings.HasPrefix(line, "//") && !strings.HasPrefix(line, "#") {
				fn = m[1]
			}
			code, _, _ := strings.Cut(line, "//")
			if strings.Contains(code, "fd_grid_sync(") {
				t.Errorf("%s:%d: unbounded grid barrier fd_grid_sync (use a2a_grid_sync): %s", name, i+1, strings.TrimSpace(line))
			}
			if !strings.Contains(code, "a2a_aborted(") || oneThread[fn] {
				continue
			}
			guarded := false
			for j := max(0, i-3); j <= i; j++ {
				if strings.Contains(lines[j], "threadIdx.x == 0") {
					guarded = true
				}
			}
			if !guarded {
				t.Errorf("%s:%d (%s): per-thread read of the abort flag where the whole block runs (use a2a_block_aborted): %s",
					name, i+1, fn, strings.TrimSpace(line))
			}
		}
	}
}

// TestPeerRowLoadsCoherent: transport rows that node peers and the NIC
// write while a kernel runs are read through a2a_ld16_row, which is the
// non-coherent load only in builds for compute capability 9.0; the
// caller's inputs (read-only for the launch) may use fd_ld16_nc.
func TestPeerRowLoadsCoherent(t *testing.T) {
	for _, cc := range [][2]int{{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}} {
		got := strings.Join(ArchDefines(cc[0], cc[1]), " ")
		want := ""
		if cc == [2]int{9, 0} {
			want = "-DA2A_NC_PEER_LOADS=1"
		}
		if got != want {
			t.Errorf("sm_%d%d defines %q, want %q", cc[0], cc[1], got, want)
		}
	}
	// Functions whose sources are transport rows.
	rowReaders := map[string]bool{"a2a_copy_out": true, "a2a_reduce_chunk": true}
	funcRE := regexp.MustCompile(`(?:^|[\s*])(a2a_\w+)\(`)
	for _, name := range []string{"a2a_common.cuh", "a2a_dispatch.cu", "a2a_combine.cu"} {
		b, err := kernelFS.ReadFile("kernels/" + name)
		if err != nil {
			t.Fatal(err)
		}
		fn := ""
		for i, line := range strings.Split(string(b), "\n") {
			if m := funcRE.FindStringSubmatch(line); m != nil && line[0] != '\t' && line[0] != ' ' && !strings.HasPrefix(line, "//") {
				fn = m[1]
			}
			code, _, _ := strings.Cut(line, "//")
			if rowReaders[fn] && strings.Contains(code, "fd_ld16_nc(") {
				t.Errorf("%s:%d (%s): non-coherent load of a transport row: %s", name, i+1, fn, strings.TrimSpace(line))
			}
		}
	}
}
