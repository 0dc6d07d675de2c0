// Package dl opens shared libraries at run time (dlopen) and looks up their
// symbols (dlsym), so that ferry builds and starts on machines where a
// vendor library such as libcuda.so.1 does not exist.
//
// A Library is a reference-counted handle over an ordered list of candidate
// paths: the first Open tries them in order and keeps the one that loads,
// later Opens only count, and the last Close unloads it. Candidates can be
// changed only while the library is closed, so code that already resolved
// symbols never sees the library swapped underneath it.
//
// Every failure to load or to resolve wraps fabric.ErrNotSupported (the
// machine lacks the feature) and keeps the text dlerror gave, which is the
// only place that says why: a missing file, a wrong architecture, a missing
// dependency of the library itself.
//
// Library is safe for concurrent use. The package imports "C"; built with
// CGO_ENABLED=0 every Open fails with an error that wraps ErrNotSupported.
package dl
