package rows

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// SharedCacheBytes is the size of the CPU's largest cache shared by more
// than one core (the last-level cache of Linux's sysfs, cpu0's view), or
// 0 where it cannot be read. The host backend stores rows with cached
// stores only while what a phase stores that way fits in part of it.
var SharedCacheBytes = sync.OnceValue(func() int {
	return sharedCache("/sys/devices/system/cpu/cpu0/cache")
})

// sharedCache reads the largest cache under dir (sysfs's cpuN/cache)
// whose shared_cpu_list names more than one CPU.
func sharedCache(dir string) int {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	best := 0
	for _, d := range idx {
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		if t := read("type"); t != "Unified" && t != "Data" {
			continue
		}
		if cpus := read("shared_cpu_list"); !strings.ContainsAny(cpus, ",-") {
			continue // one CPU's own
		}
		size := read("size")
		mult := 1
		switch {
		case strings.HasSuffix(size, "K"):
			mult, size = 1<<10, strings.TrimSuffix(size, "K")
		case strings.HasSuffix(size, "M"):
			mult, size = 1<<20, strings.TrimSuffix(size, "M")
		}
		if n, err := strconv.Atoi(size); err == nil && n*mult > best {
			best = n * mult
		}
	}
	return best
}
