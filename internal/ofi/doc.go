// Package ofi is ferry's binding to libfabric: thin wrappers over the calls
// the efa provider makes, plus a small C shim (shim.h; shim.c for setup,
// datapath.c for the per-operation loops, raw.c for the benchmark loop), so
// Go crosses into C once per batch of posts or completions rather than once
// per operation.
//
// It is one of the few packages allowed to import "C". It adds no policy:
// which hints to ask for, how to name endpoints, what an error means to the
// engine, all of that lives in package efa. Handles returned here are plain
// C pointers wrapped in small Go structs; none of them is safe for
// concurrent use, matching libfabric's FI_THREAD_DOMAIN model in which one
// thread owns a domain.
//
// Memory passed to the post functions (the op arrays) is read during the
// call only; C never keeps a Go pointer. Op contexts are integers.
//
// Built with CGO_ENABLED=0 the package is empty and efa reports
// ErrNotSupported.
package ofi
