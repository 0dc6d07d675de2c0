// Command bindings is libferry, ferry's C ABI: built with
//
//	go build -buildmode=c-shared -tags grpcnotrace \
//		-ldflags=-extldflags=-Wl,--version-script=$PWD/bindings/libferry.map \
//		-o libferry.so ./bindings
//
// (make bindings does this through scripts/bindings.sh, which also sets
// the SONAME, moves the symbols and DWARF into libferry.so.X.Y.Z.debug and
// copies ferry.h beside the library), it lets
// C, C++, Python (package ferry in bindings/python, over ctypes), Rust and any other
// language with a C foreign-function interface drive fabric's
// TransferEngine. ferry.h, hand-written, is the contract: it documents
// every function, its thread-safety and who owns what. The version script
// keeps the dynamic symbol table to exactly the functions of ferry.h; the
// providers linked in have C helpers of their own that must not leak into
// the ferry_ namespace.
//
// # Design
//
// Objects cross the boundary as uint64 handles into a table (handles.go):
// C never holds a Go pointer, as the cgo rules require, and a stale or
// forged handle is refused with FERRY_E_BAD_HANDLE instead of crashing.
// Handles are never reused. An engine handle owns the region and immediate
// counter handles made from it and releases them when it closes.
//
// Errors are int codes, one per fabric sentinel (errors.go maps them with
// errors.Is, most specific first), and the message text is kept per C
// thread in shim.c: exported functions run on their C caller's thread, so
// the thread-local written from Go is the caller's. A panic never unwinds
// into C: every exported function recovers it as FERRY_E_INTERNAL.
//
// The two completion paths of the Go API map directly: a transfer handle
// is a fabric.Transfer (blocking wait with a timeout), a counter handle a
// fabric.TransferCounter that workers update without any callback. C
// callbacks (expected immediate counts, unclaimed immediates, received
// messages) run on the engine's dispatcher goroutine, which calls the C
// function pointer through a trampoline in shim.c; C user data travels
// through Go as an integer, never as a pointer.
//
// This package imports "C" although the style guide reserves cgo for
// internal/ofi, internal/ibv, internal/cudadrv and internal/dl: a c-shared
// library's //export functions can only live in a cgo main package. It
// keeps to the same spirit: no policy in C, only the boundary.
//
// The all-to-all (a2a.go, tensor.go) wraps an a2a.Context per ferry_a2a_t.
// Arrays arrive as ferry_tensor views of caller memory; tensor.go checks
// each (dtype, shape, strides, the bytes they reach against nbytes,
// alignment) before it becomes a Go slice over that memory, so a wrong
// shape is an error naming the argument and never a read past the
// caller's buffer. Explicit-rank worlds meet in memory by world_name
// (localWorld: an all-gather and the node memory of each domain).
//
// The directory (directory.go, ABI 1.3) wraps package fabric/directory: a
// ferry_directory_t owns the publication and watch handles made through
// it (a family, like an engine's) and releases them when it closes; etcd://
// URLs open the etcd backend (whose client is why libferry links gRPC),
// mem:// names share one in-process directory per name, reference
// counted. Entries and events cross as JSON text; a watch keeps an event
// that did not fit the caller's buffer for the next call, so nothing is
// lost to a short buffer, and every wait is bounded by the caller's
// timeout.
//
// ferry.h is a single file although it is larger than the style guide's
// 15 KB: users of a C library look for one header, and its comments are
// the ABI's documentation.
//
// Its tests build the library, compile the C examples against it and run
// them over the in-process "mem" transport and libfabric's "shm" and
// "tcp;ofi_rxm" on loopback (loopback.c: every request, completion and
// counter kind in one process; badinput.c: every refusal; ranks.c: two
// processes bootstrapped through ferry_group_*; cycles.c: repeated
// open/close leaks nothing; closerace.c: close while threads submit;
// overhead.c: the ABI's cost; a2a.c: dispatch and combine on the host and
// cuda-emu backends, as threads and as processes; gpu.c: GPU memory with
// no driver and with the cuda tests' fake driver; directory.c: the
// directory on mem:// and a real etcd; read.c: reads and
// ferry_expected_imms, 1.5; notified.c: notifications attached to writes
// and scatters, queued mailboxes, registration stats and huge-page host
// memory, 1.6), check that the library exports exactly ferry.h's functions, and
// run the Python example.
package main
