package dl

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// Flags for New; they are the dlopen RTLD_* values on Linux.
const (
	Lazy   = 0x00001 // RTLD_LAZY: resolve functions on first call
	Now    = 0x00002 // RTLD_NOW: resolve everything at open
	Global = 0x00100 // RTLD_GLOBAL: symbols serve later loads
	Local  = 0x00000 // RTLD_LOCAL
)

// Library is a shared library loaded on demand from the first candidate
// path that opens. The zero value is not usable; call New.
type Library struct {
	mu         sync.Mutex
	candidates []string
	flags      int
	handle     unsafe.Pointer
	path       string
	refs       int
}

// New returns a closed library that Open will look for at candidates, in
// order. A candidate without a slash is searched the way the dynamic
// loader does (LD_LIBRARY_PATH, the ld.so cache, the default directories).
func New(flags int, candidates ...string) *Library {
	return &Library{flags: flags, candidates: slices.Clone(candidates)}
}

// SetCandidates replaces the candidate list. It refuses with ErrBusy while
// the library is open: callers holding symbols must never see it change.
func (l *Library) SetCandidates(candidates ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs > 0 {
		return fmt.Errorf("dl: set candidates for %s: already loaded: %w", l.path, ErrBusy)
	}
	l.candidates = slices.Clone(candidates)
	return nil
}

// Candidates returns a copy of the candidate list.
func (l *Library) Candidates() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.candidates)
}

// Open loads the library on the first call and counts later calls. The
// error wraps ErrNotSupported and lists every candidate with its dlerror.
func (l *Library) Open() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs > 0 {
		l.refs++
		return nil
	}
	var fails []failure
	for _, c := range l.candidates {
		h, msg := dlopen(c, l.flags)
		if h != nil {
			l.handle, l.path, l.refs = h, c, 1
			return nil
		}
		fails = append(fails, failure{c, msg})
	}
	name := "library"
	if len(l.candidates) > 0 {
		name = l.candidates[0]
	}
	return &Error{Op: "open", Name: name, Msg: groupFailures(fails), Err: ErrNotSupported}
}

// Close drops one reference; the last one unloads the library. Closing a
// closed library is a no-op.
func (l *Library) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return nil
	}
	l.refs--
	if l.refs > 0 {
		return nil
	}
	h, p := l.handle, l.path
	l.handle, l.path = nil, ""
	if msg := dlclose(h); msg != "" {
		return &Error{Op: "close", Name: p, Msg: msg, Err: ErrNotSupported}
	}
	return nil
}

// Path returns the candidate that opened, or "" while closed.
func (l *Library) Path() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.path
}

// Refs returns the number of open references.
func (l *Library) Refs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs
}

// Lookup returns the address of symbol name. A missing symbol wraps
// ErrNotSupported (an older library) and keeps the dlerror text.
func (l *Library) Lookup(name string) (unsafe.Pointer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refs == 0 {
		return nil, &Error{Op: "lookup", Name: name, Msg: "library not open", Err: ErrClosed}
	}
	p, msg := dlsym(l.handle, name)
	if p == nil {
		if msg == "" {
			msg = "symbol resolves to NULL"
		}
		return nil, &Error{Op: "lookup", Name: name, Msg: msg, Err: ErrNotSupported}
	}
	return p, nil
}

// LookupFirst returns the first of names that resolves, and which one. It
// is how versioned entry points are chosen: list the newest first
// ("cuMemAlloc_v2", "cuMemAlloc") and the library's best is taken.
func (l *Library) LookupFirst(names ...string) (unsafe.Pointer, string, error) {
	var msgs []string
	for _, n := range names {
		p, err := l.Lookup(n)
		if err == nil {
			return p, n, nil
		}
		if e, ok := err.(*Error); ok && e.Err == ErrClosed {
			return nil, "", err
		}
		msgs = append(msgs, err.(*Error).Msg)
	}
	name := ""
	if len(names) > 0 {
		name = names[0]
	}
	return nil, "", &Error{Op: "lookup", Name: name, Msg: joinMsgs(msgs), Err: ErrNotSupported}
}
