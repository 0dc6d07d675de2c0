// Package shm is ferry's one place for memory shared between processes of
// a host: memory files (memfd_create) sealed against resizing, their
// mappings, and the passing of file descriptors over unix sockets
// (SCM_RIGHTS) with a context bounding every wait.
//
// Sealing matters because a file handed to another process can be
// truncated by it: every mapping of the lost pages would then fault with
// SIGBUS. Files made here are sealed against shrinking and growing, and
// CheckSealed lets a receiver refuse a peer's file that is not.
//
// The engine's host memory (fabric.AllocHost), the ipc provider, cuda's
// descriptor passing and the a2a backends' node sharing all go through
// this package; an architecture test keeps it the only caller of
// memfd_create and the only sender of descriptors.
package shm
