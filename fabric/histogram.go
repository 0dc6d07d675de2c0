package fabric

import (
	"math/bits"
	"sync/atomic"
)

// Transfer histograms. Each worker counts the transfers it completed, by
// kind, into fixed power-of-two buckets of latency and size, when it
// reports them: from data the worker already holds (the transfer's start
// and the loop's clock), with a few atomic adds on memory only it writes,
// so the per-operation path gains no allocation, no lock and no shared
// cache line. Readers (TransferHistograms, a Prometheus scrape) add the
// workers' buckets up.

const (
	// latBuckets are the finite latency buckets: upper bounds of
	// 2^(k+latShift) ns, from 1.024 µs to about 8.6 s.
	latBuckets = 24
	latShift   = 10
	// sizeBuckets are the finite size buckets: upper bounds of 2^k bytes,
	// from 1 B to 2 GiB.
	sizeBuckets = 32
	// histKinds are the request kinds counted: reqImm to reqSend.
	histKinds = int(reqSend)
)

// histOps name the kinds counted, reqImm to reqSend, as metrics label
// them.
var histOps = [histKinds]string{"imm", "barrier", "single", "paged", "scatter", "send"}

// xferHist is one worker's buckets. The worker is the only writer.
type xferHist struct {
	kinds [histKinds]kindHist
}

type kindHist struct {
	lat     [latBuckets + 1]atomic.Uint64 // the last is +Inf
	size    [sizeBuckets + 1]atomic.Uint64
	latSum  atomic.Uint64 // ns
	sizeSum atomic.Uint64 // bytes
}

// observe counts one transfer of kind that took ns and moved bytes.
func (h *xferHist) observe(kind reqKind, ns int64, bytes uint64) {
	k := int(kind) - 1
	if k < 0 || k >= histKinds {
		return
	}
	kh := &h.kinds[k]
	kh.lat[latBucket(ns)].Add(1)
	kh.size[sizeBucket(bytes)].Add(1)
	if ns > 0 {
		kh.latSum.Add(uint64(ns))
	}
	kh.sizeSum.Add(bytes)
}

// latBucket is the first bucket whose bound is at least ns.
func latBucket(ns int64) int {
	if ns <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(ns-1)>>latShift), latBuckets)
}

// sizeBucket is the first bucket whose bound is at least n bytes.
func sizeBucket(n uint64) int {
	if n <= 1 {
		return 0
	}
	return min(bits.Len64(n-1), sizeBuckets)
}

// payload is the number of bytes a request writes or sends.
func payload(r *request) uint64 {
	switch r.kind {
	case reqSingle:
		return r.length
	case reqPaged:
		return r.length * uint64(len(r.srcPages))
	case reqScatter:
		var n uint64
		for i := range r.targets {
			n += r.targets[i].Length
		}
		return n
	case reqSend:
		return r.bytes
	}
	return 0
}

// TransferHistogram is the latency and size distribution of the
// transfers of one kind the engine completed successfully (failed ones
// are counted in Stats.Failed only). Latency runs from the worker taking
// the request to the worker reporting its end; size is the bytes the
// request writes or sends (0 for immediates and barriers).
type TransferHistogram struct {
	Transport string // the engine's transport
	Op        string // "single", "paged", "scatter", "imm", "barrier", "send"
	Count     uint64
	// LatencySum is in seconds, SizeSum in bytes.
	LatencySum float64
	SizeSum    uint64
	// Latency and Size are cumulative buckets in increasing bounds (in
	// seconds and bytes), as Prometheus has them; Count covers +Inf.
	Latency []HistogramBucket
	Size    []HistogramBucket
}

// HistogramBucket counts the observations up to UpperBound.
type HistogramBucket struct {
	UpperBound float64
	Count      uint64 // cumulative
}

// TransferHistograms adds up the workers' histograms, one per kind of
// transfer. Safe to call at any time; it allocates, the workers do not.
func (e *Engine) TransferHistograms() []TransferHistogram {
	if e == nil {
		return nil
	}
	out := make([]TransferHistogram, histKinds)
	for k := range out {
		var lat [latBuckets + 1]uint64
		var size [sizeBuckets + 1]uint64
		h := &out[k]
		h.Transport, h.Op = e.choice.Transport, histOps[k]
		var latSum uint64
		for _, w := range e.workers {
			// Sizes first: observe counts the latency first, so every
			// transfer seen here in a size bucket is in a latency
			// bucket too, and no size bucket exceeds Count.
			kh := &w.hist.kinds[k]
			for i := range size {
				size[i] += kh.size[i].Load()
			}
			for i := range lat {
				lat[i] += kh.lat[i].Load()
			}
			latSum += kh.latSum.Load()
			h.SizeSum += kh.sizeSum.Load()
		}
		h.LatencySum = float64(latSum) / 1e9
		var cum uint64
		h.Latency = make([]HistogramBucket, latBuckets)
		for i := range h.Latency {
			cum += lat[i]
			h.Latency[i] = HistogramBucket{UpperBound: float64(uint64(1)<<(i+latShift)) / 1e9, Count: cum}
		}
		h.Count = cum + lat[latBuckets]
		cum = 0
		h.Size = make([]HistogramBucket, sizeBuckets)
		for i := range h.Size {
			cum += size[i]
			h.Size[i] = HistogramBucket{UpperBound: float64(uint64(1) << i), Count: cum}
		}
	}
	return out
}
