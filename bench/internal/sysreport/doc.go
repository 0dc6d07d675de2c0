// Package sysreport collects what `fabric-debug info` prints: the libfabric
// version and usable transports, the verbs devices, the GPU groups with
// their NICs and cores, the capabilities that decide which data paths work
// (RDMA write, dma-buf, GDRCopy, peer memory, cross-memory attach for shm),
// what transport "auto" would choose and why, and a warning for each known
// trap.
//
// Collect takes everything that belongs to another package (libfabric,
// verbs, CUDA, the fabric registry) through Options funcs, so this package
// links no C library and the report can be tested against fake sysfs and
// procfs trees; what it reads itself comes from injectable roots. Whatever
// cannot be known is reported as unknown, never guessed: an input that is
// not wired (a nil func) shows as "not linked", an input that fails shows
// its error.
//
// A Report is plain data with JSON tags (`fabric-debug info --json`), and
// WriteText prints it on one screen.
//
// # Wiring
//
// A program that links the providers fills Options with small adapters;
// this package cannot import them (cuda and verbs sit above it):
//
//	opts := sysreport.Options{
//		LibfabricVersion: efa.Version,
//		Transports:       efa.Transports,
//		VerbsDevices: func() ([]sysreport.VerbsDevice, error) {
//			ds, err := verbs.Devices() // ErrNotSupported without RDMA
//			// map Name, PCIAddress, VendorID and each port's Number,
//			// State, LinkLayer, LinkSpeed and GIDs[i].Addr.String();
//			// set RDMAWrite for EFA devices when the provider knows it.
//		},
//		GPUs: func() ([]sysreport.GPU, error) {
//			ds, err := cuda.Devices() // ErrNotSupported without a driver
//			// per device: info, err := d.Info(); GPU{PCIAddress:
//			// info.PCIBusID, Name: info.Name, DmaBuf: info.DmaBuf}
//		},
//	}
//	r, err := sysreport.Collect(opts)
//	if jsonFlag { json.NewEncoder(os.Stdout).Encode(r) } else { r.WriteText(os.Stdout) }
//
// Choose defaults to fabric.ChooseTransport, which sees exactly the
// providers the program imports.
package sysreport
