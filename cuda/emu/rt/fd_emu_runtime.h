// fd_emu_runtime.h: the CPU emulator's runtime. Include it exactly once
// per program or shared object, after the kernel sources (the generated
// translation unit does). It provides the entry points fd_emu_device.h
// declares and a C API (fd_emu_*) to list and launch kernels.
//
// Execution model:
//   - a launch hands every block to its own worker OS thread (workers are
//     pooled), so all blocks are co-resident: grid barriers and spins on
//     other blocks, other launches, other devices or the host work;
//   - inside a block every CUDA thread is a fiber with its own stack; the
//     worker runs them round robin. A fiber runs until it reaches a block
//     barrier, a warp collective, a spin point or its end;
//   - warps are groups of 32 consecutive linear thread indices; a warp
//     collective completes when every lane named in its mask has arrived
//     with the same mask, and is refused when lanes disagree on the
//     operation or a named lane has exited;
//   - when a whole round of the block's fibers only spun, the worker backs
//     off (sched_yield, then sleeps growing to 256 us), so spinning blocks
//     leave the CPU to the work they wait for;
//   - a block in which no fiber can run (all wait at barriers or
//     collectives that cannot complete) is a deadlock: the launch fails
//     with a description instead of hanging;
//   - a block barrier is matched by its call site: threads of one block
//     waiting at different __syncthreads (a barrier under a condition that
//     is not the same in every thread of the block), or a thread exiting
//     while others wait at a barrier or before a later one, fail the
//     launch naming both sites. A GPU gives no such guarantee either way:
//     it may hang, or pass the barrier with the block split in two;
//   - chaos mode (FERRY_EMU_CHAOS=<seed>, read at each launch) switches
//     fibers at every scoped load and read-modify-write, runs each round's
//     fibers in a random order, and now and then stalls a whole block for
//     a moment, so that decisions taken from memory other blocks write
//     (abort flags) interleave as badly as a GPU may make them.
// Under ThreadSanitizer (-fsanitize=thread) every fiber is a TSan fiber
// switched without synchronisation, and barriers and collectives are
// annotated as the release/acquire points they are, so races between CUDA
// threads of one block are reported as between threads.
#ifndef FD_EMU_RUNTIME_H
#define FD_EMU_RUNTIME_H

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define FD_EMU_TSAN 1
#define FD_EMU_RT __attribute__((no_sanitize_thread, noinline))
#else
#define FD_EMU_TSAN 0
#define FD_EMU_RT
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace fd_emu {

thread_local thread_view *self = nullptr;

enum fiber_state : int { st_run, st_barrier, st_warp, st_done };

struct launch;
struct block_run;

struct fiber : thread_view {
	void *sp;
	unsigned char *stack;
	size_t stack_size;
	int state;
	int spun; // last switch back was a spin point
	// warp collective record
	int op, arg, width;
	uint32_t mask;
	uint64_t value, result;
	unsigned coll_slot;
	// barrier
	unsigned bar_gen;
	// spin detection: recent (address, value) observations
	const void *seen_addr[4];
	uint64_t seen_val[4];
	unsigned seen_pos;
	void *tsan;
#if !defined(__x86_64__)
	ucontext_t uc;
#endif
};

struct warp_state {
	uint32_t present; // lanes that exist
	uint32_t exited;
	uint32_t pending; // lanes waiting in a collective
	unsigned completions;
	char coll_sync[64]; // TSan sync objects, one per recent completion
};

typedef void (*thunk_fn)(const unsigned char *args, const uint32_t *offsets);

struct kernel_entry {
	const char *name;
	thunk_fn thunk;
	int nparams;
	const uint32_t *sizes;
	int max_threads; // __launch_bounds__ (0: none)
};

struct scope_table;

struct launch {
	const kernel_entry *k;
	scope_table *scope; // the scope checker's records, or null: unchecked
	uint32_t device;    // the emulated device the launch runs on
	uint32_t serial;    // the launch's number in the scope table
	uint32_t start_seq; // the table's event count when it started
	dim3 grid, block;
	uint32_t smem;
	const unsigned char *args;
	const uint32_t *offsets;
	const volatile int *cancel; // set by the caller to abort
	uint64_t chaos;             // chaos mode's seed (0: off)
	std::atomic<int> abort{0};
	std::mutex mu;
	std::condition_variable cv;
	uint32_t blocks_done = 0;
	char err[512] = {0};
	char start_sync; // TSan: the launch's start, released by each block's worker
	void fail(const char *msg) {
		std::lock_guard<std::mutex> g(mu);
		if (err[0] == 0) std::snprintf(err, sizeof err, "%s", msg);
		abort.store(1, std::memory_order_relaxed);
	}
	bool aborted() const {
		return abort.load(std::memory_order_relaxed) != 0 || (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED) != 0);
	}
};

struct block_run : block_view {
	launch *L;
	fiber *fibers;
	uint32_t n, live;
	uint32_t bar_arrived;
	int bar_acc[2];
	int bar_kind;
	unsigned bar_gen;
	const char *bar_file; // call site of the barrier the waiting threads are at
	unsigned bar_line;
	uint32_t bar_first;   // the thread that arrived there first
	uint32_t exited;      // threads that returned from the kernel
	uint64_t rng;         // chaos mode's generator state
	warp_state *warps;
	uint32_t nwarps;
	uint64_t progress;
	void *sched_sp;
	void *sched_tsan;
	bool stopped; // a fiber failed or the launch was aborted: run no more
	char bar_sync[2];
	char done_sync;
#if !defined(__x86_64__)
	ucontext_t sched_uc;
#endif
};

thread_local block_run *cur = nullptr;

} // namespace fd_emu

// ---- context switch ----
extern "C" __attribute__((visibility("hidden"), noreturn)) void fd_emu_fiber_start(fd_emu::fiber *f);

#if defined(__x86_64__)
extern "C" __attribute__((visibility("hidden"))) void fd_emu_switch(void **save_sp, void *to_sp);
extern "C" __attribute__((visibility("hidden"))) void fd_emu_trampoline();
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *save_sp, and resumes the
// context whose stack pointer is to_sp.
asm(R"(
	.text
	.p2align 4
	.hidden fd_emu_switch
	.globl fd_emu_switch
	.type fd_emu_switch,@function
fd_emu_switch:
	pushq %rbp
	pushq %rbx
	pushq %r12
	pushq %r13
	pushq %r14
	pushq %r15
	subq $8, %rsp
	stmxcsr (%rsp)
	fnstcw 4(%rsp)
	movq %rsp, (%rdi)
	movq %rsi, %rsp
	ldmxcsr (%rsp)
	fldcw 4(%rsp)
	addq $8, %rsp
	popq %r15
	popq %r14
	popq %r13
	popq %r12
	popq %rbx
	popq %rbp
	ret
	.size fd_emu_switch,.-fd_emu_switch
	.p2align 4
	.hidden fd_emu_trampoline
	.globl fd_emu_trampoline
	.type fd_emu_trampoline,@function
fd_emu_trampoline:
	movq %r12, %rdi
	call fd_emu_fiber_start
	ud2
	.size fd_emu_trampoline,.-fd_emu_trampoline
)");
#endif

namespace fd_emu {

FD_EMU_RT static void to_scheduler(fiber *f) {
	block_run *b = cur;
#if FD_EMU_TSAN
	__tsan_switch_to_fiber(b->sched_tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
	fd_emu_switch(&f->sp, b->sched_sp);
#else
	swapcontext(&f->uc, &b->sched_uc);
#endif
}

FD_EMU_RT static void to_fiber(block_run *b, fiber *f) {
	self = f;
#if FD_EMU_TSAN
	__tsan_switch_to_fiber(f->tsan, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
	fd_emu_switch(&b->sched_sp, f->sp);
#else
	swapcontext(&b->sched_uc, &f->uc);
#endif
}

#if !defined(__x86_64__)
static void uc_entry(unsigned hi, unsigned lo) {
	fd_emu_fiber_start(reinterpret_cast<fiber *>(((uintptr_t)hi << 32) | lo));
}
#endif

// fiber_reset prepares f to start the kernel from the top of its stack.
FD_EMU_RT static void fiber_reset(fiber *f) {
#if defined(__x86_64__)
	uint64_t *top = reinterpret_cast<uint64_t *>(f->stack + f->stack_size);
	top[-1] = reinterpret_cast<uint64_t>(&fd_emu_trampoline);
	top[-2] = 0;                                // rbp
	top[-3] = 0;                                // rbx
	top[-4] = reinterpret_cast<uint64_t>(f);    // r12: the fiber
	top[-5] = top[-6] = top[-7] = 0;            // r13-r15
	top[-8] = 0x1f80ull | (0x037full << 32);    // MXCSR, x87 control word
	f->sp = &top[-8];
#else
	getcontext(&f->uc);
	f->uc.uc_stack.ss_sp = f->stack;
	f->uc.uc_stack.ss_size = f->stack_size;
	f->uc.uc_link = nullptr;
	uintptr_t p = reinterpret_cast<uintptr_t>(f);
	makecontext(&f->uc, (void (*)())uc_entry, 2, (unsigned)(p >> 32), (unsigned)p);
#endif
}

static size_t stack_bytes() {
	if (const char *s = std::getenv("FERRY_EMU_STACK_KB")) {
		long kb = std::atol(s);
		if (kb >= 16 && kb <= 65536) return (size_t)kb << 10;
	}
	return FD_EMU_TSAN ? (size_t)512 << 10 : (size_t)64 << 10;
}

[[noreturn]] FD_EMU_RT static void fiber_abandon(fiber *f) {
	f->state = st_done;
	cur->stopped = true;
	to_scheduler(f);
	__builtin_trap(); // never resumed
}

FD_EMU_RT static void fail_here(const char *what) {
	fiber *f = static_cast<fiber *>(self);
	block_run *b = cur;
	char msg[400];
	std::snprintf(msg, sizeof msg, "%s: kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", what, b->L->k->name,
	              b->block_idx.x, b->block_idx.y, b->block_idx.z, f->thread_idx.x, f->thread_idx.y, f->thread_idx.z);
	b->L->fail(msg);
	fiber_abandon(f);
}

// yield_spin: a spin point. The fiber stays runnable.
FD_EMU_RT void spin_yield() {
	fiber *f = static_cast<fiber *>(self);
	if (f == nullptr) { // host code calling a device helper
		sched_yield();
		return;
	}
	if (cur->L->aborted()) fiber_abandon(f);
	f->spun = 1;
	to_scheduler(f);
}

FD_EMU_RT void observe(const void *addr, uint64_t value) {
	fiber *f = static_cast<fiber *>(self);
	if (f == nullptr) return;
	for (int i = 0; i < 4; i++) {
		if (f->seen_addr[i] == addr && f->seen_val[i] == value) {
			spin_yield(); // the same value again: a spin
			return;
		}
	}
	f->seen_addr[f->seen_pos & 3] = addr;
	f->seen_val[f->seen_pos & 3] = value;
	f->seen_pos++;
}

static inline uint64_t chaos_next(uint64_t *s) {
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// chaos_point: in chaos mode, a scoped operation hands the block to its
// next fiber, and one in 32 stalls the whole block for up to 200 us so
// that other blocks run ahead of it.
FD_EMU_RT void chaos_point() {
	fiber *f = static_cast<fiber *>(self);
	if (f == nullptr || cur == nullptr || cur->L->chaos == 0) return;
	block_run *b = cur;
	uint64_t r = chaos_next(&b->rng);
	if ((r & 31) == 0) {
		struct timespec ts = {0, (long)((r >> 8) % 200000)};
		nanosleep(&ts, nullptr);
	}
	spin_yield();
}

uint64_t timer_ns() {
	spin_yield();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

[[noreturn]] void trap(const char *what) {
	fail_here(what);
	__builtin_trap();
}

// ---- scope checker ----
//
// PTX orders two threads' operations on one address only if each
// operation's scope includes the other thread ("morally strong"): cta, the
// threads of one block; gpu, those of one device; sys, every thread of the
// system, the host's and a NIC's included. A flag released at gpu scope and
// acquired at cta scope by another block, or a host flag polled at gpu
// scope, works on most GPUs most of the time and is still a bug. The
// checker keeps a shadow record per address of the last scoped store
// (value, thread, block, launch, device, scope); a scoped load or
// read-modify-write that observes that value from another thread checks
// that both scopes include both threads, unless the store's launch had
// ended before the loader's began (kernel boundaries order everything).
// A value that changed under a launch's eyes with no scoped store behind
// it was written from outside the emulated devices (the host, a NIC, a
// peer process) or by a plain store: only a sys-scope load may observe it.
// The table is shared by every module of a process (the caller passes it
// to each launch), as kernels of different modules share memory.

struct scope_rec {
	uintptr_t addr; // 0: empty
	uint64_t value;
	uint32_t launch, device, block, thread;
	uint8_t op, scope;
	uint8_t stored; // 1: a scoped store wrote value; 0: a launch saw it
};

inline constexpr uint32_t scope_stripes = 256;
inline constexpr uint32_t scope_slots = 256; // per stripe
inline constexpr uint32_t scope_probe = 16;
inline constexpr uint32_t scope_ring = 4096;

// scope_table is plain data, zero when new: the Go side allocates it once
// per process (fd_emu_scope_table_size bytes) and hands it to every launch.
struct scope_table {
	std::atomic<uint32_t> next_launch;
	std::atomic<uint32_t> events;
	// launches[serial % scope_ring]: serial << 32 | the event count when it
	// ended (0 while it runs).
	std::atomic<uint64_t> launches[scope_ring];
	struct stripe {
		std::atomic<uint32_t> lock;
		scope_rec rec[scope_slots];
	} stripes[scope_stripes];
};

static inline uint64_t scope_hash(const void *p) { return ((uintptr_t)p >> 2) * 0x9e3779b97f4a7c15ull; }

static void scope_begin(launch *L) {
	scope_table *t = L->scope;
	uint32_t n = t->next_launch.fetch_add(1, std::memory_order_relaxed) + 1;
	if (n == 0) n = t->next_launch.fetch_add(1, std::memory_order_relaxed) + 1;
	L->serial = n;
	L->start_seq = t->events.fetch_add(1, std::memory_order_acq_rel) + 1;
	t->launches[n % scope_ring].store((uint64_t)n << 32, std::memory_order_release);
}

static void scope_end(launch *L) {
	scope_table *t = L->scope;
	uint32_t done = t->events.fetch_add(1, std::memory_order_acq_rel) + 1;
	t->launches[L->serial % scope_ring].store((uint64_t)L->serial << 32 | done, std::memory_order_release);
}

// scope_ended_before: launch serial ended before the event count start.
// A slot taken over by a later launch means serial is long over.
static bool scope_ended_before(scope_table *t, uint32_t serial, uint32_t start) {
	uint64_t v = t->launches[serial % scope_ring].load(std::memory_order_acquire);
	if ((uint32_t)(v >> 32) != serial) return true;
	uint32_t done = (uint32_t)v;
	return done != 0 && done < start;
}

static const char *scope_op_name(uint8_t op) {
	static const char *const names[] = {"ld.relaxed", "ld.acquire", "st.relaxed", "st.release", "atom.relaxed",
	                                    "atom.acq_rel"};
	return op < 6 ? names[op] : "?";
}
static const char *scope_name(uint8_t sc) {
	static const char *const names[] = {"cta", "gpu", "sys"};
	return sc < 3 ? names[sc] : "?";
}

// Who runs a scoped operation.
struct scope_who {
	uint32_t launch, device, block, thread;
};

// scope_covers: sc, held by a, includes b.
static bool scope_covers(uint8_t sc, const scope_who &a, const scope_who &b) {
	switch (sc) {
	case scope_cta:
		return a.launch == b.launch && a.block == b.block;
	case scope_gpu:
		return a.device == b.device;
	default:
		return true;
	}
}

// scope_needed: the narrowest scope that includes both.
static const char *scope_needed(const scope_who &a, const scope_who &b) {
	if (a.launch == b.launch && a.block == b.block) return "cta";
	return a.device == b.device ? "gpu" : "sys";
}

static scope_who scope_me() {
	fiber *f = static_cast<fiber *>(self);
	block_run *b = cur;
	uint32_t blk = b->block_idx.x + b->grid_dim.x * (b->block_idx.y + b->grid_dim.y * b->block_idx.z);
	return {b->L->serial, b->L->device, blk, f->linear};
}

static scope_rec *scope_find(scope_table::stripe *st, const void *p, bool insert) {
	uint32_t first = (uint32_t)(scope_hash(p) >> 40) % scope_slots;
	scope_rec *empty = nullptr;
	for (uint32_t i = 0; i < scope_probe; i++) {
		scope_rec *r = &st->rec[(first + i) % scope_slots];
		if (r->addr == (uintptr_t)p) return r;
		if (r->addr == 0 && empty == nullptr) empty = r;
	}
	if (!insert) return nullptr;
	// A full neighbourhood gives up its first record: a lost record only
	// means a check not made.
	scope_rec *r = empty != nullptr ? empty : &st->rec[first];
	*r = scope_rec{};
	r->addr = (uintptr_t)p;
	return r;
}

FD_EMU_RT static void scope_violation(const char *what) {
	fiber *f = static_cast<fiber *>(self);
	block_run *b = cur;
	char msg[500];
	std::snprintf(msg, sizeof msg, "scope: %s: kernel %s on device %u, block (%u,%u,%u), thread (%u,%u,%u)", what,
	              b->L->k->name, b->L->device, b->block_idx.x, b->block_idx.y, b->block_idx.z, f->thread_idx.x,
	              f->thread_idx.y, f->thread_idx.z);
	b->L->fail(msg); // the fiber stops at its next yield point
}

scoped::scoped(const void *p) : addr(p), slot(nullptr) {
#if !FD_EMU_TSAN
	if (self == nullptr || cur == nullptr || cur->L->scope == nullptr) return;
	scope_table::stripe *st = &cur->L->scope->stripes[scope_hash(p) >> 56];
	for (int spins = 0; st->lock.exchange(1, std::memory_order_acquire) != 0; spins++)
		if (spins > 64) sched_yield();
	slot = st;
#endif
}

scoped::~scoped() {
	if (slot != nullptr) static_cast<scope_table::stripe *>(slot)->lock.store(0, std::memory_order_release);
}

void scoped::saw(uint64_t v, mem_op op, mem_scope sc) {
	if (slot == nullptr) return;
	auto *st = static_cast<scope_table::stripe *>(slot);
	scope_who me = scope_me();
	scope_rec *r = scope_find(st, addr, false);
	char what[360];
	if (r != nullptr && r->stored && r->value == v) {
		scope_who w{r->launch, r->device, r->block, r->thread};
		if (w.launch == me.launch && w.block == me.block && w.thread == me.thread) return; // program order
		if (w.launch != me.launch && scope_ended_before(cur->L->scope, w.launch, cur->L->start_seq)) return;
		bool load_short = !scope_covers(sc, me, w), store_short = !scope_covers(r->scope, w, me);
		if (!load_short && !store_short) return;
		std::snprintf(what, sizeof what,
		              "%s.%s of %p observed 0x%llx stored by %s.%s from device %u, block %u, thread %u; the %s's scope "
		              "does not include the other thread (both need %s scope)",
		              scope_op_name(op), scope_name(sc), addr, (unsigned long long)v, scope_op_name(r->op),
		              scope_name(r->scope), w.device, w.block, w.thread, load_short ? "load" : "store",
		              scope_needed(me, w));
		scope_violation(what);
		return;
	}
	if (r != nullptr && r->launch == me.launch && r->value != v && sc != scope_sys) {
		std::snprintf(what, sizeof what,
		              "%s.%s of %p observed 0x%llx, which no scoped store of an emulated device wrote while this "
		              "launch ran (it saw 0x%llx there before): a value written by the host, a NIC or another "
		              "process (or by a plain store) needs a sys-scope load",
		              scope_op_name(op), scope_name(sc), addr, (unsigned long long)v, (unsigned long long)r->value);
		scope_violation(what);
		return;
	}
	// Note the value this launch saw, to tell later whether it changed.
	r = scope_find(st, addr, true);
	r->value = v;
	r->launch = me.launch;
	r->device = me.device;
	r->block = me.block;
	r->thread = me.thread;
	r->op = op;
	r->scope = sc;
	r->stored = 0;
}

void scoped::wrote(uint64_t v, mem_op op, mem_scope sc) {
	if (slot == nullptr) return;
	scope_who me = scope_me();
	scope_rec *r = scope_find(static_cast<scope_table::stripe *>(slot), addr, true);
	r->value = v;
	r->launch = me.launch;
	r->device = me.device;
	r->block = me.block;
	r->thread = me.thread;
	r->op = op;
	r->scope = sc;
	r->stored = 1;
}

FD_EMU_RT static void barrier_complete(block_run *b) {
	unsigned g = b->bar_gen & 1;
	for (uint32_t i = 0; i < b->n; i++)
		if (b->fibers[i].state == st_barrier) b->fibers[i].state = st_run;
	b->bar_arrived = 0;
	b->bar_acc[(g + 1) & 1] = 0;
	b->bar_gen++;
	b->progress++;
}

FD_EMU_RT int block_barrier(barrier_kind kind, int pred, const char *file, unsigned line) {
	fiber *f = static_cast<fiber *>(self);
	block_run *b = cur;
	if (b->L->aborted()) fiber_abandon(f);
	unsigned g = b->bar_gen & 1;
	if (b->exited > 0) {
		char msg[300];
		std::snprintf(msg, sizeof msg,
		              "divergent barrier: __syncthreads at %s:%u reached after %u threads of the block exited", file, line,
		              b->exited);
		fail_here(msg);
	}
	if (b->bar_arrived == 0) {
		b->bar_kind = kind;
		b->bar_acc[g] = kind == barrier_and ? 1 : 0;
		b->bar_file = file;
		b->bar_line = line;
		b->bar_first = f->linear;
	} else if (b->bar_line != line || std::strcmp(b->bar_file, file) != 0) {
		char msg[400];
		std::snprintf(msg, sizeof msg,
		              "divergent barrier: this thread reached __syncthreads at %s:%u while thread %u (and %u in all) "
		              "waits at %s:%u",
		              file, line, b->bar_first, b->bar_arrived, b->bar_file, b->bar_line);
		fail_here(msg);
	} else if (b->bar_kind != kind) {
		fail_here("threads of one block wait at different kinds of __syncthreads (plain, _count, _and, _or)");
	}
	switch (kind) {
	case barrier_count: b->bar_acc[g] += pred; break;
	case barrier_and: b->bar_acc[g] &= pred; break;
	case barrier_or: b->bar_acc[g] |= pred; break;
	default: break;
	}
#if FD_EMU_TSAN
	__tsan_release(&b->bar_sync[g]);
#endif
	f->bar_gen = b->bar_gen;
	f->state = st_barrier;
	if (++b->bar_arrived == b->live) barrier_complete(b);
	if (f->state != st_run) {
		f->spun = 0;
		to_scheduler(f);
	}
#if FD_EMU_TSAN
	__tsan_acquire(&b->bar_sync[g]);
#endif
	return b->bar_acc[g];
}

FD_EMU_RT static uint64_t lane_result(fiber *lanes, uint32_t lane, int op, uint32_t mask, int arg, int width) {
	fiber &me = lanes[lane];
	uint32_t seg = lane & ~(uint32_t)(width - 1), in_seg = lane & (uint32_t)(width - 1);
	uint32_t src = lane;
	switch (op) {
	case warp_shfl_idx: src = seg + ((uint32_t)arg & (uint32_t)(width - 1)); break;
	case warp_shfl_up: src = in_seg >= (uint32_t)arg ? lane - (uint32_t)arg : lane; break;
	case warp_shfl_down: src = in_seg + (uint32_t)arg < (uint32_t)width ? lane + (uint32_t)arg : lane; break;
	case warp_shfl_xor:
		src = lane ^ (uint32_t)arg;
		if (src >= seg + (uint32_t)width) src = lane; // later groups give the own value
		break;
	default: break;
	}
	if (op >= warp_shfl_idx && op <= warp_shfl_xor) return src < 32 && (mask >> src & 1) ? lanes[src].value : me.value;
	uint64_t acc = 0;
	bool first = true;
	for (uint32_t l = 0; l < 32; l++) {
		if (!(mask >> l & 1)) continue;
		uint64_t v = lanes[l].value;
		uint32_t u = (uint32_t)v;
		int32_t s = (int32_t)u;
		switch (op) {
		case warp_ballot: acc |= (uint64_t)(v != 0) << l; break;
		case warp_any: acc |= v != 0; break;
		case warp_all: acc = (first ? 1 : acc) & (v != 0); break;
		case warp_red_add: acc = (uint32_t)(acc + u); break;
		case warp_red_min_u: acc = first || u < (uint32_t)acc ? u : acc; break;
		case warp_red_max_u: acc = first || u > (uint32_t)acc ? u : acc; break;
		case warp_red_min_s: acc = first || s < (int32_t)(uint32_t)acc ? u : acc; break;
		case warp_red_max_s: acc = first || s > (int32_t)(uint32_t)acc ? u : acc; break;
		case warp_red_or: acc |= u; break;
		case warp_red_and: acc = first ? u : (acc & u); break;
		default: break;
		}
		first = false;
	}
	return acc;
}

// try_complete finishes the collective of the lanes in mask if all of
// them wait in it.
FD_EMU_RT static void try_complete(block_run *b, uint32_t w, uint32_t mask) {
	warp_state &ws = b->warps[w];
	if ((ws.pending & mask) != mask) return;
	fiber *lanes = &b->fibers[w * 32];
	int op = -1;
	for (uint32_t l = 0; l < 32; l++) {
		if (!(mask >> l & 1)) continue;
		if (lanes[l].mask != mask) return; // waits in another collective
		if (op < 0) op = lanes[l].op;
		if (lanes[l].op != op || lanes[l].width != lanes[0 + __builtin_ctz(mask)].width)
			fail_here("lanes of a warp collective run different operations (divergent __shfl/__ballot/__syncwarp)");
	}
	for (uint32_t l = 0; l < 32; l++)
		if (mask >> l & 1) lanes[l].result = lane_result(lanes, l, op, mask, lanes[l].arg, lanes[l].width);
	unsigned slot = ws.completions++ & 63;
	for (uint32_t l = 0; l < 32; l++) {
		if (!(mask >> l & 1)) continue;
		lanes[l].state = st_run;
		lanes[l].coll_slot = slot;
	}
	ws.pending &= ~mask;
	b->progress++;
#if FD_EMU_TSAN
	// The last lane to arrive has synchronised with every other (see
	// warp_collective); it passes that on to all of them.
	for (uint32_t l = 0; l < 32; l++)
		if (mask >> l & 1) __tsan_acquire(&lanes[l].tsan);
	__tsan_release(&ws.coll_sync[slot]);
#endif
}

FD_EMU_RT uint64_t warp_collective(warp_op_kind op, uint32_t mask, uint64_t value, int arg, int width) {
	fiber *f = static_cast<fiber *>(self);
	block_run *b = cur;
	if (b->L->aborted()) fiber_abandon(f);
	uint32_t w = f->linear >> 5;
	warp_state &ws = b->warps[w];
	mask &= ws.present; // lanes past the end of a partial warp are absent
	if (!(mask >> f->lane & 1)) fail_here("warp collective whose mask leaves out the calling lane");
	if (mask & ws.exited) fail_here("warp collective names a lane that has exited");
	if (width <= 0 || width > 32 || (width & (width - 1)) != 0) fail_here("shuffle width is not a power of two up to 32");
	f->op = op;
	f->mask = mask;
	f->value = value;
	f->arg = arg;
	f->width = width;
	f->state = st_warp;
	ws.pending |= 1u << f->lane;
#if FD_EMU_TSAN
	__tsan_release(&f->tsan); // this lane's history, for the completing lane
#endif
	try_complete(b, w, mask);
	if (f->state != st_run) {
		f->spun = 0;
		to_scheduler(f);
	}
#if FD_EMU_TSAN
	__tsan_acquire(&ws.coll_sync[f->coll_slot]);
#endif
	return f->result;
}

FD_EMU_RT static void fiber_exit(fiber *f) {
	block_run *b = cur;
	f->state = st_done;
	b->live--;
	warp_state &ws = b->warps[f->linear >> 5];
	ws.exited |= 1u << f->lane;
	b->progress++;
	b->exited++;
	if (b->bar_arrived > 0) {
		char msg[300];
		std::snprintf(msg, sizeof msg,
		              "divergent barrier: thread %u exited while thread %u (and %u in all) waits at __syncthreads at %s:%u",
		              f->linear, b->bar_first, b->bar_arrived, b->bar_file, b->bar_line);
		b->L->fail(msg);
		b->stopped = true;
	}
	for (uint32_t l = 0; l < 32; l++) {
		if ((ws.pending >> l & 1) && (b->fibers[(f->linear & ~31u) + l].mask >> f->lane & 1)) {
			char msg[200];
			std::snprintf(msg, sizeof msg, "lane %u exited while lane %u waits for it in a warp collective", f->lane, l);
			b->L->fail(msg);
			b->stopped = true;
			break;
		}
	}
	if (b->bar_arrived > 0 && b->bar_arrived == b->live) barrier_complete(b);
#if FD_EMU_TSAN
	__tsan_release(&b->done_sync);
#endif
}

} // namespace fd_emu

extern "C" __attribute__((visibility("hidden"), noreturn)) FD_EMU_RT void fd_emu_fiber_start(fd_emu::fiber *f) {
	using namespace fd_emu;
	block_run *b = cur;
#if FD_EMU_TSAN
	__tsan_acquire(&b->L->start_sync);
#endif
	b->L->k->thunk(b->L->args, b->L->offsets);
	fiber_exit(f);
	to_scheduler(f);
	__builtin_trap();
}

namespace fd_emu {

// A worker: one OS thread that runs blocks, keeping its fibers' stacks.
struct worker {
	std::thread th;
	std::mutex mu;
	std::condition_variable cv;
	launch *job = nullptr;
	uint32_t job_block = 0;
	bool quit = false;
	fiber *fibers = nullptr;
	uint32_t cap = 0;
	void *stacks = nullptr;
	size_t stacks_len = 0;
	warp_state *warps = nullptr;
	unsigned char *smem = nullptr;
	size_t smem_cap = 0;
	worker *next_idle = nullptr;
};

struct pool {
	std::mutex mu;
	worker *idle = nullptr;
	worker *all[4096];
	int nall = 0;
};
inline pool the_pool;

// Fiber stacks of a worker lie in one mapping (a mapping per stack would
// run into vm.max_map_count with tens of thousands of CUDA threads); the
// lowest page of the mapping is a guard, and each stack's lowest word a
// canary checked after every block.
static constexpr uint64_t stack_canary = 0xfd5eed5eedc0ffeeull;

FD_EMU_RT static bool ensure_fibers(worker *w, uint32_t n, char *err, size_t errlen) {
	if (n <= w->cap) return true;
	size_t sz = stack_bytes();
	size_t len = (size_t)n * sz + 4096;
	void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED) {
		std::snprintf(err, errlen, "emulator: cannot map %u fiber stacks of %zu KiB", n, sz >> 10);
		return false;
	}
	mprotect(p, 4096, PROT_NONE);
	fiber *nf = new fiber[n]();
	warp_state *nw = new warp_state[(n + 31) / 32]();
	for (uint32_t i = 0; i < n; i++) {
		nf[i].stack = static_cast<unsigned char *>(p) + 4096 + (size_t)i * sz;
		nf[i].stack_size = sz;
		nf[i].tsan = i < w->cap ? w->fibers[i].tsan : nullptr;
#if FD_EMU_TSAN
		if (i >= w->cap) nf[i].tsan = __tsan_create_fiber(0);
#endif
	}
	if (w->stacks) munmap(w->stacks, w->stacks_len);
	w->stacks = p;
	w->stacks_len = len;
	delete[] w->fibers;
	delete[] w->warps;
	w->fibers = nf;
	w->warps = nw;
	w->cap = n;
	return true;
}

FD_EMU_RT static void backoff(unsigned idle) {
	if (idle < 4) return;
	if (idle < 16) {
		sched_yield();
		return;
	}
	unsigned us = 1u << (idle - 16 < 8 ? idle - 16 : 8);
	struct timespec ts = {0, (long)us * 1000};
	nanosleep(&ts, nullptr);
}

FD_EMU_RT static void deadlock(block_run *b) {
	uint32_t at_bar = 0, at_warp = 0, first_warp = 0xffffffff;
	for (uint32_t i = 0; i < b->n; i++) {
		if (b->fibers[i].state == st_barrier) at_bar++;
		if (b->fibers[i].state == st_warp) {
			at_warp++;
			if (first_warp == 0xffffffff) first_warp = i;
		}
	}
	char msg[400];
	std::snprintf(msg, sizeof msg,
	              "deadlock: kernel %s, block (%u,%u,%u): %u threads wait at __syncthreads, %u in warp collectives "
	              "(first: thread %d, mask 0x%08x), %u exited",
	              b->L->k->name, b->block_idx.x, b->block_idx.y, b->block_idx.z, at_bar, at_warp,
	              first_warp == 0xffffffff ? -1 : (int)first_warp,
	              first_warp == 0xffffffff ? 0u : b->fibers[first_warp].mask, b->n - b->live);
	b->L->fail(msg);
}

FD_EMU_RT static void run_block(worker *w, launch *L, uint32_t index) {
	block_run b{};
	b.L = L;
	b.block_dim = L->block;
	b.grid_dim = L->grid;
	b.block_idx = {index % L->grid.x, (index / L->grid.x) % L->grid.y, index / (L->grid.x * L->grid.y)};
	b.threads = L->block.x * L->block.y * L->block.z;
	b.n = b.live = b.threads;
	char err[200];
	if (!ensure_fibers(w, b.n, err, sizeof err)) {
		L->fail(err);
		return;
	}
	if (L->smem > w->smem_cap) {
		std::free(w->smem);
		w->smem = static_cast<unsigned char *>(std::aligned_alloc(64, (L->smem + 63) & ~(size_t)63));
		w->smem_cap = L->smem;
	}
	b.dyn_smem = w->smem;
	b.fibers = w->fibers;
	b.warps = w->warps;
	b.nwarps = (b.n + 31) / 32;
	for (uint32_t i = 0; i < b.nwarps; i++) {
		b.warps[i] = warp_state{};
		uint32_t lanes = b.n - i * 32 < 32 ? b.n - i * 32 : 32;
		b.warps[i].present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
	}
	for (uint32_t i = 0; i < b.n; i++) {
		fiber &f = b.fibers[i];
		f.thread_idx = {i % L->block.x, (i / L->block.x) % L->block.y, i / (L->block.x * L->block.y)};
		f.linear = i;
		f.lane = i & 31;
		f.blk = &b;
		f.state = st_run;
		f.mask = 0;
		f.seen_pos = 0;
		for (int j = 0; j < 4; j++) f.seen_addr[j] = nullptr;
		*reinterpret_cast<uint64_t *>(f.stack) = stack_canary;
		fiber_reset(&f);
	}
	cur = &b;
#if FD_EMU_TSAN
	b.sched_tsan = __tsan_get_current_fiber();
	__tsan_release(&L->start_sync);
#endif
	unsigned idle = 0;
	// Chaos mode runs each round's fibers in a fresh random order.
	uint32_t *order = nullptr;
	if (L->chaos != 0) {
		b.rng = L->chaos ^ ((uint64_t)index << 32) ^ ((uint64_t)L->serial << 12) ^ (uint64_t)(uintptr_t)L;
		order = new uint32_t[b.n];
		for (uint32_t i = 0; i < b.n; i++) order[i] = i;
	}
	while (b.live > 0 && !b.stopped) {
		if (L->aborted()) break;
		uint64_t p0 = b.progress;
		bool ran = false, all_spun = true;
		if (order != nullptr)
			for (uint32_t i = b.n - 1; i > 0; i--) std::swap(order[i], order[chaos_next(&b.rng) % (i + 1)]);
		for (uint32_t k = 0; k < b.n && !b.stopped; k++) {
			const uint32_t i = order != nullptr ? order[k] : k;
			fiber &f = b.fibers[i];
			if (f.state != st_run) continue;
			ran = true;
			f.spun = 0;
			to_fiber(&b, &f);
			if (!f.spun) all_spun = false;
		}
		self = nullptr;
		if (b.stopped) break;
		if (!ran && b.live > 0) {
			deadlock(&b);
			break;
		}
		if (b.progress == p0 && all_spun) backoff(++idle);
		else idle = 0;
	}
	delete[] order;
	if (b.live > 0 && !b.stopped && L->aborted() && L->err[0] == 0) L->fail("launch aborted");
	for (uint32_t i = 0; i < b.n; i++) {
		if (*reinterpret_cast<uint64_t *>(b.fibers[i].stack) != stack_canary) {
			char msg[200];
			std::snprintf(msg, sizeof msg, "a thread of block (%u,%u,%u) overflowed its %zu KiB stack (FERRY_EMU_STACK_KB)",
			              b.block_idx.x, b.block_idx.y, b.block_idx.z, b.fibers[i].stack_size >> 10);
			L->fail(msg);
			break;
		}
	}
	cur = nullptr;
	self = nullptr;
#if FD_EMU_TSAN
	__tsan_acquire(&b.done_sync);
#endif
}

static void worker_main(worker *w) {
	std::unique_lock<std::mutex> g(w->mu);
	for (;;) {
		w->cv.wait(g, [w] { return w->job != nullptr || w->quit; });
		if (w->quit) return;
		launch *L = w->job;
		uint32_t index = w->job_block;
		w->job = nullptr;
		g.unlock();
		run_block(w, L, index);
		{
			std::lock_guard<std::mutex> lg(the_pool.mu);
			w->next_idle = the_pool.idle;
			the_pool.idle = w;
		}
		{
			// Notify under the lock: the launcher destroys L as soon as
			// it sees the last block done.
			std::lock_guard<std::mutex> lg(L->mu);
			L->blocks_done++;
			L->cv.notify_all();
		}
		g.lock();
	}
}

static worker *take_worker() {
	std::lock_guard<std::mutex> g(the_pool.mu);
	if (worker *w = the_pool.idle) {
		the_pool.idle = w->next_idle;
		return w;
	}
	if (the_pool.nall >= (int)(sizeof the_pool.all / sizeof the_pool.all[0])) return nullptr;
	worker *w = new worker;
	w->th = std::thread(worker_main, w);
	the_pool.all[the_pool.nall++] = w;
	return w;
}

} // namespace fd_emu

// ---- C API ----

// FD_EMU_KERNELS(...) lists the module's kernels (the generated part of
// the translation unit): FD_EMU_KERNEL(name, launch-bounds...).
namespace fd_emu {
template <class T>
inline T load_arg(const unsigned char *p) {
	T v;
	std::memcpy(&v, p, sizeof(T));
	return v;
}
template <auto F, class... A, size_t... I>
inline void call_kernel(void (*)(A...), const unsigned char *args, const uint32_t *offs, std::index_sequence<I...>) {
	F(load_arg<std::remove_cvref_t<A>>(args + offs[I])...);
}
template <auto F>
void thunk(const unsigned char *args, const uint32_t *offs) {
	[]<class... A>(void (*f)(A...), const unsigned char *a, const uint32_t *o) {
		call_kernel<F>(f, a, o, std::index_sequence_for<A...>{});
	}(F, args, offs);
}
template <class... A>
constexpr int param_count(void (*)(A...)) {
	return sizeof...(A);
}
template <auto F>
struct param_sizes;
template <class... A, void (*F)(A...)>
struct param_sizes<F> {
	static constexpr uint32_t v[sizeof...(A) + 1] = {(uint32_t)sizeof(std::remove_cvref_t<A>)..., 0};
};
constexpr int first_bound(int threads = 0, int = 0, int = 0) { return threads; }
} // namespace fd_emu

#define FD_EMU_KERNEL(name, ...) \
	{#name, &fd_emu::thunk<&name>, fd_emu::param_count(&name), fd_emu::param_sizes<&name>::v, fd_emu::first_bound(__VA_ARGS__)}

extern const fd_emu::kernel_entry fd_emu_kernel_table[];
extern const int fd_emu_kernel_table_len;

extern "C" {

__attribute__((visibility("default"))) int fd_emu_kernel_count() { return fd_emu_kernel_table_len; }

// fd_emu_kernel_info: name, parameter count, sizes (up to max), bounds.
__attribute__((visibility("default"))) const char *fd_emu_kernel_info(int i, int *nparams, uint32_t *sizes, int max,
                                                                      int *max_threads) {
	if (i < 0 || i >= fd_emu_kernel_table_len) return nullptr;
	const fd_emu::kernel_entry &k = fd_emu_kernel_table[i];
	*nparams = k.nparams;
	for (int j = 0; j < k.nparams && j < max; j++) sizes[j] = k.sizes[j];
	*max_threads = k.max_threads;
	return k.name;
}

// fd_emu_launch runs kernel i to completion (every block on its own
// worker thread) and returns 0, or -1 with a message in err. *cancel
// (may be null) aborts the launch at the fibers' next yield point.
__attribute__((visibility("default"))) int fd_emu_launch(int i, const uint32_t *grid, const uint32_t *block,
                                                         uint32_t smem, const unsigned char *args,
                                                         const uint32_t *offsets, const volatile int *cancel,
                                                         void *scope, uint32_t device, char *err, int errlen) {
	using namespace fd_emu;
	if (i < 0 || i >= fd_emu_kernel_table_len) {
		std::snprintf(err, errlen, "no kernel %d", i);
		return -1;
	}
	launch L;
	L.k = &fd_emu_kernel_table[i];
	L.grid = dim3(grid[0], grid[1], grid[2]);
	L.block = dim3(block[0], block[1], block[2]);
	L.smem = smem;
	L.args = args;
	L.offsets = offsets;
	L.cancel = cancel;
	L.chaos = 0;
	if (const char *c = std::getenv("FERRY_EMU_CHAOS")) L.chaos = std::strtoull(c, nullptr, 0);
	L.scope = static_cast<scope_table *>(scope);
	L.device = device;
	L.serial = L.start_seq = 0;
	if (L.scope != nullptr) scope_begin(&L);
	uint32_t nblocks = grid[0] * grid[1] * grid[2];
	for (uint32_t b = 0; b < nblocks; b++) {
		worker *w = take_worker();
		if (w == nullptr) {
			L.fail("emulator: too many blocks in flight (every block needs its own OS thread)");
			std::unique_lock<std::mutex> g(L.mu);
			L.cv.wait(g, [&] { return L.blocks_done == b; });
			if (L.scope != nullptr) scope_end(&L);
			std::snprintf(err, errlen, "%s", L.err);
			return -1;
		}
		{
			std::lock_guard<std::mutex> g(w->mu);
			w->job = &L;
			w->job_block = b;
		}
		w->cv.notify_one();
	}
	std::unique_lock<std::mutex> g(L.mu);
	L.cv.wait(g, [&] { return L.blocks_done == nblocks; });
	if (L.scope != nullptr) scope_end(&L);
	if (L.err[0] != 0) {
		std::snprintf(err, errlen, "%s", L.err);
		return -1;
	}
	return 0;
}

// fd_emu_scope_table_size is the size of the zeroed memory to pass to
// every launch as its scope table (one per process), to check scopes.
__attribute__((visibility("default"))) size_t fd_emu_scope_table_size() { return sizeof(fd_emu::scope_table); }

// fd_emu_shutdown stops the workers (before the module is unloaded).
__attribute__((visibility("default"))) void fd_emu_shutdown() {
	using namespace fd_emu;
	std::lock_guard<std::mutex> g(the_pool.mu);
	for (int i = 0; i < the_pool.nall; i++) {
		worker *w = the_pool.all[i];
		{
			std::lock_guard<std::mutex> lg(w->mu);
			w->quit = true;
		}
		w->cv.notify_one();
		w->th.join();
		if (w->stacks) munmap(w->stacks, w->stacks_len);
		delete[] w->fibers;
		delete[] w->warps;
		std::free(w->smem);
		delete w;
	}
	the_pool.nall = 0;
	the_pool.idle = nullptr;
}

} // extern "C"

#endif // FD_EMU_RUNTIME_H
