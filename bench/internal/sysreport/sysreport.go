package sysreport

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/topology"
)

// Status is a tri-state answer, plus "n/a" where the question does not
// arise on this machine.
type Status string

// Statuses.
const (
	Yes           Status = "yes"
	No            Status = "no"
	Unknown       Status = "unknown"
	NotApplicable Status = "n/a"
)

// VerbsPort is one port of a verbs device.
type VerbsPort struct {
	Number    int      `json:"number"`
	State     string   `json:"state"` // "ACTIVE", "DOWN", ...
	LinkSpeed uint64   `json:"link_speed_bps"`
	LinkLayer string   `json:"link_layer,omitempty"`
	GIDs      []string `json:"gids,omitempty"`
}

// VerbsDevice is one verbs device (an EFA device appears here too).
type VerbsDevice struct {
	Name       string      `json:"name"`
	PCIAddress string      `json:"pci_address,omitempty"`
	VendorID   uint32      `json:"vendor_id,omitempty"`
	Ports      []VerbsPort `json:"ports"`
	// RDMAWrite says whether the device does one-sided RDMA write; EFA
	// devices of the first generations do not. Empty means Unknown.
	RDMAWrite Status `json:"rdma_write,omitempty"`
}

// IsEFA reports whether the device is an AWS EFA device.
func (d VerbsDevice) IsEFA() bool { return d.VendorID == topology.VendorAmazon }

// GPU is one visible GPU as the CUDA driver describes it.
type GPU struct {
	PCIAddress string `json:"pci_address"`
	Name       string `json:"name"`
	// DmaBuf is the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED.
	DmaBuf bool `json:"dma_buf"`
}

// Options are the report's inputs. Every field is optional: the zero value
// reads the real /sys, /proc and /dev and reports the rest as not linked.
type Options struct {
	SysRoot, ProcRoot, DevRoot string

	// LibfabricVersion, LibfabricAPI and Transports are efa.Version,
	// efa.APIVersion and efa.Transports.
	LibfabricVersion func() string
	LibfabricAPI     func() string
	Transports       func() ([]string, error)
	// VerbsDevices lists the verbs devices (from verbs.Devices).
	VerbsDevices func() ([]VerbsDevice, error)
	// GPUs lists the visible GPUs in CUDA ordinal order (from cuda).
	GPUs func() ([]GPU, error)
	// NICs overrides NIC discovery for the topology (see topology.Spec).
	NICs func() ([]topology.NIC, error)
	// Choose resolves a transport name; nil means fabric.ChooseTransport
	// with default options, which sees the providers the program imports.
	Choose func(transport string) (fabric.Choice, error)
	// LookupEnv reads CUDA_VISIBLE_DEVICES; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ProbeCMA tries cross-memory attach (process_vm_readv) on this
	// process; nil means the real probe, which is right only with the real
	// roots. It returns nil when CMA works.
	ProbeCMA func() error
	// ProbeIPC is ipc.Probe when the program links ferry's shared-memory
	// transport; nil leaves the "ipc" capability out.
	ProbeIPC func() error
}

// Libfabric is what the linked libfabric offers.
type Libfabric struct {
	Linked  bool   `json:"linked"`
	Version string `json:"version,omitempty"`
	// API is the libfabric API version ferry asks for (FI_VERSION).
	API        string   `json:"api,omitempty"`
	Transports []string `json:"transports,omitempty"`
	// Loopback are the transports that run on any machine over loopback
	// (tcp;ofi_rxm, tcp, shm) among Transports.
	Loopback []string `json:"loopback,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// Capability is one feature and whether this machine has it.
type Capability struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Auto is what transport "auto" chooses here, or why it refuses.
type Auto struct {
	Transport string `json:"transport,omitempty"`
	Domains   int    `json:"domains,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Refused   bool   `json:"refused"`
	Error     string `json:"error,omitempty"`
	// Hint says how to pick a transport explicitly when auto refuses.
	Hint string `json:"hint,omitempty"`
}

// Warning is a known trap this machine falls into.
type Warning struct {
	Code    string `json:"code"` // stable: "no-dmabuf", "cma-off", ...
	Message string `json:"message"`
}

// Report is everything fabric-debug info shows. It is plain data: safe to
// read from several goroutines, and to marshal as JSON.
type Report struct {
	Hostname      string             `json:"hostname"`
	Kernel        string             `json:"kernel"`
	Platform      string             `json:"platform"`
	Libfabric     Libfabric          `json:"libfabric"`
	Verbs         []VerbsDevice      `json:"verbs_devices"`
	VerbsError    string             `json:"verbs_error,omitempty"`
	GPUError      string             `json:"gpu_error,omitempty"`
	Topology      *topology.Topology `json:"topology,omitempty"`
	TopologyError string             `json:"topology_error,omitempty"`
	PtraceScope   int                `json:"ptrace_scope"` // -1 when Yama is absent
	CapSysPtrace  bool               `json:"cap_sys_ptrace"`
	Capabilities  []Capability       `json:"capabilities"`
	Auto          Auto               `json:"auto"`
	Warnings      []Warning          `json:"warnings"`
}

// Capability returns the named capability, or one with status Unknown.
func (r *Report) Capability(name string) Capability {
	for _, c := range r.Capabilities {
		if c.Name == name {
			return c
		}
	}
	return Capability{Name: name, Status: Unknown}
}

// HasWarning reports whether the report carries a warning with code.
func (r *Report) HasWarning(code string) bool {
	return slices.ContainsFunc(r.Warnings, func(w Warning) bool { return w.Code == code })
}

func (r *Report) warn(code, format string, args ...any) {
	r.Warnings = append(r.Warnings, Warning{Code: code, Message: fmt.Sprintf(format, args...)})
}

// loopbackTransports run everywhere, over loopback TCP or shared memory.
var loopbackTransports = []string{"tcp;ofi_rxm", "tcp", "shm"}

// Collect gathers the report. It may be called concurrently; it calls the
// Options funcs once each. Inputs that fail are reported in the Report
// (as errors, unknowns and warnings); Collect itself fails only when a root
// it was given explicitly cannot be read at all.
func Collect(opts Options) (*Report, error) {
	if opts.SysRoot == "" {
		opts.SysRoot = "/sys"
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.DevRoot == "" {
		opts.DevRoot = "/dev"
	}
	if _, err := os.Stat(opts.ProcRoot); err != nil {
		return nil, fmt.Errorf("sysreport: proc root: %w", err)
	}
	r := &Report{Platform: runtime.GOOS + "/" + runtime.GOARCH, PtraceScope: -1, Verbs: []VerbsDevice{}, Warnings: []Warning{}}
	r.Hostname, _ = os.Hostname()
	r.Kernel = readFirstLine(opts.ProcRoot, "sys/kernel/osrelease")

	r.collectLibfabric(opts)
	if opts.VerbsDevices == nil {
		r.VerbsError = "verbs provider not linked"
	} else if ds, err := opts.VerbsDevices(); err != nil {
		r.VerbsError = err.Error()
	} else if ds != nil {
		r.Verbs = ds
	}
	var gpus []GPU
	if opts.GPUs != nil {
		var err error
		if gpus, err = opts.GPUs(); err != nil {
			r.GPUError = err.Error()
			gpus = nil
		}
	}
	r.collectTopology(opts, gpus)
	r.collectCapabilities(opts, gpus)
	r.collectAuto(opts)
	r.collectWarnings(gpus)
	return r, nil
}

func (r *Report) collectLibfabric(opts Options) {
	lf := &r.Libfabric
	if opts.Transports == nil {
		lf.Error = "libfabric provider (package efa) not linked"
		return
	}
	lf.Linked = true
	if opts.LibfabricVersion != nil {
		lf.Version = opts.LibfabricVersion()
	}
	if opts.LibfabricAPI != nil {
		lf.API = opts.LibfabricAPI()
	}
	ts, err := opts.Transports()
	if err != nil {
		lf.Error = err.Error()
		return
	}
	lf.Transports = ts
	for _, t := range loopbackTransports {
		if slices.Contains(ts, t) {
			lf.Loopback = append(lf.Loopback, t)
		}
	}
}

func (r *Report) collectTopology(opts Options, gpus []GPU) {
	spec := topology.Spec{SysRoot: opts.SysRoot, ProcRoot: opts.ProcRoot, NICs: opts.NICs, LookupEnv: opts.LookupEnv}
	if opts.GPUs != nil && r.GPUError == "" {
		spec.GPUs = func() ([]topology.GPU, error) {
			out := make([]topology.GPU, len(gpus))
			for i, g := range gpus {
				out[i] = topology.GPU{PCIAddress: g.PCIAddress, Name: g.Name}
			}
			return out, nil
		}
	}
	if r.Libfabric.Linked {
		// Only what the linked libfabric can really open.
		spec.Loopback = []string{}
		for _, t := range []string{"tcp;ofi_rxm", "shm"} {
			if slices.Contains(r.Libfabric.Loopback, t) {
				spec.Loopback = append(spec.Loopback, t)
			}
		}
	}
	t, err := topology.Detect(spec)
	if err != nil {
		r.TopologyError = err.Error()
		return
	}
	r.Topology = t
}

func (r *Report) collectAuto(opts Options) {
	choose := opts.Choose
	if choose == nil {
		choose = func(t string) (fabric.Choice, error) { return fabric.ChooseTransport(t, fabric.DomainOptions{}) }
	}
	c, err := choose(fabric.TransportAuto)
	if err == nil {
		r.Auto = Auto{Transport: c.Transport, Domains: len(c.Domains), Reason: c.Reason}
		return
	}
	r.Auto = Auto{Refused: true, Error: err.Error()}
	var picks []string
	for _, t := range r.Libfabric.Loopback {
		if t != "tcp" {
			picks = append(picks, fmt.Sprintf("--transport %q", t))
		}
	}
	if len(picks) == 0 {
		r.Auto.Hint = "no loopback transport is usable either: link the efa package with libfabric (tcp;ofi_rxm, shm)"
		return
	}
	r.Auto.Hint = "auto never falls back to TCP; choose explicitly: " + joinOr(picks) +
		" (tcp;ofi_rxm between any hosts, shm between processes of one host)"
}

func joinOr(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " or " + s[len(s)-1]
}
