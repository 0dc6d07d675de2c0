package rows

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSharedCache reads a fake sysfs cache directory: the largest cache
// shared by every online CPU counts; a core's own caches, instruction
// caches and a cache of some of the CPUs (one core complex's) do not; an
// unreadable directory or online list gives 0.
func TestSharedCache(t *testing.T) {
	dir := t.TempDir()
	for name, files := range map[string][3]string{
		"index0": {"Data", "32K", "0"},
		"index1": {"Instruction", "32K", "0-1"},
		"index2": {"Unified", "1024K", "0"},
		"index3": {"Unified", "32768K", "0-1"},
		"index4": {"Unified", "8M", "0,2"},
		"index5": {"Unified", "64M", "0"}, // larger, but one CPU's
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
	for _, c := range []struct {
		online string
		want   int
	}{
		{"0-1", 32 << 20},
		{"0,2", 8 << 20}, // index4 covers these two
		{"0-3", 0},       // no cache is shared by all four: split caches stream
		{"0", 0},
		{"", 0},
		{"0-x", 0},
	} {
		if got := sharedCache(dir, c.online); got != c.want {
			t.Errorf("shared cache of the fake tree, online %q: got %d bytes, want %d", c.online, got, c.want)
		}
	}
	if got := sharedCache(filepath.Join(dir, "missing"), "0-1"); got != 0 {
		t.Errorf("shared cache of a missing tree: got %d, want 0", got)
	}
	for list, want := range map[string]int{"0-3,8,10-11": 7, "5": 1, "3-1": 0, "a": 0, "0-3,": 0} {
		if got := len(cpuList(list)); got != want {
			t.Errorf("cpuList(%q) has %d CPUs, want %d", list, got, want)
		}
	}
	t.Logf("this machine: %d bytes", SharedCacheBytes())
}
