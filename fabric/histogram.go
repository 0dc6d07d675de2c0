package fabric

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Transfer histograms. Each worker counts the transfers it completed, by
// kind, into fixed power-of-two buckets of latency and size, when it
// reports them: from data the worker already holds (the transfer's start
// and the loop's clock), in plain counters only it touches, so the
// per-operation path gains no allocation, no lock, no atomic and no shared
// cache line. Every publishEvery (publishCounts) the worker adds what it
// counted to the buckets readers load, a few atomic adds for the buckets
// touched. Readers (TransferHistograms, a Prometheus scrape) first ask
// each worker to hand over its current pass (syncCounts), then add the
// workers' buckets up: a transfer whose completion was delivered before
// the call is counted.

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

// xferHist is one worker's buckets: kinds is what readers load, pass what
// the worker counted since its last publish. The worker is the only
// writer of both.
type xferHist struct {
	kinds [histKinds]kindHist
	pass  [histKinds]kindPass
	dirty uint32 // bit k: pass[k] holds counts
}

type kindHist struct {
	lat     [latBuckets + 1]atomic.Uint64 // the last is +Inf
	size    [sizeBuckets + 1]atomic.Uint64
	latSum  atomic.Uint64 // ns
	sizeSum atomic.Uint64 // bytes
}

// kindPass is one kind's counts of the current pass, with a bit per
// bucket touched so that publish visits only those.
type kindPass struct {
	lat      [latBuckets + 1]uint64
	size     [sizeBuckets + 1]uint64
	latSum   uint64
	sizeSum  uint64
	latSeen  uint32 // bit i: lat[i] > 0
	sizeSeen uint64 // bit i: size[i] > 0
}

// observe counts one transfer of kind that took ns and moved bytes.
func (h *xferHist) observe(kind reqKind, ns int64, bytes uint64) {
	k := int(kind) - 1
	if k < 0 || k >= histKinds {
		return
	}
	p := &h.pass[k]
	lb, sb := latBucket(ns), sizeBucket(bytes)
	p.lat[lb]++
	p.size[sb]++
	p.latSeen |= 1 << lb
	p.sizeSeen |= 1 << sb
	if ns > 0 {
		p.latSum += uint64(ns)
	}
	p.sizeSum += bytes
	h.dirty |= 1 << k
}

// publish adds the pass's counts to the buckets readers load. Latencies
// go first: TransferHistograms loads sizes first, so every transfer it
// sees in a size bucket is in a latency bucket too.
func (h *xferHist) publish() {
	for h.dirty != 0 {
		k := bits.TrailingZeros32(h.dirty)
		h.dirty &^= 1 << k
		p, kh := &h.pass[k], &h.kinds[k]
		for m := p.latSeen; m != 0; m &= m - 1 {
			i := bits.TrailingZeros32(m)
			kh.lat[i].Add(p.lat[i])
			p.lat[i] = 0
		}
		if p.latSum > 0 {
			kh.latSum.Add(p.latSum)
		}
		for m := p.sizeSeen; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			kh.size[i].Add(p.size[i])
			p.size[i] = 0
		}
		if p.sizeSum > 0 {
			kh.sizeSum.Add(p.sizeSum)
		}
		p.latSeen, p.sizeSeen, p.latSum, p.sizeSum = 0, 0, 0, 0
	}
}

// publishCounts hands over the counts the worker keeps: the histograms,
// Stats.Completed and the live transfer count. It runs on the worker's
// goroutine, from the loop every publishEvery and after control calls,
// in every flush, and when a reader asks (syncCounts).
func (w *worker) publishCounts() {
	if w.hist.dirty != 0 {
		w.hist.publish()
	}
	if w.completed != 0 {
		w.e.completed.Add(w.completed)
		w.completed = 0
	}
	if n := int64(w.queue.inflight); n != w.queue.liveSeen {
		// Not per transfer: an atomic add per transfer would cost two
		// locked instructions on each.
		w.queue.live.Store(n)
		w.queue.liveSeen = n
	}
}

// syncWait bounds how long syncCounts waits for one worker: one stuck in
// a provider call is read as it last published.
const syncWait = 100 * time.Millisecond

// syncCounts has each running worker publish its current pass, so that a
// reader sees every transfer whose completion was delivered before it
// asked. A closing engine's workers publish as they exit.
func (e *Engine) syncCounts() {
	for _, w := range e.workers {
		if !e.enter() {
			return
		}
		done := make(chan struct{})
		select {
		case w.queue.ctl <- func(w *worker) { w.publishCounts(); close(done) }:
			w.kick()
		default:
			// A full control queue: its functions run first and the pass
			// after them publishes; not waited for.
			e.leave()
			continue
		}
		e.leave()
		t := time.NewTimer(syncWait)
		select {
		case <-done:
		case <-w.exited:
		case <-w.abandon:
		case <-t.C:
		}
		t.Stop()
	}
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
// transfer: every transfer whose completion was delivered before the call
// is counted (a worker stuck in a provider call for over 100 ms is read as
// it last published). Safe to call at any time; it allocates, the workers
// do not.
func (e *Engine) TransferHistograms() []TransferHistogram {
	if e == nil {
		return nil
	}
	e.syncCounts()
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
