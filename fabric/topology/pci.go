package topology

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// pciDev is one PCI function as sysfs shows it.
type pciDev struct {
	addr   string // "0000:17:00.0"
	path   string // resolved directory under <sys>/devices
	vendor uint16
	device uint16
	class  uint32 // 24-bit class code, 0x030200 for a 3D controller
	numa   int    // the device's own numa_node, -1 if absent or unknown
}

// pciTree is every PCI function plus who hangs under whom.
type pciTree struct {
	byAddr map[string]*pciDev
	byPath map[string]*pciDev
	// slots counts, per parent directory, the distinct device slots below
	// it: the functions of one multi-function device count once, so a
	// dual-port NIC does not look like a branch point.
	slots map[string]map[string]bool
}

func scanPCI(sysRoot string) (*pciTree, error) {
	t := &pciTree{byAddr: map[string]*pciDev{}, byPath: map[string]*pciDev{}, slots: map[string]map[string]bool{}}
	dir := filepath.Join(sysRoot, "bus", "pci", "devices")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil // no PCI bus (containers, some VMs): no GPU, no NIC
	}
	if err != nil {
		return nil, &FileError{Path: dir, Err: err}
	}
	for _, e := range ents {
		link := filepath.Join(dir, e.Name())
		target, err := os.Readlink(link)
		if err != nil {
			// A plain directory (a fake tree or an unusual sysfs) is its own path.
			target = link
		} else if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		} else {
			target = filepath.Join(sysRoot, strings.TrimPrefix(target, "/sys"))
		}
		d := &pciDev{addr: normalizeAddr(e.Name()), path: filepath.Clean(target), numa: -1}
		if d.vendor, err = readHex16(filepath.Join(d.path, "vendor")); errors.Is(err, fs.ErrNotExist) {
			continue // a half-removed device (hot unplug in progress)
		} else if err != nil {
			return nil, err
		}
		if d.device, err = readHex16(filepath.Join(d.path, "device")); err != nil {
			return nil, err
		}
		if c, err := readHex(filepath.Join(d.path, "class"), 32); err == nil {
			d.class = uint32(c)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if n, err := readInt(filepath.Join(d.path, "numa_node")); err == nil && n >= 0 {
			d.numa = n
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		t.byAddr[d.addr] = d
		t.byPath[d.path] = d
		parent := filepath.Dir(d.path)
		if t.slots[parent] == nil {
			t.slots[parent] = map[string]bool{}
		}
		t.slots[parent][slotOf(d.addr)] = true
	}
	return t, nil
}

// branchingAncestor walks up from d while the bridge above has a single
// child slot, and returns the first directory that branches (a switch, or
// the root bus when the walk reaches it).
func (t *pciTree) branchingAncestor(d *pciDev) string {
	p := filepath.Dir(d.path)
	for {
		bridge, ok := t.byPath[p]
		if !ok || len(t.slots[p]) > 1 {
			return p
		}
		p = filepath.Dir(bridge.path)
	}
}

// numaOf returns d's NUMA node, or its nearest ancestor's when d reports -1
// (some firmware sets it on the root port only), or -1.
func (t *pciTree) numaOf(d *pciDev) int {
	for cur := d; cur != nil; cur = t.byPath[filepath.Dir(cur.path)] {
		if cur.numa >= 0 {
			return cur.numa
		}
	}
	return -1
}

// gpus lists NVIDIA display or 3D controllers by PCI address. NVSwitches
// (class 0x0680) and audio functions are not GPUs.
func (t *pciTree) gpus() []*pciDev {
	var out []*pciDev
	for _, d := range t.byAddr {
		cls := d.class >> 8
		if d.vendor == VendorNVIDIA && (cls == 0x0302 || cls == 0x0300) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

// normalizeAddr lower-cases a PCI address and shortens CUDA's 8-digit
// domain ("00000000:18:00.0") to sysfs's 4 digits.
func normalizeAddr(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if i := strings.IndexByte(a, ':'); i == 8 && strings.HasPrefix(a, "0000") {
		a = a[4:]
	}
	return a
}

// slotOf drops the function number: "0000:17:00.1" -> "0000:17:00".
func slotOf(addr string) string {
	if i := strings.LastIndexByte(addr, '.'); i > 0 {
		return addr[:i]
	}
	return addr
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &FileError{Path: path, Err: err}
	}
	return strings.TrimSpace(string(b)), nil
}

func readHex(path string, bits int) (uint64, error) {
	s, err := readTrim(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, bits)
	if err != nil {
		return 0, malformed(path, "want a hex number, got %q", s)
	}
	return v, nil
}

func readHex16(path string) (uint16, error) {
	v, err := readHex(path, 16)
	return uint16(v), err
}

func readInt(path string) (int, error) {
	s, err := readTrim(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, malformed(path, "want an integer, got %q", s)
	}
	return v, nil
}
