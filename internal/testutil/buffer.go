package testutil

import (
	"bytes"
	"sync"
)

// Buffer collects what several goroutines or processes write (an
// engine's log lines, children's output); unlike bytes.Buffer it is safe
// for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
