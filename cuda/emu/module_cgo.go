//go:build cgo && linux

package emu

/*
#include <stdint.h>
#include <stdlib.h>

typedef int (*fd_count_fn)(void);
typedef const char *(*fd_info_fn)(int, int *, uint32_t *, int, int *);
typedef int (*fd_launch_fn)(int, const uint32_t *, const uint32_t *, uint32_t, const unsigned char *,
	const uint32_t *, const volatile int *, void *, uint32_t, char *, int);
typedef size_t (*fd_size_fn)(void);
typedef void (*fd_shutdown_fn)(void);

static int fd_call_count(void *f) { return ((fd_count_fn)f)(); }
static const char *fd_call_info(void *f, int i, int *np, uint32_t *sizes, int max, int *bounds) {
	return ((fd_info_fn)f)(i, np, sizes, max, bounds);
}
static int fd_call_launch(void *f, int i, const uint32_t *grid, const uint32_t *block, uint32_t smem,
	const unsigned char *args, const uint32_t *offs, const volatile int *cancel, void *scope, uint32_t device,
	char *err, int errlen) {
	return ((fd_launch_fn)f)(i, grid, block, smem, args, offs, cancel, scope, device, err, errlen);
}
static size_t fd_call_size(void *f) { return ((fd_size_fn)f)(); }
static void fd_call_shutdown(void *f) { ((fd_shutdown_fn)f)(); }
*/
import "C"

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/dl"
)

// loaded modules by path: a shared object loaded twice is one runtime (one
// worker pool), shut down when its last Module closes.
var loaded struct {
	mu   sync.Mutex
	libs map[string]*sharedModule
	// scope is the scope checker's table, shared by every module of the
	// process (their kernels share memory) and never freed; nil when
	// FERRY_EMU_SCOPE_CHECK=0.
	scope     unsafe.Pointer
	scopeSize C.size_t
}

// scopeTable returns the process's scope table for a module whose runtime
// wants size bytes, allocating it on first use. Called with loaded.mu held.
func scopeTable(size C.size_t) (unsafe.Pointer, error) {
	if os.Getenv(ScopeCheckEnv) == "0" {
		return nil, nil
	}
	if loaded.scope == nil {
		loaded.scope, loaded.scopeSize = C.calloc(1, size), size
		if loaded.scope == nil {
			return nil, fmt.Errorf("cuda emu: no memory for the scope checker's %d-byte table", size)
		}
	}
	if size != loaded.scopeSize {
		return nil, fmt.Errorf("cuda emu: a module's scope table takes %d bytes, the process's has %d (modules built from different runtimes)",
			size, loaded.scopeSize)
	}
	return loaded.scope, nil
}

type sharedModule struct {
	lib      *dl.Library
	refs     int
	launch   unsafe.Pointer
	shutdown unsafe.Pointer
	scope    unsafe.Pointer // the process's scope table, or nil
	kernels  []kernelInfo
}

type kernelInfo struct {
	name       string
	sizes      []uint32
	maxThreads int
}

// Build compiles the spec's sources with g++ against the host side of
// ferry_device.h (or takes them from the cache) and loads the result.
// Close the Module when done.
func Build(ctx context.Context, spec BuildSpec) (*Module, error) {
	if spec.Sanitize {
		return nil, invalid("build %s: a ThreadSanitizer module cannot be loaded into a Go process", spec.Name)
	}
	path, _, err := buildShared(ctx, spec)
	if err != nil {
		return nil, err
	}
	loaded.mu.Lock()
	defer loaded.mu.Unlock()
	if loaded.libs == nil {
		loaded.libs = map[string]*sharedModule{}
	}
	sm := loaded.libs[path]
	if sm == nil {
		if sm, err = openShared(path); err != nil {
			return nil, err
		}
		loaded.libs[path] = sm
	}
	sm.refs++
	return &Module{name: spec.Name, path: path, sm: sm}, nil
}

func openShared(path string) (*sharedModule, error) {
	lib := dl.New(dl.Now|dl.Local, path)
	if err := lib.Open(); err != nil {
		return nil, fmt.Errorf("cuda emu: load %s: %w", path, err)
	}
	sm := &sharedModule{lib: lib}
	syms := map[string]*unsafe.Pointer{"fd_emu_launch": &sm.launch, "fd_emu_shutdown": &sm.shutdown}
	var count, info, scopeSize unsafe.Pointer
	syms["fd_emu_kernel_count"], syms["fd_emu_kernel_info"] = &count, &info
	syms["fd_emu_scope_table_size"] = &scopeSize
	for name, p := range syms {
		v, err := lib.Lookup(name)
		if err != nil {
			lib.Close()
			return nil, fmt.Errorf("cuda emu: %s: %w", path, err)
		}
		*p = v
	}
	var err error
	if sm.scope, err = scopeTable(C.fd_call_size(scopeSize)); err != nil {
		lib.Close()
		return nil, err
	}
	n := int(C.fd_call_count(count))
	for i := 0; i < n; i++ {
		var np, bounds C.int
		sizes := make([]uint32, 64)
		name := C.fd_call_info(info, C.int(i), &np, (*C.uint32_t)(unsafe.Pointer(&sizes[0])), C.int(len(sizes)), &bounds)
		if name == nil || int(np) > len(sizes) {
			lib.Close()
			return nil, fmt.Errorf("cuda emu: %s: kernel %d: bad table entry", path, i)
		}
		sm.kernels = append(sm.kernels, kernelInfo{name: C.GoString(name), sizes: sizes[:np], maxThreads: int(bounds)})
	}
	return sm, nil
}

// Close releases the module; the shared object's workers stop when the
// last Module using it closes. Launches still queued on streams must be
// synchronised first.
func (m *Module) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	loaded.mu.Lock()
	defer loaded.mu.Unlock()
	if m.sm.refs--; m.sm.refs > 0 {
		return nil
	}
	delete(loaded.libs, m.path)
	C.fd_call_shutdown(m.sm.shutdown)
	return m.sm.lib.Close()
}

// run executes one launch to completion on the calling thread's behalf.
func (sm *sharedModule) run(l *launchReq, cancel *C.int) error {
	grid := [3]C.uint32_t{C.uint32_t(l.grid.X), C.uint32_t(l.grid.Y), C.uint32_t(l.grid.Z)}
	block := [3]C.uint32_t{C.uint32_t(l.block.X), C.uint32_t(l.block.Y), C.uint32_t(l.block.Z)}
	var args *C.uchar
	var offs *C.uint32_t
	if len(l.args) > 0 {
		args = (*C.uchar)(unsafe.Pointer(&l.args[0]))
	}
	if len(l.offsets) > 0 {
		offs = (*C.uint32_t)(unsafe.Pointer(&l.offsets[0]))
	}
	var msg [512]C.char
	r := C.fd_call_launch(sm.launch, C.int(l.k.idx), &grid[0], &block[0], C.uint32_t(l.shared), args, offs,
		cancel, sm.scope, C.uint32_t(l.device), &msg[0], C.int(len(msg)))
	if r != 0 {
		return &KernelError{Kernel: l.k.name, Msg: C.GoString(&msg[0])}
	}
	return nil
}

// cancelFlag is C memory the runtime polls at every yield point.
type cancelFlag struct{ p *C.int }

func newCancelFlag() cancelFlag {
	return cancelFlag{(*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))}
}
func (c cancelFlag) set(v int) { atomic.StoreInt32((*int32)(unsafe.Pointer(c.p)), int32(v)) }
func (c cancelFlag) free()     { C.free(unsafe.Pointer(c.p)) }
