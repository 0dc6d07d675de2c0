// Package topotest builds fake sysfs and procfs trees of multi-GPU,
// multi-NIC hosts, so that topology detection (and anything built on it)
// can be tested on a machine that has neither.
//
// A Tree writes the files topology.Detect reads: PCI functions with their
// vendor, device, class and numa_node under <root>/sys/devices, the
// /sys/bus/pci/devices links, RDMA devices under /sys/class/infiniband,
// NUMA node cpulists and /proc/cpuinfo. The presets reproduce real machines
// (AWS p5.48xlarge and p5en.48xlarge, a DGX H100, a two-socket SMT box, and
// a host with no GPU and no NIC).
package topotest
