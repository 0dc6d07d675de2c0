// Package topology finds which NICs and CPU cores are closest to each GPU,
// from sysfs and procfs alone.
//
// # Algorithm
//
// Every PCI device under /sys/bus/pci/devices is placed in the PCIe tree by
// following its sysfs link. From a device the walk goes up while the bridge
// above has a single child slot (functions of one multi-function device count
// once); the first bridge with several children is the device's branching
// ancestor, the switch or root complex where a GPU and its NICs meet. GPUs
// and NICs that share a branching ancestor form a group, and each GPU of the
// group gets an equal, contiguous slice of the group's NICs.
//
// NICs are the RDMA devices under /sys/class/infiniband (or a list a provider
// injects through [Spec].NICs). When any is an EFA device only EFA devices are
// kept; then only the most common PCI vendor:device id is kept, so that a
// management or storage NIC of another model is not mixed in with the compute
// NICs. The others are listed in [Topology].Dropped with the reason.
//
// CPUs are physical cores: SMT siblings are removed using the physical and
// core ids in /proc/cpuinfo. The cores of each NUMA node are split into equal
// contiguous slices, one per GPU on that node, in CUDA ordinal order. A
// worker is pinned to the first core of its slice.
//
// Differences from the design this follows, on purpose: GPUs are matched by
// PCI address, not by assuming every GPU has device 0's id; a device whose
// numa_node is -1 is kept (PCIe placement does not depend on it) and its node
// is taken from its nearest ancestor, or from the only node of a one-node
// machine; a GPU whose switch has no NIC gets NICs of its own NUMA node
// instead of disappearing; GPUs outnumbering the NICs of their switch share
// them instead of getting none.
//
// # GPU identity
//
// [Spec].GPUs returns the visible GPUs in CUDA ordinal order, typically from
// the CUDA driver, which has already applied CUDA_VISIBLE_DEVICES. Without it
// GPUs are found in sysfs by vendor (NVIDIA, 0x10de) and class (3D or VGA
// controller), ordered by PCI address as CUDA_DEVICE_ORDER=PCI_BUS_ID does,
// and CUDA_VISIBLE_DEVICES (indices only) is applied here.
//
// # Host-only machines
//
// With no GPU, Detect returns one host group ([Host] as its device) holding
// every selected NIC, or, when there is none, one loopback entry per
// transport in [Spec].Loopback (tcp;ofi_rxm and shm by default), which the
// efa provider can open on any machine.
//
// # Building an engine from it
//
// The engine's builder asks for "GPU i with its nearest N NICs, worker
// pinned to its first core":
//
//	topo, err := topology.Detect(topology.Spec{GPUs: gpusFromCUDA, NICs: nicsFromProvider})
//	p, err := topo.Place(i, n) // ErrNoDevice, ErrTooFewNICs, ErrTooFewCPUs
//	// p.NICs[k].Name and .PCIAddress name the provider domains to open;
//	// p.WorkerCPU is where the worker's thread is pinned before it opens
//	// them; p.CPUs[1:] are the group's other cores (a helper thread's).
//
// This package does not import fabric, so fabric may import it.
//
// # Concurrency
//
// Detect reads files only; it is safe to call from several goroutines, and
// its result is plain data that callers may cache and share read-only.
package topology
