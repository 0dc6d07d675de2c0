package fabric

// Hooks for the instruction-count harness (perop_cg_test.go): they run
// the worker's per-pass steps inline, on the worker's own goroutine, so a
// counted window holds the per-operation path and no idle spinning.

// PerOpOnWorker runs fn on the main worker's goroutine and waits for it.
func PerOpOnWorker(e *Engine, fn func()) {
	done := make(chan struct{})
	e.main().queue.ctl <- func(*worker) { fn(); close(done) }
	<-done
}

// PerOpPass runs one pass of the main worker's loop as loop does when it
// has work: the clock when due (tick), up to reqsPerPass requests, post and poll, the end of
// the pass (scripts/perop-cg.sh gives revisions before acceptPass its own
// copy).
func PerOpPass(e *Engine) {
	w := e.main()
	w.tick(0)
	w.acceptPass()
	w.progress()
	w.endPass()
}
