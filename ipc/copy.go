package ipc

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Large writes are copied by the posting worker together with helper
// goroutines: one core copies about 8 GB/s here while two reach 16-20, so
// the bandwidth of one write scales with idle cores. Work is split into
// chunks claimed from a counter, so a helper that is not scheduled (a busy
// machine) costs nothing: the worker copies the chunks itself and waits
// only for chunks a helper already started. Large copies stream (see
// copyBytes).
const (
	parallelMin = 4 << 20 // smaller copies run on the worker alone
	copyChunk   = 2 << 20
	maxHelpers  = 7
)

// copyJob is one large copy in progress. A domain reuses its job; gen
// tells a helper that woke late that the copy it was called for is over.
type copyJob struct {
	gen    atomic.Uint64
	active atomic.Int32 // helpers inside the job
	next   atomic.Uint64
	done   atomic.Uint64
	// moved counts the bytes of large copies as their chunks finish: the
	// engine's watchdog reads it (Domain.Progress) to tell a long copy
	// from a stuck call.
	moved  atomic.Uint64
	calls  chan<- copyCall // the helpers, nil when there are none
	dst    uintptr
	src    uintptr
	n      uint64
	chunks uint64
	stream bool
}

type copyCall struct {
	job *copyJob
	gen uint64
}

// copyPool is the process's helpers, started with the first open domain
// and stopped with the last, so no goroutine outlives the domains.
var copyPool struct {
	mu    sync.Mutex
	refs  int
	calls chan copyCall
	n     int
	wg    sync.WaitGroup
}

// acquireHelpers returns the helpers' call queue (nil on a single core);
// releaseHelpers must follow once the caller copies no more.
func acquireHelpers() chan<- copyCall {
	p := &copyPool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refs++
	if p.refs == 1 {
		p.n = min(runtime.GOMAXPROCS(0), runtime.NumCPU(), maxHelpers+1) - 1
		if p.n > 0 {
			p.calls = make(chan copyCall, p.n)
			for i := 0; i < p.n; i++ {
				p.wg.Add(1)
				go runCopyHelper(p.calls, &p.wg)
			}
		}
	}
	return p.calls
}

func releaseHelpers() {
	p := &copyPool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refs--
	if p.refs > 0 || p.calls == nil {
		return
	}
	close(p.calls)
	p.wg.Wait()
	p.calls, p.n = nil, 0
}

func runCopyHelper(calls <-chan copyCall, wg *sync.WaitGroup) {
	defer wg.Done()
	for c := range calls {
		j := c.job
		j.active.Add(1)
		if j.gen.Load() == c.gen {
			j.work()
		}
		j.active.Add(-1)
	}
}

// work copies chunks until none is left.
func (j *copyJob) work() {
	for {
		k := j.next.Add(1) - 1
		if k >= j.chunks {
			return
		}
		off := k * copyChunk
		n := min(copyChunk, j.n-off)
		copyBytes(j.dst+uintptr(off), j.src+uintptr(off), n, j.stream)
		j.moved.Add(n)
		j.done.Add(1)
	}
}

// copyMem copies n bytes from src to dst, with helpers when it is large
// and there are any. It returns when every byte is written.
func (j *copyJob) copyMem(dst, src uintptr, n uint64) {
	stream := haveStream && n >= streamMin
	calls := j.calls
	if n < parallelMin || calls == nil {
		copyBytes(dst, src, n, stream)
		return
	}
	j.dst, j.src, j.n, j.stream = dst, src, n, stream
	j.chunks = (n + copyChunk - 1) / copyChunk
	j.next.Store(0)
	j.done.Store(0)
	gen := j.gen.Load()
	for i := 0; i < cap(calls) && uint64(i+1) < j.chunks; i++ {
		select {
		case calls <- copyCall{job: j, gen: gen}:
		default: // every helper has work queued: copy alone
		}
	}
	j.work()
	for j.done.Load() < j.chunks {
		runtime.Gosched() // a helper is finishing its last chunk
	}
	// Close the job to helpers still queued, then wait for any inside it,
	// before the job is reused.
	j.gen.Add(1)
	for j.active.Load() != 0 {
		runtime.Gosched()
	}
}

// bytesAt views n bytes of memory outside the Go heap.
func bytesAt(addr uintptr, n uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), addr)), int(n))
}
