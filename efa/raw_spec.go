package efa

import (
	"math"
	"slices"
	"time"
)

// RawSpec describes a raw benchmark run: libfabric writes posted straight
// from a C loop, with no engine in between, giving the provider's ceiling
// on this machine.
type RawSpec struct {
	// Transport is the libfabric provider name ("tcp;ofi_rxm", "shm", "efa").
	Transport string
	// Node pins the provider's address ("127.0.0.1" for tcp on loopback).
	Node string
	// Size is the bytes of each write. 0 runs immediate-only writes and
	// needs Imm.
	Size uint64
	// Pages is 0 for one write of Size per iteration, else the number of
	// Size-byte writes per iteration, each to a distinct page of the target
	// chosen by a fixed random permutation.
	Pages int
	// Offsets, when set, places the writes as an engine benchmark case
	// does: write i reads Size bytes at Offsets[i] of the source and
	// lands at the same offset of the target, in buffers of Span bytes
	// each (len(Offsets) must be Pages, or 1 for a single write). A
	// ceiling then measures the same memory footprint as the case it
	// bounds: without Offsets the sources are consecutive and the targets
	// a permutation of Pages*Size bytes, which stay in cache where a case
	// spread over a 256 MiB buffer misses on every page.
	Offsets []uint64
	// Span is the bytes of each side's buffer with Offsets.
	Span uint64
	// Iters timed iterations follow Warmup untimed ones.
	Iters, Warmup int
	// Imm sends an immediate with every write and waits for all of them at
	// the target, as the engine's receivers do.
	Imm bool
	// Timeout bounds each iteration; 0 means 60 s.
	Timeout time.Duration
}

// RawResult is what RawBench measured.
type RawResult struct {
	Provider string          // libfabric's name for the provider used
	Latency  []time.Duration // one per timed iteration: post to last completion
	Bytes    uint64          // payload bytes per iteration
	Ops      int             // writes per iteration
}

// Median is the 50th percentile of Latency.
func (r RawResult) Median() time.Duration {
	if len(r.Latency) == 0 {
		return 0
	}
	s := slices.Clone(r.Latency)
	slices.Sort(s)
	return s[len(s)/2]
}

// Mean is the mean of Latency.
func (r RawResult) Mean() time.Duration {
	if len(r.Latency) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range r.Latency {
		sum += l
	}
	return sum / time.Duration(len(r.Latency))
}

// Stddev is the sample standard deviation of Latency.
func (r RawResult) Stddev() time.Duration {
	if len(r.Latency) < 2 {
		return 0
	}
	m := float64(r.Mean())
	var ss float64
	for _, l := range r.Latency {
		d := float64(l) - m
		ss += d * d
	}
	return time.Duration(math.Sqrt(ss / float64(len(r.Latency)-1)))
}

// GBps is payload throughput in gigabytes (1e9 bytes) per second at the
// mean latency.
func (r RawResult) GBps() float64 {
	m := r.Mean()
	if m <= 0 {
		return 0
	}
	return float64(r.Bytes) / m.Seconds() / 1e9
}

// OpsPerSec is the write rate at the mean latency.
func (r RawResult) OpsPerSec() float64 {
	m := r.Mean()
	if m <= 0 {
		return 0
	}
	return float64(r.Ops) / m.Seconds()
}
