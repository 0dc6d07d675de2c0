// Package devicecode is the catalog of every compilation of device code
// ferry performs: All gathers the KernelBuilds of each package that has
// kernels. The compile gate (this package's tests) compiles each build
// with NVRTC for sm_80 and sm_90 and fails on a compile error, a spill, a
// kernel without __launch_bounds__ or with more registers than they allow,
// a launch larger than they allow, and a kernel nobody registered.
//
// A package that adds kernels (or specialisations of them) lists them in
// its own KernelBuilds function and adds that function to All, here:
// that one line is what puts the code under the gate.
package devicecode
