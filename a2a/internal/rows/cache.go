package rows

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// SharedCacheBytes is the size of the CPU's largest cache shared by every
// online CPU (a last-level cache of Linux's sysfs, cpu0's view), or 0
// where there is none or it cannot be read. The host backend stores rows
// with cached stores only while what a phase stores that way fits in part
// of it: the rows are read next by another rank, on another core, which
// finds them in that cache only if it shares it. Where the last-level
// cache is split (one per core complex, as on multi-die processors) ranks
// may run on cores that do not share one, and rows are streamed instead.
var SharedCacheBytes = sync.OnceValue(func() int {
	online, _ := os.ReadFile("/sys/devices/system/cpu/online")
	return sharedCache("/sys/devices/system/cpu/cpu0/cache", strings.TrimSpace(string(online)))
})

// sharedCache reads the largest cache under dir (sysfs's cpuN/cache)
// whose shared_cpu_list names every CPU of online (a sysfs CPU list, such
// as "0-7,16-23"), when that is more than one; 0 when online cannot be
// parsed.
func sharedCache(dir, online string) int {
	all := cpuList(online)
	if len(all) < 2 {
		return 0
	}
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
		if !covers(cpuList(read("shared_cpu_list")), all) {
			continue // one CPU's own, or one core complex's
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

// cpuList returns the CPUs of a sysfs CPU list ("0-3,8,10-11"), or nil
// for an empty or malformed one.
func cpuList(list string) map[int]bool {
	if list == "" {
		return nil
	}
	cpus := map[int]bool{}
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil
			}
		}
		for c := a; c <= b; c++ {
			cpus[c] = true
		}
	}
	return cpus
}

// covers reports whether set holds every CPU of want.
func covers(set, want map[int]bool) bool {
	for c := range want {
		if !set[c] {
			return false
		}
	}
	return true
}
