package topotest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tree is a fake machine being written under Root. Methods record the first
// error; Err returns it. A Tree is not safe for concurrent use.
type Tree struct {
	Root, Sys, Proc, Dev string

	dirs    map[string]string // pci address or root bus name -> directory
	nextBus int
	slots   map[string]int // root bus -> next root-port slot
	err     error
}

// New starts an empty machine under root (normally t.TempDir()).
func New(root string) *Tree {
	t := &Tree{Root: root, Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc"),
		Dev: filepath.Join(root, "dev"), dirs: map[string]string{}, nextBus: 0x10, slots: map[string]int{}}
	for _, d := range []string{filepath.Join(t.Sys, "bus", "pci", "devices"), filepath.Join(t.Sys, "devices", "system", "node"), t.Proc, t.Dev} {
		t.mkdir(d)
	}
	return t
}

// Err returns the first error met while writing the tree.
func (t *Tree) Err() error { return t.err }

func (t *Tree) mkdir(d string) {
	if t.err == nil {
		t.err = os.MkdirAll(d, 0o755)
	}
}

// WriteFile writes a file at a path relative to Root, creating directories.
func (t *Tree) WriteFile(rel, content string) {
	p := filepath.Join(t.Root, rel)
	t.mkdir(filepath.Dir(p))
	if t.err == nil {
		t.err = os.WriteFile(p, []byte(content), 0o644)
	}
}

func (t *Tree) symlink(target, link string) {
	t.mkdir(filepath.Dir(link))
	if t.err != nil {
		return
	}
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		t.err = err
		return
	}
	t.err = os.Symlink(rel, link)
}

func (t *Tree) bus() int {
	b := t.nextBus
	t.nextBus++
	if b > 0xff && t.err == nil {
		t.err = errors.New("topotest: out of PCI bus numbers")
	}
	return b
}

// RootComplex adds a PCI root bus ("pci0000:NN") and returns its name.
func (t *Tree) RootComplex() string {
	name := fmt.Sprintf("pci0000:%02x", t.bus())
	d := filepath.Join(t.Sys, "devices", name)
	t.mkdir(d)
	t.dirs[name] = d
	return name
}

// Function adds one PCI function under parent (a root bus name or a bridge's
// address). numa < -1 leaves numa_node out; -1 writes -1 as firmware does
// when it does not know.
func (t *Tree) Function(parent, addr string, vendor, device uint16, class uint32, numa int) string {
	pd, ok := t.dirs[parent]
	if !ok {
		if t.err == nil {
			t.err = fmt.Errorf("topotest: unknown parent %q", parent)
		}
		return addr
	}
	d := filepath.Join(pd, addr)
	t.mkdir(d)
	rel := func(name string) string { return strings.TrimPrefix(filepath.Join(d, name), t.Root+"/") }
	t.WriteFile(rel("vendor"), fmt.Sprintf("0x%04x\n", vendor))
	t.WriteFile(rel("device"), fmt.Sprintf("0x%04x\n", device))
	t.WriteFile(rel("class"), fmt.Sprintf("0x%06x\n", class))
	if numa >= -1 {
		t.WriteFile(rel("numa_node"), fmt.Sprintf("%d\n", numa))
	}
	t.symlink(d, filepath.Join(t.Sys, "bus", "pci", "devices", addr))
	t.dirs[addr] = d
	return addr
}

// RootPort adds a root port on root bus rc and returns its address.
func (t *Tree) RootPort(rc string, numa int) string {
	slot := t.slots[rc] + 1
	t.slots[rc] = slot
	addr := fmt.Sprintf("0000:%s:%02x.0", strings.TrimPrefix(rc, "pci0000:"), slot)
	return t.Function(rc, addr, 0x8086, 0x352a, 0x060400, numa)
}

// Endpoint is a device to hang under a port.
type Endpoint struct {
	Vendor, Device uint16
	Class          uint32
	// RDMA names the device's RDMA devices, one per function (a dual-port
	// NIC has two); empty for a device with none.
	RDMA []string
	// Rate is the RDMA port rate as sysfs prints it ("100 Gb/sec").
	Rate string
	// NUMA overrides the numa_node written for the endpoint when set.
	NUMA *int
}

// Int returns a pointer to n, for Endpoint.NUMA.
func Int(n int) *int { return &n }

func (t *Tree) endpoint(parent string, e Endpoint, numa int) string {
	bus := t.bus()
	funcs := max(1, len(e.RDMA))
	n := numa
	if e.NUMA != nil {
		n = *e.NUMA
	}
	first := ""
	for f := range funcs {
		addr := fmt.Sprintf("0000:%02x:00.%d", bus, f)
		t.Function(parent, addr, e.Vendor, e.Device, e.Class, n)
		if first == "" {
			first = addr
		}
		if f < len(e.RDMA) {
			t.RDMADevice(e.RDMA[f], addr, e.Rate)
		}
	}
	return first
}

// Direct hangs e straight under a new root port of rc (no switch) and
// returns its first function's address.
func (t *Tree) Direct(rc string, numa int, e Endpoint) string {
	return t.endpoint(t.RootPort(rc, numa), e, numa)
}

// Switch adds a PCIe switch under a new root port of rc with one downstream
// port per endpoint, and returns the endpoints' addresses.
func (t *Tree) Switch(rc string, numa int, eps ...Endpoint) []string {
	rp := t.RootPort(rc, numa)
	up := t.Function(rp, fmt.Sprintf("0000:%02x:00.0", t.bus()), 0x1000, 0xc030, 0x060400, numa)
	inner := t.bus()
	var out []string
	for i, e := range eps {
		dp := t.Function(up, fmt.Sprintf("0000:%02x:%02x.0", inner, i), 0x1000, 0xc030, 0x060400, numa)
		out = append(out, t.endpoint(dp, e, numa))
	}
	return out
}

// RDMADevice adds /sys/class/infiniband/<name> for the PCI function addr,
// with port 1 at rate.
func (t *Tree) RDMADevice(name, addr, rate string) {
	base := filepath.Join(t.Sys, "class", "infiniband", name)
	t.mkdir(base)
	if d, ok := t.dirs[addr]; ok {
		t.symlink(d, filepath.Join(base, "device"))
	}
	if rate != "" {
		t.WriteFile(strings.TrimPrefix(filepath.Join(base, "ports", "1", "rate"), t.Root+"/"), rate+"\n")
		t.WriteFile(strings.TrimPrefix(filepath.Join(base, "ports", "1", "state"), t.Root+"/"), "4: ACTIVE\n")
	}
}

// CPUs writes /proc/cpuinfo and one NUMA node per socket, numbering logical
// CPUs as Linux does on x86: all first threads of every socket, then all
// second threads (cpu = thread*sockets*cores + socket*cores + core).
func (t *Tree) CPUs(sockets, cores, threads int) {
	var info strings.Builder
	nodes := make([][]string, sockets)
	for th := range threads {
		for s := range sockets {
			lo := th*sockets*cores + s*cores
			nodes[s] = append(nodes[s], fmt.Sprintf("%d-%d", lo, lo+cores-1))
		}
	}
	for cpu := range sockets * cores * threads {
		s := cpu / cores % sockets
		c := cpu % cores
		fmt.Fprintf(&info, "processor\t: %d\nvendor_id\t: GenuineIntel\nphysical id\t: %d\nsiblings\t: %d\ncore id\t\t: %d\ncpu cores\t: %d\n\n",
			cpu, s, cores*threads, c, cores)
	}
	t.WriteFile("proc/cpuinfo", info.String())
	for s, r := range nodes {
		t.WriteFile(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", s), strings.Join(r, ",")+"\n")
	}
}
