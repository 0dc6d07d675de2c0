//go:build cgo && unix

package dl

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

// Each helper clears dlerror, makes the call and reads dlerror in one C
// call: the error text is thread-local, and a Go goroutine could otherwise
// move to another thread between the call and the read.
static void *ferry_dl_open(const char *path, int flags, const char **err) {
	dlerror();
	void *h = dlopen(path, flags);
	*err = h ? NULL : dlerror();
	return h;
}

static void *ferry_dl_sym(void *h, const char *name, const char **err) {
	dlerror();
	void *p = dlsym(h, name);
	*err = dlerror();
	return p;
}

static int ferry_dl_close(void *h, const char **err) {
	dlerror();
	int r = dlclose(h);
	*err = r ? dlerror() : NULL;
	return r;
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// The helpers above already keep each call and its dlerror on one thread;
// locking the goroutine too keeps that true if a helper is ever split.

func dlopen(path string, flags int) (unsafe.Pointer, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var cerr *C.char
	h := C.ferry_dl_open(cpath, C.int(flags), &cerr)
	if h == nil {
		msg := "dlopen failed"
		if cerr != nil {
			msg = C.GoString(cerr)
		}
		return nil, msg
	}
	return h, ""
}

func dlsym(h unsafe.Pointer, name string) (unsafe.Pointer, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var cerr *C.char
	p := C.ferry_dl_sym(h, cname, &cerr)
	if cerr != nil {
		return nil, C.GoString(cerr)
	}
	return p, ""
}

func dlclose(h unsafe.Pointer) string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cerr *C.char
	if C.ferry_dl_close(h, &cerr) != 0 {
		if cerr != nil {
			return C.GoString(cerr)
		}
		return "dlclose failed"
	}
	return ""
}
