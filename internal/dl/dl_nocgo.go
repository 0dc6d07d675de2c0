//go:build !cgo || !unix

package dl

import "unsafe"

// Without cgo there is no dlopen: every library is absent, and Open says
// why in its error (which wraps ErrNotSupported).

const noCgo = "built with CGO_ENABLED=0 (no dlopen)"

func dlopen(path string, flags int) (unsafe.Pointer, string) {
	return nil, path + ": " + noCgo
}

func dlsym(h unsafe.Pointer, name string) (unsafe.Pointer, string) { return nil, noCgo }

func dlclose(h unsafe.Pointer) string { return "" }
