package cuda

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCacheKey(t *testing.T) {
	src := Source{Name: "k.cu", Code: "extern \"C\" __global__ void k() {}"}
	base := cacheKey(src, "sm_90a", 13, 0, []string{"-lineinfo"})
	if len(base) != 64 || base != cacheKey(src, "sm_90a", 13, 0, []string{"-lineinfo"}) {
		t.Fatalf("key not a stable sha256 hex: %q", base)
	}
	variants := map[string]string{
		"code":    cacheKey(Source{Name: "k.cu", Code: src.Code + " "}, "sm_90a", 13, 0, []string{"-lineinfo"}),
		"name":    cacheKey(Source{Name: "j.cu", Code: src.Code}, "sm_90a", 13, 0, []string{"-lineinfo"}),
		"arch":    cacheKey(src, "sm_90", 13, 0, []string{"-lineinfo"}),
		"nvrtc":   cacheKey(src, "sm_90a", 13, 1, []string{"-lineinfo"}),
		"options": cacheKey(src, "sm_90a", 13, 0, nil),
	}
	for what, k := range variants {
		if k == base {
			t.Errorf("changing the %s does not change the key", what)
		}
	}
	// Length prefixes keep field boundaries: moving bytes between two
	// options must change the key.
	if cacheKey(src, "a", 1, 0, []string{"-DA", "B"}) == cacheKey(src, "a", 1, 0, []string{"-DAB"}) {
		t.Error("option boundaries are not part of the key")
	}
}

func TestKernelCache(t *testing.T) {
	dir := t.TempDir()
	k := newKernelCache(dir)
	key := strings.Repeat("ab", 32)
	if _, ok := k.get(key); ok {
		t.Fatal("hit in an empty cache")
	}
	cubin := append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 100)...)
	if err := k.put(key, cubin); err != nil {
		t.Fatal(err)
	}
	got, ok := k.get(key)
	if !ok || len(got) != len(cubin) {
		t.Fatalf("get after put: %v %d", ok, len(got))
	}
	// No temporary files left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != key+".cubin" {
		t.Fatalf("cache dir holds %v", ents)
	}
	// A damaged entry is a miss, and remove deletes it.
	os.WriteFile(filepath.Join(dir, key+".cubin"), []byte("garbage"), 0o644)
	if _, ok := k.get(key); ok {
		t.Fatal("non-ELF entry served")
	}
	k.remove(key)
	if _, err := os.Stat(filepath.Join(dir, key+".cubin")); !os.IsNotExist(err) {
		t.Fatalf("remove: %v", err)
	}
	off := newKernelCache("off")
	if err := off.put(key, cubin); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.get(key); ok {
		t.Fatal("disabled cache hit")
	}
}

func TestEmbeddedKernels(t *testing.T) {
	names := KernelNames()
	if len(names) == 0 {
		t.Fatal("no embedded kernels")
	}
	src, err := KernelSource("flags.cu")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"ferry_flag_wait", "ferry_flag_echo", "ferry_flag_set", "ferry_u64_add"} {
		if !regexp.MustCompile(`extern "C" __global__ void (__launch_bounds__\(\d+\) )?` + fn + `\(`).MatchString(src.Code) {
			t.Errorf("flags.cu lacks extern \"C\" kernel %s", fn)
		}
	}
	if b := KernelBuilds(); len(b) != 1 || b[0].Source != src || len(b[0].Launches) != 4 {
		t.Errorf("KernelBuilds: %+v", b)
	}
	if _, err := KernelSource("missing.cu"); !errorsIs(err, ErrInvalidArgument) {
		t.Errorf("missing kernel: %v", err)
	}
}
