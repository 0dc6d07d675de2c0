package emu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferryrdma/ferry/cuda"
)

// Errors. The categories are cuda's (and fabric's), so errors.Is works
// across the packages.
var (
	ErrNotSupported    = cuda.ErrNotSupported    // no C++ compiler, or built with CGO_ENABLED=0
	ErrInvalidArgument = cuda.ErrInvalidArgument // bad spec, name, launch shape or arguments
	ErrClosed          = cuda.ErrClosed
	// ErrKernelFailed is wrapped by every *KernelError.
	ErrKernelFailed = errors.New("kernel failed")
	// ErrBuild is wrapped by every *BuildError.
	ErrBuild = errors.New("kernel build failed")
)

// BuildError is a failed g++ build of kernel sources; Log is g++'s output.
type BuildError struct {
	Name string
	Log  string
}

func (e *BuildError) Error() string { return "cuda emu: build " + e.Name + ": " + e.Log }

// Unwrap returns ErrBuild.
func (e *BuildError) Unwrap() error { return ErrBuild }

// KernelError is a launch that failed while running: a deadlock, a
// __trap(), a warp collective used wrongly, or an abort (Sync's context).
type KernelError struct {
	Kernel string
	Msg    string
}

func (e *KernelError) Error() string { return "cuda emu: kernel " + e.Kernel + ": " + e.Msg }

// Unwrap returns ErrKernelFailed.
func (e *KernelError) Unwrap() error { return ErrKernelFailed }

func invalid(format string, args ...any) error {
	return fmt.Errorf("cuda emu: %s: %w", fmt.Sprintf(format, args...), ErrInvalidArgument)
}

// BuildSpec says what to build: kernel sources compiled together (one
// translation unit, in order) with preprocessor definitions, as NVRTC
// compiles one specialisation.
type BuildSpec struct {
	Name    string // for errors and the cache; "" names it after the first source
	Sources []cuda.Source
	// Defines are "NAME" or "NAME=VALUE" (a leading "-D" is allowed, so
	// a KernelBuild's NVRTC -D options can be passed as they are).
	Defines []string
	// CacheDir holds built modules (FERRY_EMU_CACHE, else the user cache
	// directory); "off" builds into a temporary directory every time.
	CacheDir string
	// Sanitize adds -fsanitize=thread. Such a module cannot be loaded
	// into a Go process (Go's race runtime and TSan conflict): use it
	// from a C++ program (see the TSan scenarios in this package).
	Sanitize bool
}

// gccFlags are the compiler flags of every module.
var gccFlags = []string{"-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fno-gnu-unique",
	"-fno-strict-aliasing", "-Wall", "-Wno-unused-function", "-Wno-unused-variable"}

// kernelDecl is an extern "C" __global__ function found in a source.
type kernelDecl struct {
	Name   string
	Bounds string // the __launch_bounds__ arguments as written, or ""
}

var reGlobal = regexp.MustCompile(`extern\s+"C"\s+__global__\s+void\s+`)
var reIdent = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// stripComments blanks // and /* */ comments (keeping line breaks).
func stripComments(src string) string {
	b := []byte(src)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			for i++; i < len(b) && b[i] != '"' && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for ; i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

// findKernels lists the extern "C" __global__ kernels of a source.
func findKernels(src string) ([]kernelDecl, error) {
	code := stripComments(src)
	var out []kernelDecl
	for _, loc := range reGlobal.FindAllStringIndex(code, -1) {
		rest := code[loc[1]:]
		var d kernelDecl
		if t := strings.TrimLeft(rest, " \t\n"); strings.HasPrefix(t, "__launch_bounds__") {
			t = strings.TrimLeft(t[len("__launch_bounds__"):], " \t\n")
			if !strings.HasPrefix(t, "(") {
				return nil, invalid("__launch_bounds__ without arguments")
			}
			depth, end := 0, -1
			for i, c := range t {
				if c == '(' {
					depth++
				} else if c == ')' {
					if depth--; depth == 0 {
						end = i
						break
					}
				}
			}
			if end < 0 {
				return nil, invalid("unbalanced __launch_bounds__")
			}
			d.Bounds = strings.TrimSpace(t[1:end])
			rest = t[end+1:]
		}
		m := reIdent.FindStringSubmatch(rest)
		if m == nil {
			return nil, invalid("cannot read the kernel name after %q", code[loc[0]:loc[1]])
		}
		d.Name = m[1]
		out = append(out, d)
	}
	return out, nil
}

// translationUnit is the C++ g++ compiles for spec.
func translationUnit(spec BuildSpec, kernels []kernelDecl) string {
	var b strings.Builder
	for _, d := range spec.Defines {
		d = strings.TrimPrefix(d, "-D")
		name, val, ok := strings.Cut(d, "=")
		if !ok {
			val = "1"
		}
		fmt.Fprintf(&b, "#define %s %s\n", name, val)
	}
	b.WriteString("#include \"ferry_device.h\"\n")
	for _, s := range spec.Sources {
		fmt.Fprintf(&b, "#line 1 %s\n%s\n", strconv.Quote(s.Name), s.Code)
	}
	b.WriteString("#line 1 \"generated kernel table\"\n#include \"fd_emu_runtime.h\"\n")
	b.WriteString("const fd_emu::kernel_entry fd_emu_kernel_table[] = {\n")
	for _, k := range kernels {
		if k.Bounds != "" {
			fmt.Fprintf(&b, "\tFD_EMU_KERNEL(%s, %s),\n", k.Name, k.Bounds)
		} else {
			fmt.Fprintf(&b, "\tFD_EMU_KERNEL(%s),\n", k.Name)
		}
	}
	fmt.Fprintf(&b, "};\nconst int fd_emu_kernel_table_len = %d;\n", len(kernels))
	return b.String()
}

// writeHeaders puts ferry_device.h and the emulator's headers in dir.
func writeHeaders(dir string) error {
	hdrs, err := hostHeaders()
	if err != nil {
		return err
	}
	hdrs[cuda.DeviceHeaderName] = cuda.DeviceHeader().Code
	for name, text := range hdrs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gxx finds the C++ compiler: FERRY_EMU_CXX (a path, or a name looked up
// in PATH), else g++. A FERRY_EMU_CXX that names nothing runnable is the
// same as no compiler (ErrNotSupported), named in the error, rather than
// a build failure with no log.
func gxx() (string, error) {
	if p := os.Getenv("FERRY_EMU_CXX"); p != "" {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("cuda emu: find C++20 compiler FERRY_EMU_CXX=%s: %v: %w", p, err, ErrNotSupported)
		}
		return lp, nil
	}
	p, err := exec.LookPath("g++")
	if err != nil {
		return "", fmt.Errorf("cuda emu: no g++ (the emulator compiles kernels with a C++20 compiler): %w", ErrNotSupported)
	}
	return p, nil
}

func cacheDir(spec BuildSpec) string {
	if spec.CacheDir != "" {
		return spec.CacheDir
	}
	if d := os.Getenv("FERRY_EMU_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "ferry", "cudaemu")
	}
	return filepath.Join(os.TempDir(), "ferry-cudaemu-"+strconv.Itoa(os.Getuid()))
}

// buildShared compiles spec into a shared object and returns its path
// and the kernels it holds. The object is cached under a hash of
// everything that goes into it.
func buildShared(ctx context.Context, spec BuildSpec) (string, []kernelDecl, error) {
	if len(spec.Sources) == 0 {
		return "", nil, invalid("build: no sources")
	}
	if spec.Name == "" {
		spec.Name = spec.Sources[0].Name
	}
	var kernels []kernelDecl
	for _, s := range spec.Sources {
		ks, err := findKernels(s.Code)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		kernels = append(kernels, ks...)
	}
	if len(kernels) == 0 {
		return "", nil, invalid("build %s: no extern \"C\" __global__ kernel in the sources", spec.Name)
	}
	cxx, err := gxx()
	if err != nil {
		return "", nil, err
	}
	flags := append([]string(nil), gccFlags...)
	if spec.Sanitize {
		flags = append(flags, "-fsanitize=thread", "-Wno-tsan")
	}
	tu := translationUnit(spec, kernels)
	hdrs, err := hostHeaders()
	if err != nil {
		return "", nil, err
	}
	ver, _ := exec.CommandContext(ctx, cxx, "--version").Output()
	h := sha256.New()
	for _, part := range []string{"cudaemu-v1", cxx, string(ver), strings.Join(flags, " "), tu, cuda.DeviceHeader().Code,
		hdrs["fd_emu_device.h"], hdrs["fd_emu_runtime.h"]} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	key := hex.EncodeToString(h.Sum(nil))[:32]
	dir := cacheDir(spec)
	if dir == "off" {
		if dir, err = os.MkdirTemp("", "ferry-cudaemu-"); err != nil {
			return "", nil, err
		}
	}
	out := filepath.Join(dir, key+".so")
	if _, err := os.Stat(out); err == nil {
		return out, kernels, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("cuda emu: cache dir: %w", err)
	}
	work, err := os.MkdirTemp(dir, key+".build")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(work)
	if err := writeHeaders(work); err != nil {
		return "", nil, err
	}
	tuPath := filepath.Join(work, "module.cpp")
	if err := os.WriteFile(tuPath, []byte(tu), 0o644); err != nil {
		return "", nil, err
	}
	tmp := filepath.Join(work, "module.so")
	cmd := exec.CommandContext(ctx, cxx, append(flags, "-I", work, "-o", tmp, tuPath)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		if _, ok := err.(*exec.ExitError); !ok {
			// It did not start (removed since gxx looked, or not an executable).
			return "", nil, fmt.Errorf("cuda emu: run C++20 compiler %s: %v: %w", cxx, err, ErrNotSupported)
		}
		if noCXX20(log.String()) {
			return "", nil, fmt.Errorf("cuda emu: C++ compiler %s lacks C++20 (-std=c++20): %s: %w", cxx,
				strings.TrimSpace(log.String()), ErrNotSupported)
		}
		return "", nil, &BuildError{Name: spec.Name, Log: strings.TrimSpace(log.String())}
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", nil, err
	}
	return out, kernels, nil
}

// noCXX20 reports whether a compiler's log says it rejected -std=c++20
// (gcc: "unrecognized command-line option", clang: "invalid value").
func noCXX20(log string) bool {
	return strings.Contains(log, "std=c++20") &&
		(strings.Contains(log, "unrecognized") || strings.Contains(log, "invalid value"))
}
