package cuda

import (
	"slices"
	"strings"
	"testing"
)

func fakeEnv(vars map[string]string, globs map[string][]string) searchEnv {
	return searchEnv{
		getenv: func(k string) string { return vars[k] },
		glob:   func(p string) ([]string, error) { return slices.Clone(globs[p]), nil },
	}
}

func TestLibDirsOrder(t *testing.T) {
	env := fakeEnv(map[string]string{
		"CUDA_HOME":       "/opt/cuda",
		"LD_LIBRARY_PATH": "/a::/b:/opt/cuda/lib64:/usr/local/cuda/lib64/stubs",
	}, map[string][]string{
		"/usr/local/cuda-*": {"/usr/local/cuda-12.9", "/usr/local/cuda-13.0", "/usr/local/cuda-12.10"},
	})
	dirs := libDirs(env)
	idx := func(d string) int { return slices.Index(dirs, d) }
	for _, d := range []string{"/opt/cuda/lib64", "/a", "/b", "/usr/local/cuda/lib64", "/usr/local/cuda-13.0/lib64", "/usr/lib/x86_64-linux-gnu"} {
		if idx(d) < 0 {
			t.Fatalf("%s missing from %v", d, dirs)
		}
	}
	if !(idx("/opt/cuda/lib64") < idx("/a") && idx("/a") < idx("/b") && idx("/b") < idx("/usr/local/cuda/lib64")) {
		t.Errorf("CUDA_HOME, then LD_LIBRARY_PATH, then standard dirs: %v", dirs)
	}
	if !(idx("/usr/local/cuda-13.0/lib64") < idx("/usr/local/cuda-12.10/lib64") &&
		idx("/usr/local/cuda-12.10/lib64") < idx("/usr/local/cuda-12.9/lib64")) {
		t.Errorf("toolkits not newest first: %v", dirs)
	}
	for _, d := range dirs {
		if strings.Contains(d, "stubs") {
			t.Errorf("stub dir %s kept", d)
		}
	}
	if strings.Count(strings.Join(dirs, "\n"), "/opt/cuda/lib64\n") > 1 {
		t.Errorf("duplicate dir: %v", dirs)
	}
}

func TestCandidates(t *testing.T) {
	env := fakeEnv(map[string]string{"CUDA_HOME": "/opt/cuda"}, nil)
	c := nvrtcCandidates(env, "")
	if c[0] != "libnvrtc.so.13" || c[1] != "libnvrtc.so.12" || c[3] != "libnvrtc.so.11.2" {
		t.Errorf("bare sonames first, newest first: %v", c[:3])
	}
	if !slices.Contains(c, "/opt/cuda/lib64/libnvrtc.so.13") {
		t.Errorf("CUDA_HOME not searched: %v", c)
	}
	if got := driverCandidates(env, "/x/libcuda.so.1"); len(got) != 1 || got[0] != "/x/libcuda.so.1" {
		t.Errorf("override not alone: %v", got)
	}
	if g := gdrCandidates(env, ""); g[0] != "libgdrapi.so.2" {
		t.Errorf("gdr candidates: %v", g[:2])
	}
}

func TestBuiltinsCandidates(t *testing.T) {
	env := fakeEnv(nil, map[string][]string{
		"/cuda/lib64/libnvrtc-builtins.so*": {"/cuda/lib64/libnvrtc-builtins.so.13.0", "/cuda/lib64/libnvrtc-builtins.so.13.1"},
	})
	got := builtinsCandidates(env, "/cuda/lib64/libnvrtc.so.13")
	if len(got) != 2 || got[0] != "/cuda/lib64/libnvrtc-builtins.so.13.1" {
		t.Errorf("builtins: %v", got)
	}
	if builtinsCandidates(env, "libnvrtc.so.13") != nil {
		t.Error("bare soname has no directory to look in")
	}
}

func TestVersionHelpers(t *testing.T) {
	if compareVersions([]int{12, 10}, []int{12, 9}) <= 0 || compareVersions([]int{13}, []int{13, 0}) >= 0 {
		t.Error("compareVersions")
	}
	if formatVersion(13000) != "13.0" || formatVersion(12080) != "12.8" {
		t.Error("formatVersion")
	}
	if ArchFor(9, 0) != "sm_90a" || ArchFor(10, 0) != "sm_100a" || ArchFor(8, 0) != "sm_80" || ArchFor(8, 9) != "sm_89" {
		t.Error("ArchFor")
	}
}
