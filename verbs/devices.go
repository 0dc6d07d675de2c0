package verbs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// DeviceInfo describes one verbs device (an HCA, a RoCE NIC, rxe).
type DeviceInfo struct {
	Name         string
	PCIAddress   string // "0000:17:00.0"; empty for software devices such as rxe
	NUMANode     int    // -1 when unknown
	Firmware     string
	VendorID     uint32
	VendorPartID uint32
	MaxQPWR      int
	MaxCQE       int
	Ports        []PortInfo
}

// PortInfo describes one port of a device.
type PortInfo struct {
	Number    int
	State     string // "ACTIVE", "DOWN", ...
	LinkLayer string // "Ethernet" (RoCE) or "InfiniBand"
	ActiveMTU int    // bytes
	LID       uint16
	LinkSpeed uint64 // bits per second, 0 when unknown
	Rate      string // the kernel's text, e.g. "100 Gb/sec (4X EDR)"
	GIDs      []GID
}

// GID is one populated entry of a port's GID table.
type GID struct {
	Index int
	Addr  net.IP
	Type  string // "IB", "RoCEv1", "RoCEv2"
}

// Active reports whether the port can carry traffic.
func (p PortInfo) Active() bool { return p.State == ibv.PortActive.String() }

// Devices lists the verbs devices of this machine with their ports. Where
// there are none (no RDMA subsystem: libibverbs fails with ENOSYS; or no
// device) it returns an error wrapping rdma.ErrNotSupported.
func Devices() ([]DeviceInfo, error) {
	names, err := deviceNames()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, len(names))
	for _, n := range names {
		d, err := describeDevice(n)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func deviceNames() ([]ibv.DeviceName, error) {
	names, err := ibv.DeviceNames()
	switch {
	case errors.Is(err, ibv.ErrNoCgo):
		return nil, fmt.Errorf("verbs devices: %w: %w", rdma.ErrNotSupported, err)
	case errors.Is(err, syscall.ENOSYS):
		return nil, fmt.Errorf("verbs devices: no RDMA subsystem: %w: %w", rdma.ErrNotSupported, err)
	case err != nil:
		return nil, fmt.Errorf("verbs devices: %w", err)
	case len(names) == 0:
		return nil, fmt.Errorf("verbs devices: none found: %w", rdma.ErrNotSupported)
	}
	return names, nil
}

func describeDevice(n ibv.DeviceName) (DeviceInfo, error) {
	d := DeviceInfo{Name: n.Name, NUMANode: -1}
	d.PCIAddress, d.NUMANode = pciOf(n.IBDevPath)
	c, err := ibv.OpenDevice(n.Name)
	if err != nil {
		return d, fmt.Errorf("verbs device %s: %w", n.Name, err)
	}
	defer c.Close()
	attr, err := c.QueryDevice()
	if err != nil {
		return d, fmt.Errorf("verbs device %s: %w", n.Name, err)
	}
	d.Firmware, d.VendorID, d.VendorPartID = attr.FWVersion, attr.VendorID, attr.VendorPartID
	d.MaxQPWR, d.MaxCQE = attr.MaxQPWR, attr.MaxCQE
	for port := 1; port <= attr.PhysPorts; port++ {
		pa, err := c.QueryPort(port)
		if err != nil {
			return d, fmt.Errorf("verbs device %s port %d: %w", n.Name, port, err)
		}
		p := PortInfo{Number: port, State: pa.State.String(), LinkLayer: pa.LinkLayer.String(),
			ActiveMTU: pa.ActiveMTU.Bytes(), LID: pa.LID}
		p.Rate = readTrim(filepath.Join(n.IBDevPath, "ports", strconv.Itoa(port), "rate"))
		p.LinkSpeed = parseRate(p.Rate)
		if p.LinkSpeed == 0 {
			p.LinkSpeed = linkSpeed(pa.ActiveWidth, pa.ActiveSpeed)
		}
		for _, g := range c.GIDs(port, pa.GIDTableLen) {
			p.GIDs = append(p.GIDs, GID{Index: g.Index, Addr: net.IP(append([]byte(nil), g.GID[:]...)), Type: g.Type.String()})
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

var pciRE = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// pciOf returns the PCI address (the basename of <ibdev>/device, when that
// is a PCI function) and its NUMA node.
func pciOf(ibdevPath string) (string, int) {
	if ibdevPath == "" {
		return "", -1
	}
	target, err := filepath.EvalSymlinks(filepath.Join(ibdevPath, "device"))
	if err != nil {
		return "", -1
	}
	pci := filepath.Base(target)
	if !pciRE.MatchString(pci) {
		return "", -1
	}
	numa, err := strconv.Atoi(readTrim(filepath.Join(target, "numa_node")))
	if err != nil {
		numa = -1
	}
	return pci, numa
}

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?) Gb/sec`)

// parseRate reads the kernel's port rate text ("400 Gb/sec (4X NDR)",
// "2.5 Gb/sec (1X SDR)") as bits per second; 0 when it cannot.
func parseRate(s string) uint64 {
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	g, err := strconv.ParseFloat(m[1], 64)
	if err != nil || g < 0 {
		return 0
	}
	return uint64(g*1e9 + 0.5)
}

// linkSpeed computes bits per second from IBV_WIDTH_* and IBV_SPEED_* when
// sysfs has no rate. Per-lane rates are the signalling rates the kernel
// prints.
func linkSpeed(width, speed uint8) uint64 {
	lanes := map[uint8]uint64{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[width]
	lane := map[uint8]uint64{1: 2_500, 2: 5_000, 4: 10_000, 8: 10_000, 16: 14_000, 32: 25_000,
		64: 50_000, 128: 100_000}[speed]
	return lanes * lane * 1_000_000
}
