package main

/*
#include "shim.h"
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// ferry_group_join_env joins with settings given as "NAME=value" strings
// instead of the process environment: a library cannot change what the Go
// runtime read from environ at load time, and a caller bridging another
// launcher (a torch.distributed group handing out rank, world size and a
// master address) must not be overridden by that launcher's own RANK or
// MASTER_PORT variables. The names are those ferry_group_join reads.

//export ferry_group_join_env
func ferry_group_join_env(vars **C.char, count C.size_t, timeoutMS C.int64_t, out *C.ferry_group_t) (rc C.int) {
	defer guard(&rc)
	const op = "group join"
	if out == nil || (vars == nil && count > 0) {
		return fail(errInvalid(op, "nil pointer"))
	}
	env := make(map[string]string, int(count))
	if count > 0 {
		for i, p := range unsafe.Slice(vars, int(count)) {
			if p == nil {
				return fail(errInvalid(op, "variable %d is NULL", i))
			}
			name, value, ok := strings.Cut(C.GoString(p), "=")
			if !ok || name == "" {
				return fail(errInvalid(op, "variable %d is not NAME=value", i))
			}
			env[name] = value
		}
	}
	return joinGroup(func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}, timeoutMS, out)
}

// joinGroup joins the job the settings read through lookup describe.
func joinGroup(lookup func(string) (string, bool), timeoutMS C.int64_t, out *C.ferry_group_t) C.int {
	cfg, err := rendezvous.ConfigFromEnv(lookup)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx("group join", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	g, err := rendezvous.Join(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	*out = C.ferry_group_t(handles.add(g))
	return C.int(codeOK)
}
