// Package kernelgate is the catalog of every compilation of device code
// ferry performs: All gathers the KernelBuilds of each package that has
// kernels. The compile gate (this package's tests, TestKernelGate)
// compiles each build with every NVRTC generation it finds (the system's,
// NVRTC 11.8 on Debian 12, for sm_80 and sm_90; NVRTC 12.4 unpacked into
// .deps by scripts/deps-cudatools.sh, for sm_80, sm_90 and sm_90a), each
// in a child process, and fails on a compile error, a spill, a kernel
// without __launch_bounds__ or with more registers than they allow, a
// launch larger than they allow, and a kernel nobody registered.
//
// It then disassembles every cubin with the nvdisasm of the same
// generation and runs CheckMemoryModel over every function: with the
// line table (-lineinfo, which leaves the SASS unchanged) each
// instruction of an ordering primitive of ferry_device.h is tied to the
// source line that calls it, and the SASS must hold what that line names
// (a system-scope acquire: a strong system load then CCTL.IVALL; a
// release: MEMBAR at the scope then a strong store; fences, acq_rel
// atomics), with non-coherent loads only where NCAllowed lists them. The
// tests weaken the header's primitives and require each mutation to be
// refused. What this proves: the compiler emitted, for every wait and
// publication the sources write, the instructions their memory order
// needs. What it cannot: that a wait that should be system-scope is
// written with the right primitive, that the protocol is right, or how
// a GPU and a NIC behave; only a GPU run shows those.
//
// A package that adds kernels (or specialisations of them) lists them in
// its own KernelBuilds function and adds that function to All, here:
// that one line is what puts the code under the gate.
package kernelgate
