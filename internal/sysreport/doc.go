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
package sysreport
