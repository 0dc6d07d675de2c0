package emu

import (
	"embed"
	"io/fs"
)

// rtFS holds the host side of the device header and the emulator runtime,
// written next to ferry_device.h for g++ to include.
//
//go:embed rt/*.h
var rtFS embed.FS

// hostHeaders returns the emulator's headers by file name.
func hostHeaders() (map[string]string, error) {
	ents, err := fs.ReadDir(rtFS, "rt")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := rtFS.ReadFile("rt/" + e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = string(b)
	}
	return out, nil
}

// WriteHeaders puts ferry_device.h and the emulator's host headers
// (fd_emu_device.h, fd_emu_runtime.h) in dir, for a C++ program that
// links kernels with the runtime itself: the ThreadSanitizer scenarios of
// other packages' kernels, which cannot run inside a Go process.
func WriteHeaders(dir string) error { return writeHeaders(dir) }

// Compiler returns the C++ compiler the emulator uses (FERRY_EMU_CXX, else
// g++ from PATH), or an error wrapping ErrNotSupported.
func Compiler() (string, error) { return gxx() }
