package sysreport

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

func readFirstLine(root, rel string) string {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// KernelAtLeast reports whether a kernel release ("6.1.0-18-amd64",
// "5.15.0-1051-aws") is at least major.minor; ok is false when release
// cannot be parsed.
func KernelAtLeast(release string, major, minor int) (atLeast, ok bool) {
	m := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(release)
	if m == nil {
		return false, false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a > major || (a == major && b >= minor), true
}

// modules returns the names of the loaded kernel modules.
func modules(procRoot string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(procRoot, "modules"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, _, ok := strings.Cut(sc.Text(), " "); ok {
			out[name] = true
		}
	}
	return out, sc.Err()
}

// nvidiaDriver reads the kernel module's version line: its version and
// whether it is the open kernel module (the one dma-buf export needs).
func nvidiaDriver(procRoot string) (version string, open, present bool) {
	line := readFirstLine(procRoot, "driver/nvidia/version")
	if line == "" {
		return "", false, false
	}
	version = regexp.MustCompile(`\b\d{3}\.\d+(\.\d+)?\b`).FindString(line)
	return version, strings.Contains(line, "Open Kernel Module"), true
}

// capEff reports whether CAP_SYS_PTRACE is in this process's effective set.
func capSysPtrace(procRoot string) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && bits&(1<<unix.CAP_SYS_PTRACE) != 0
		}
	}
	return false
}

// probeCMA reads a few bytes of this process through process_vm_readv,
// which is what shm does to a peer's memory. ENOSYS means a kernel built
// without CROSS_MEMORY_ATTACH; EPERM, a seccomp or LSM rule.
func probeCMA() error {
	src := []byte("ferry-cma-probe!")
	dst := make([]byte, len(src))
	local := []unix.Iovec{{Base: &dst[0], Len: uint64(len(dst))}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: len(src)}}
	n, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	if err != nil {
		return fmt.Errorf("process_vm_readv: %w", err)
	}
	if n != len(src) || string(dst) != string(src) {
		return fmt.Errorf("process_vm_readv read %d bytes %q", n, dst[:n])
	}
	return nil
}

func (r *Report) collectCapabilities(opts Options, gpus []GPU) {
	add := func(name string, s Status, format string, args ...any) {
		r.Capabilities = append(r.Capabilities, Capability{Name: name, Status: s, Detail: fmt.Sprintf(format, args...)})
	}
	// RDMA write.
	var efaNo, efaYes, efaUnknown, otherVerbs []string
	for _, d := range r.Verbs {
		switch {
		case !d.IsEFA():
			otherVerbs = append(otherVerbs, d.Name)
		case d.RDMAWrite == Yes:
			efaYes = append(efaYes, d.Name)
		case d.RDMAWrite == No:
			efaNo = append(efaNo, d.Name)
		default:
			efaUnknown = append(efaUnknown, d.Name)
		}
	}
	switch {
	case len(efaNo) > 0:
		add("rdma-write", No, "EFA device(s) without RDMA write: %s", strings.Join(efaNo, ", "))
	case len(efaUnknown) > 0:
		add("rdma-write", Unknown, "EFA device(s) %s: the provider did not report RDMA write support", strings.Join(efaUnknown, ", "))
	case len(efaYes)+len(otherVerbs) > 0:
		add("rdma-write", Yes, "%d RDMA device(s)", len(efaYes)+len(otherVerbs))
	case len(r.Libfabric.Loopback) > 0:
		add("rdma-write", NotApplicable, "no RDMA NIC; %s carry RDMA writes in software over loopback", strings.Join(r.Libfabric.Loopback, ", "))
	default:
		add("rdma-write", NotApplicable, "no RDMA NIC and no loopback transport linked")
	}

	// dma-buf: kernel >= 5.12 (RDMA dma-buf import) and a GPU driver that
	// exports it.
	kernelOK, parsed := KernelAtLeast(r.Kernel, 5, 12)
	kernel := fmt.Sprintf("kernel %s", r.Kernel)
	switch {
	case !parsed:
		kernel = "kernel version unknown"
	case kernelOK:
		kernel += " >= 5.12"
	default:
		kernel += " < 5.12 (no RDMA dma-buf import)"
	}
	ver, open, present := nvidiaDriver(opts.ProcRoot)
	driver := "no NVIDIA driver loaded"
	if present {
		kind := "proprietary"
		if open {
			kind = "open"
		}
		driver = fmt.Sprintf("NVIDIA driver %s (%s kernel module)", ver, kind)
	}
	var gpuDmaBuf []string
	for i, g := range gpus {
		if !g.DmaBuf {
			gpuDmaBuf = append(gpuDmaBuf, fmt.Sprintf("cuda:%d", i))
		}
	}
	switch {
	case len(gpus) == 0 && !present:
		add("dma-buf", NotApplicable, "%s; %s", kernel, driver)
	case !kernelOK:
		add("dma-buf", No, "%s; %s", kernel, driver)
	case len(gpus) > 0 && len(gpuDmaBuf) == 0:
		add("dma-buf", Yes, "%s; %s; every GPU reports dma-buf support", kernel, driver)
	case len(gpus) > 0:
		add("dma-buf", No, "%s; %s; no dma-buf support reported by %s", kernel, driver, strings.Join(gpuDmaBuf, ", "))
	case r.GPUError != "":
		add("dma-buf", Unknown, "%s; %s; the CUDA driver could not be asked: %s", kernel, driver, r.GPUError)
	default:
		add("dma-buf", Unknown, "%s; %s; CUDA not linked, so the device attribute was not read", kernel, driver)
	}

	// A module is loaded when /sys/module/<name> exists (built-in ones
	// too) or /proc/modules lists it; kernels without module support have
	// no /proc/modules at all.
	mods, _ := modules(opts.ProcRoot)
	loaded := func(name string) bool {
		_, err := os.Stat(filepath.Join(opts.SysRoot, "module", name))
		return err == nil || mods[name]
	}
	gdrdev := filepath.Join(opts.DevRoot, "gdrdrv")
	_, devErr := os.Stat(gdrdev)
	switch {
	case devErr == nil:
		add("gdrcopy", Yes, "%s present", gdrdev)
	case loaded("gdrdrv"):
		add("gdrcopy", Unknown, "module gdrdrv loaded but %s missing", gdrdev)
	default:
		add("gdrcopy", No, "gdrdrv not loaded; GPU-visible flags fall back to host-mapped memory")
	}
	switch {
	case loaded("nvidia_peermem"):
		add("peer-memory", Yes, "nvidia_peermem loaded")
	case loaded("nv_peer_mem"):
		add("peer-memory", Yes, "nv_peer_mem loaded")
	default:
		add("peer-memory", No, "nvidia_peermem not loaded; GPU memory needs dma-buf to be registered")
	}

	// CMA for shm: process_vm_readv must work, and Yama's ptrace scope
	// must let sibling processes attach.
	r.CapSysPtrace = capSysPtrace(opts.ProcRoot)
	scope := readFirstLine(opts.ProcRoot, "sys/kernel/yama/ptrace_scope")
	if n, err := strconv.Atoi(scope); err == nil {
		r.PtraceScope = n
	}
	probe := opts.ProbeCMA
	if probe == nil {
		probe = probeCMA
	}
	capNote := "without CAP_SYS_PTRACE"
	if r.CapSysPtrace {
		capNote = "with CAP_SYS_PTRACE"
	}
	switch err := probe(); {
	case err != nil:
		add("cma", No, "%v", err)
	case r.PtraceScope < 0:
		add("cma", Yes, "process_vm_readv works; no Yama ptrace restriction")
	case r.PtraceScope == 0:
		add("cma", Yes, "process_vm_readv works; ptrace_scope 0")
	case r.PtraceScope <= 2 && r.CapSysPtrace:
		add("cma", Yes, "ptrace_scope %d, running %s", r.PtraceScope, capNote)
	case r.PtraceScope == 3:
		add("cma", No, "ptrace_scope 3 forbids every attach")
	default:
		add("cma", No, "ptrace_scope %d %s: shm peers cannot read each other (set kernel.yama.ptrace_scope=0 or grant CAP_SYS_PTRACE)", r.PtraceScope, capNote)
	}

	// ferry's own shared-memory transport needs sealed memfds (and
	// abstract unix sockets, which every Linux has), not CMA.
	if opts.ProbeIPC != nil {
		if err := opts.ProbeIPC(); err != nil {
			add("ipc", No, "%v", err)
		} else {
			add("ipc", Yes, "sealed memfds work: --transport ipc joins processes of this host (same user, same network namespace)")
		}
	}
}

func (r *Report) collectWarnings(gpus []GPU) {
	if c := r.Capability("dma-buf"); (len(gpus) > 0 || (r.Topology != nil && r.Topology.GPUCount() > 0)) && c.Status != Yes {
		r.warn("no-dmabuf", "GPU memory cannot be registered through dma-buf (%s)", c.Detail)
	}
	if c := r.Capability("cma"); c.Status == No {
		r.warn("cma-off", "shm across processes has no cross-memory attach and drops to a fraction of its speed: %s", c.Detail)
	}
	for _, d := range r.Verbs {
		if d.IsEFA() && d.RDMAWrite == No {
			r.warn("efa-no-rdma-write", "EFA device %s does not support RDMA write: one-sided transfers cannot run on it", d.Name)
		}
		for _, p := range d.Ports {
			if !strings.EqualFold(p.State, "ACTIVE") {
				r.warn("port-down", "%s port %d is %s", d.Name, p.Number, p.State)
			}
		}
	}
	if t := r.Topology; t != nil {
		nics := map[string]bool{}
		var bare []string
		for _, g := range t.Groups {
			if g.IsHost() {
				continue
			}
			if len(g.NICs) == 0 {
				bare = append(bare, g.DeviceName())
			}
			for _, n := range g.NICs {
				nics[n.Name+"@"+n.PCIAddress] = true
			}
		}
		if gpus := t.GPUCount(); gpus > 0 && len(nics) < gpus {
			r.warn("fewer-nics-than-gpus", "%d GPU(s) share %d NIC(s)", gpus, len(nics))
		}
		if len(bare) > 0 {
			r.warn("gpu-without-nic", "no NIC near %s", strings.Join(bare, ", "))
		}
		for _, d := range t.Dropped {
			r.warn("nic-unused", "%s (%s) not used: %s", d.NIC.Name, d.NIC.PCIAddress, d.Reason)
		}
	}
	if r.TopologyError != "" {
		r.warn("topology", "topology detection failed: %s", r.TopologyError)
	}
	if r.Auto.Refused {
		r.warn("auto-refuses", "transport \"auto\" refuses on this machine; %s", r.Auto.Hint)
	}
}
