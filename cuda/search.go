package cuda

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Library search. Candidate lists are built from the environment by pure
// functions (tested without any library present); internal/dl tries them
// in order and keeps every dlerror text.

// searchEnv is what the search reads: the environment and a glob.
type searchEnv struct {
	getenv func(string) string
	glob   func(string) ([]string, error)
}

// libDirs lists directories in priority order: the explicit CUDA_HOME and
// CUDA_PATH first (a user who sets them means them), then LD_LIBRARY_PATH,
// then the standard places, newest toolkit first. Stub directories are
// dropped: their libcuda only answers CUDA_ERROR_STUB_LIBRARY.
func libDirs(env searchEnv) []string {
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"} {
		if root := env.getenv(v); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	for _, d := range strings.Split(env.getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/lib")
	if env.glob != nil {
		if m, err := env.glob("/usr/local/cuda-*"); err == nil {
			sortVersionsDesc(m)
			for _, root := range m {
				dirs = append(dirs, filepath.Join(root, "lib64"))
			}
		}
	}
	dirs = append(dirs,
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/sbsa-linux-gnu",
		"/usr/lib64", "/usr/lib", "/usr/local/lib", "/usr/lib/wsl/lib", "/opt/gdrcopy/lib")
	out := dirs[:0]
	seen := map[string]bool{}
	for _, d := range dirs {
		d = filepath.Clean(d)
		if seen[d] || strings.Contains(d, "/stubs") {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	return out
}

// candidates returns override alone when set; otherwise each soname bare
// (the dynamic loader's own search: LD_LIBRARY_PATH, ld.so.cache), then
// each soname in each directory.
func candidates(env searchEnv, override string, sonames ...string) []string {
	if override != "" {
		return []string{override}
	}
	out := slices.Clone(sonames)
	for _, d := range libDirs(env) {
		for _, n := range sonames {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

func driverCandidates(env searchEnv, override string) []string {
	return candidates(env, override, "libcuda.so.1", "libcuda.so")
}

func nvrtcCandidates(env searchEnv, override string) []string {
	// libnvrtc.so.11.2 is CUDA 11.x's soname (Debian's libnvrtc11.2
	// package carries NVRTC 11.8), last: newer compilers know newer GPUs.
	return candidates(env, override, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "libnvrtc.so.11.2")
}

func gdrCandidates(env searchEnv, override string) []string {
	return candidates(env, override, "libgdrapi.so.2", "libgdrapi.so")
}

// builtinsCandidates lists libnvrtc-builtins libraries beside an NVRTC
// library path (preloaded so NVRTC finds its builtins wherever it lives).
func builtinsCandidates(env searchEnv, nvrtcPath string) []string {
	if env.glob == nil || !strings.Contains(nvrtcPath, "/") {
		return nil
	}
	m, err := env.glob(filepath.Join(filepath.Dir(nvrtcPath), "libnvrtc-builtins.so*"))
	if err != nil {
		return nil
	}
	sortVersionsDesc(m)
	return m
}

// sortVersionsDesc orders paths by the numbers they contain, highest
// first: cuda-13.0 before cuda-12.9 before cuda-12.10 is wrong, so the
// numbers are compared as integers.
func sortVersionsDesc(paths []string) {
	slices.SortStableFunc(paths, func(a, b string) int {
		return -compareVersions(versionNumbers(a), versionNumbers(b))
	})
}

func versionNumbers(s string) []int {
	var nums []int
	cur, in := 0, false
	for _, r := range filepath.Base(s) {
		if r >= '0' && r <= '9' {
			cur, in = cur*10+int(r-'0'), true
			continue
		}
		if in {
			nums = append(nums, cur)
			cur, in = 0, false
		}
	}
	if in {
		nums = append(nums, cur)
	}
	return nums
}

func compareVersions(a, b []int) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// formatVersion turns a CUDA version integer (13000) into "13.0".
func formatVersion(v int) string {
	return strconv.Itoa(v/1000) + "." + strconv.Itoa(v%1000/10)
}
