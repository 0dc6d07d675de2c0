package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric/directory"
)

// runDemo runs the whole story in one process on the in-process
// directory: two prefill engines, a decode engine started after them,
// and prefill p0 "killed" in the middle of a request's stream. There are
// no leases in process: the demo stops p0 without withdrawing its entry,
// as SIGKILL would, and then tells the directory the entry expired
// (Memory.Expire), which is what etcd does when the lease runs out.
func runDemo(ctx context.Context, o options, out io.Writer) error {
	if o.dir != "" && !strings.HasPrefix(o.dir, "mem://") {
		return fmt.Errorf("demo runs on the in-process directory (mem://NAME), not %s: start prefill and decode processes for etcd", o.dir)
	}
	mem := directory.NewMemory()
	defer mem.Close()
	sw := &syncWriter{w: out}

	crash := make(chan struct{})
	killer := &killWriter{w: sw, match: "prefill p0: request ", chunk: " chunk 3/", after: 2, kill: func() { close(crash) }}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, name := range []string{"p0", "p1"} {
		po := o
		po.name = name
		w := io.Writer(sw)
		var c <-chan struct{}
		if name == "p0" {
			w, c = killer, crash
		}
		wg.Go(func() {
			errs[i] = runPrefill(ctx, po, mem, w, c)
			if errors.Is(errs[i], errCrashed) {
				errs[i] = nil
				// The lease of the dead process runs out.
				_ = mem.Expire(name)
			}
		})
	}
	// The decode starts once the pool is up (it would wait for it anyway).
	wctx, cancelWait := context.WithTimeout(ctx, 30*time.Second)
	_, err := directory.WaitFor(wctx, mem, directory.SelectorOf(map[string]string{"role": "prefill"}), 2)
	cancelWait()
	if err != nil {
		return err
	}
	do := o
	do.name, do.prefills = "d0", 2
	res, err := runDecode(ctx, do, mem, sw)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if _, ok := res.LostAfter["p0"]; !ok {
		return fmt.Errorf("p0 was stopped but the decode never saw it lost")
	}
	return nil
}

// syncWriter serialises the writes of the demo's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// killWriter passes p0's output through and calls kill once p0 has
// written chunk 3 of its after-th request: mid-stream.
type killWriter struct {
	w            io.Writer
	match, chunk string
	after        int
	kill         func()
	mu           sync.Mutex
	seen         int
	done         bool
}

func (k *killWriter) Write(b []byte) (int, error) {
	k.mu.Lock()
	if !k.done && bytes.Contains(b, []byte(k.match)) && bytes.Contains(b, []byte(k.chunk)) {
		if k.seen++; k.seen >= k.after {
			k.done = true
			fmt.Fprintf(k.w, "demo: killing prefill p0 mid-stream\n")
			k.kill()
		}
	}
	k.mu.Unlock()
	return k.w.Write(b)
}
