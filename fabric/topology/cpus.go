package topology

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cpuLayout is the machine's cores: logical CPUs, the physical cores (the
// first logical CPU of each core), and the physical cores of each NUMA node.
type cpuLayout struct {
	logical  []int
	physical []int
	nodes    map[int][]int // node -> physical cores, ascending
}

func (c *cpuLayout) nodeIDs() []int {
	ids := make([]int, 0, len(c.nodes))
	for n := range c.nodes {
		ids = append(ids, n)
	}
	sort.Ints(ids)
	return ids
}

type coreKey struct{ pkg, core int }

func readCPUs(procRoot, sysRoot string) (*cpuLayout, error) {
	path := filepath.Join(procRoot, "cpuinfo")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	cores, logical, err := parseCPUInfo(path, raw)
	if err != nil {
		return nil, err
	}
	if cores == nil {
		// No physical/core ids in cpuinfo (arm64, some hypervisors): ask
		// the kernel's per-CPU topology instead.
		cores = sysfsCores(sysRoot, logical)
	}
	l := &cpuLayout{logical: logical, nodes: map[int][]int{}}
	seen := map[coreKey]bool{}
	isPhys := map[int]bool{}
	for _, cpu := range logical {
		k, ok := cores[cpu]
		if !ok {
			k = coreKey{-1, cpu} // unknown: its own core
		}
		if !seen[k] {
			seen[k] = true
			l.physical = append(l.physical, cpu)
			isPhys[cpu] = true
		}
	}
	nodeDirs, _ := filepath.Glob(filepath.Join(sysRoot, "devices", "system", "node", "node[0-9]*"))
	for _, dir := range nodeDirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "node"))
		if err != nil {
			continue
		}
		s, err := readTrim(filepath.Join(dir, "cpulist"))
		if err != nil {
			return nil, err
		}
		cpus, err := parseCPUList(s)
		if err != nil {
			return nil, malformed(filepath.Join(dir, "cpulist"), "%v", err)
		}
		var phys []int
		for _, c := range cpus {
			if isPhys[c] {
				phys = append(phys, c)
			}
		}
		l.nodes[id] = phys // a memory-only node keeps an empty slice
	}
	if len(l.nodes) == 0 {
		l.nodes[0] = append([]int(nil), l.physical...)
	}
	return l, nil
}

// parseCPUInfo returns the logical CPUs and, when every processor block
// has them, their (physical id, core id).
func parseCPUInfo(path string, raw []byte) (map[int]coreKey, []int, error) {
	cores := map[int]coreKey{}
	var logical []int
	complete := true
	cpu, pkg, core := -1, -1, -1
	flush := func() {
		if cpu < 0 {
			return
		}
		logical = append(logical, cpu)
		if pkg < 0 || core < 0 {
			complete = false
		} else {
			cores[cpu] = coreKey{pkg, core}
		}
		cpu, pkg, core = -1, -1, -1
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20) // flags lines are long
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		var dst *int
		switch key {
		case "processor":
			flush()
			dst = &cpu
		case "physical id":
			dst = &pkg
		case "core id":
			dst = &core
		default:
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 {
			return nil, nil, malformed(path, "%s: %q", key, val)
		}
		*dst = n
	}
	if err := sc.Err(); err != nil {
		return nil, nil, &FileError{Path: path, Err: err}
	}
	flush()
	if len(logical) == 0 {
		return nil, nil, malformed(path, "no processor entries")
	}
	sort.Ints(logical)
	if !complete {
		return nil, logical, nil
	}
	return cores, logical, nil
}

func sysfsCores(sysRoot string, logical []int) map[int]coreKey {
	cores := map[int]coreKey{}
	for _, cpu := range logical {
		dir := filepath.Join(sysRoot, "devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "topology")
		pkg, err1 := readInt(filepath.Join(dir, "physical_package_id"))
		core, err2 := readInt(filepath.Join(dir, "core_id"))
		if err1 == nil && err2 == nil {
			cores[cpu] = coreKey{pkg, core}
		}
	}
	return cores
}

// parseCPUList parses the kernel's list format: "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var out []int
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, errors.New("bad cpu list " + strconv.Quote(s))
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < a || b-a > 1<<16 {
				return nil, errors.New("bad cpu list " + strconv.Quote(s))
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// isNotExist reports a missing file through a FileError.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
