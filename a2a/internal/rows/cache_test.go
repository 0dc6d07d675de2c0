package rows

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSharedCache reads a fake sysfs cache directory: the largest cache
// shared by several CPUs counts, a core's own caches and instruction
// caches do not, and an unreadable directory gives 0.
func TestSharedCache(t *testing.T) {
	dir := t.TempDir()
	for name, files := range map[string][3]string{
		"index0": {"Data", "32K", "0"},
		"index1": {"Instruction", "32K", "0-1"},
		"index2": {"Unified", "1024K", "0"},
		"index3": {"Unified", "32768K", "0-1"},
		"index4": {"Unified", "8M", "0,2"},
	} {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, f := range []string{"type", "size", "shared_cpu_list"} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(files[i]+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := sharedCache(dir); got != 32<<20 {
		t.Errorf("shared cache of the fake tree: got %d bytes, want %d", got, 32<<20)
	}
	if got := sharedCache(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("shared cache of a missing tree: got %d, want 0", got)
	}
	t.Logf("this machine: %d bytes", SharedCacheBytes())
}
