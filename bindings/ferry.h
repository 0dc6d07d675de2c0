/*
 * ferry.h: the C ABI of ferry's TransferEngine (libferry.so).
 *
 * ferry moves bytes between registered memory regions with one-sided RDMA
 * writes that carry a 32-bit immediate. The receiver learns that data has
 * arrived by counting immediates, never from transport ordering. This header
 * lets any language drive the engine: C and C++ directly, everything else
 * through its foreign-function interface (see examples/loopback.py).
 *
 * Build:   make bindings    (writes bin/libferry.so and bin/ferry.h), or
 *          go build -buildmode=c-shared -o libferry.so \
 *            -ldflags=-extldflags=-Wl,--version-script=$PWD/bindings/libferry.map \
 *            ./bindings
 * Link:    cc app.c -I<dir of ferry.h> -L<dir of libferry.so> -lferry
 *
 * The library contains the Go runtime, which starts its own threads when
 * the library is loaded. As with any threaded library, a process that has
 * opened an engine must not fork() unless the child only calls exec.
 *
 * OBJECTS AND HANDLES
 *   Every object is named by an opaque 64-bit handle. Handles are numbers
 *   from a table inside the library, never pointers: a stale, released or
 *   made-up handle is detected and refused with FERRY_E_BAD_HANDLE (or
 *   FERRY_E_UNKNOWN_REGION for regions) instead of crashing. Handles are
 *   never reused within a process. 0 is never a valid handle.
 *
 * ERRORS
 *   Functions return int: FERRY_OK (0) on success, a negative FERRY_E_* code
 *   on failure. After a failure, ferry_last_error() returns the message of
 *   the failure on the calling thread (the text is per thread, like errno;
 *   successful calls leave it as it was). No function aborts the process on
 *   bad input.
 *
 * THREADS
 *   Every function may be called from any thread, concurrently, unless its
 *   comment says otherwise. Callbacks (ferry_expect_imm, ferry_on_imm,
 *   ferry_recv_bouncing, ferry_callback_new) run on a thread the library
 *   owns: the engine's dispatcher, one per engine, which runs that
 *   engine's callbacks one at a time, in order (it is not the thread that
 *   submitted, and not always the same OS thread from one call to the
 *   next). A callback must return quickly (it delays every other callback
 *   of its engine, never the network) and may call any ferry function
 *   except ferry_engine_close on its own engine. Once ferry_engine_close
 *   returned, none of that engine's callbacks runs again.
 *
 * MEMORY
 *   Memory given to the NIC must not be moved or freed while it is
 *   registered: use ferry_host_alloc (whose free refuses registered
 *   memory), or any C memory (malloc, mmap) that outlives its
 *   registration. Arrays and bytes passed to the library (pages, targets,
 *   destinations, messages, descriptor bytes) are copied before the call
 *   returns; pointers the library hands to callbacks are valid only during
 *   the call.
 *
 * TIMEOUTS
 *   Every blocking call takes timeout_ms >= 0 (0 polls once). There is no
 *   "wait forever": pass a large value if you mean it.
 *
 * FERRY_NO_PROTOTYPES hides the function declarations. Only the library's
 * own sources define it: cgo declares the same functions without the const
 * qualifiers, and C rejects the two as conflicting. Programs never need it.
 */
#ifndef FERRY_H
#define FERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- version */

/* The ABI version this header describes: major << 16 | minor << 8 | patch.
 * A library with the same major version is compatible; a higher minor
 * version only adds functions and appends fields to structs that carry a
 * struct_size. */
#define FERRY_VERSION_MAJOR 1
#define FERRY_VERSION_MINOR 6
#define FERRY_VERSION_PATCH 0
#define FERRY_VERSION                                                          \
	((FERRY_VERSION_MAJOR << 16) | (FERRY_VERSION_MINOR << 8) |            \
	 FERRY_VERSION_PATCH)

/* ------------------------------------------------------------- error codes */

#define FERRY_OK 0
#define FERRY_E_INVALID (-1)          /* bad argument, refused before anything was posted */
#define FERRY_E_CLOSED (-2)           /* the engine is closed or closing */
#define FERRY_E_UNKNOWN_REGION (-3)   /* region unregistered, of another engine, or unknown */
#define FERRY_E_OUT_OF_BOUNDS (-4)    /* a local or remote range outside its region */
#define FERRY_E_NOT_SUPPORTED (-5)    /* this machine, build or provider lacks a feature */
#define FERRY_E_TIMEOUT (-6)          /* a wait's timeout passed, or a protocol deadline */
#define FERRY_E_PROVIDER (-7)         /* the NIC library reported an error */
#define FERRY_E_NIC_MISMATCH (-8)     /* descriptor or peer list wider than any group (4 NICs) */
#define FERRY_E_BAD_ENCODING (-9)     /* descriptor or address bytes that do not decode */
#define FERRY_E_NO_TRANSPORT (-10)    /* transport "auto" found neither EFA nor verbs */
#define FERRY_E_UNKNOWN_PROVIDER (-11)/* no provider serves the named transport */
#define FERRY_E_BUSY (-12)            /* transfer handle already in use; memory still registered */
#define FERRY_E_TOO_LARGE (-13)       /* a message larger than the send buffers */
#define FERRY_E_REMOVED (-14)         /* the immediate counter was removed or replaced */
#define FERRY_E_BAD_HANDLE (-15)      /* a handle that is 0, released, or of another kind */
#define FERRY_E_BUFFER_TOO_SMALL (-16)/* output buffer too small; the needed size is reported */
#define FERRY_E_RENDEZVOUS (-17)      /* bootstrap: refused, or out of protocol */
#define FERRY_E_PEER_LOST (-18)       /* a peer or rank died, closed, or its connection is gone */
#define FERRY_E_QUEUE_FULL (-19)      /* back-pressure: the worker's queue stayed full until the deadline */
#define FERRY_E_ABANDONED (-20)       /* close gave up on a stuck worker: do not free its memory */
#define FERRY_E_NO_MEMORY (-21)       /* the system refused memory (mmap, memfd, a limit) */
/* All-to-all (1.2): */
#define FERRY_E_CALL_ORDER (-22)      /* a2a call out of its cycle; nothing changed */
#define FERRY_E_BROKEN (-23)          /* a2a context broken by an earlier failure: set_active or close */
#define FERRY_E_EXPERT_OVERFLOW (-24) /* batched layout: an expert got more tokens than max_tokens_per_expert */
/* Directory (1.3): */
#define FERRY_E_NOT_FOUND (-25)       /* no directory entry or region under that name */
#define FERRY_E_EXISTS (-26)          /* a live publication already holds the engine name */
#define FERRY_E_UNAVAILABLE (-27)     /* the directory's server cannot be reached */
/* Stale descriptors (1.3): a kind of FERRY_E_PEER_LOST, returned instead of
 * it when the peer's engine is known to be gone for good or replaced (its
 * address carries an incarnation no longer live there): fetch a fresh
 * descriptor from the engine now at that address. */
#define FERRY_E_STALE_DESCRIPTOR (-28)
#define FERRY_E_INTERNAL (-99)        /* anything else (a bug): see the message */

#ifndef FERRY_NO_PROTOTYPES
/* Returns a static, human-readable name for a code ("FERRY_E_CLOSED").
 * Never NULL. Thread-safe. */
const char *ferry_strerror(int code);

/* Copies the message of the calling thread's last failure into buf
 * (NUL-terminated, truncated to len - 1 bytes) and returns the message's
 * full length, like snprintf. buf may be NULL when len is 0. Returns 0 when
 * this thread has seen no failure. Thread-safe. */
size_t ferry_last_error(char *buf, size_t len);

/* Returns the library's FERRY_VERSION. Compare its major version with the
 * header's before using anything else. */
uint32_t ferry_version(void);

/* Returns the library version as static text, "1.0.0". Never NULL. */
const char *ferry_version_string(void);

/* The number of live handles of every kind in this process: a leak check
 * for tests (it is back to its starting value once everything made was
 * freed or closed). */
int ferry_live_handles(uint64_t *count);

/* Every transport name this library knows and the provider serving it, as
 * "name\tprovider\n" lines sorted by name ("shm\tlibfabric", "verbs\tverbs",
 * ...): the names ferry_config.transport accepts besides "auto", the same
 * table as the Go tools print. NUL-terminated; same size rules as
 * ferry_engine_address_hex. */
int ferry_transports(char *buf, size_t cap, size_t *len);
#endif

/* ------------------------------------------------------------------ handles */

typedef uint64_t ferry_engine_t;     /* an open engine */
typedef uint64_t ferry_region_t;     /* memory registered with an engine */
typedef uint64_t ferry_descriptor_t; /* what a peer needs to write into a region */
typedef uint64_t ferry_transfer_t;   /* a reusable wait handle for one transfer at a time */
typedef uint64_t ferry_counter_t;    /* a callback-free count of finished transfers */
typedef uint64_t ferry_imm_counter_t;/* a credit counter of one immediate value */
typedef uint64_t ferry_group_t;      /* this process's place in a bootstrap group */
typedef uint64_t ferry_callback_t;   /* a C function run when a transfer ends */
/* How a submitted transfer reports its end: a ferry_transfer_t, a
 * ferry_counter_t, a ferry_callback_t, or 0 for nothing (failures still
 * count in the stats). */
typedef uint64_t ferry_completion_t;

/* ------------------------------------------------------------------- engine */

#define FERRY_POLL_ADAPTIVE 0 /* spin, then yield, then sleep: the default */
#define FERRY_POLL_SPIN 1     /* never stop polling: one busy core per worker */

#define FERRY_LOG_DEFAULT 0 /* same as FERRY_LOG_WARN */
#define FERRY_LOG_DEBUG 1
#define FERRY_LOG_INFO 2
#define FERRY_LOG_WARN 3
#define FERRY_LOG_ERROR 4
#define FERRY_LOG_NONE 5

/* Engine settings. Initialise with ferry_config_init, then set fields: the
 * struct_size field lets later versions append fields without breaking
 * programs built against this header. Zero means "the default" everywhere. */
typedef struct ferry_config {
	uint32_t struct_size;      /* sizeof(ferry_config), set by ferry_config_init */
	int32_t nics;              /* NIC domains for the host group, 1 to 4 (default 1) */
	const char *transport;     /* "auto" (NULL), "efa", "verbs", "tcp;ofi_rxm",
	                              "shm", "ipc" (ferry's shared memory between
	                              processes of one host), or the in-process
	                              "mem" and "null" */
	const char *node;          /* pin the provider to an address or interface
	                              ("127.0.0.1" for loopback tests); NULL: any */
	int32_t poll;              /* FERRY_POLL_ADAPTIVE or FERRY_POLL_SPIN */
	int32_t queue_depth;       /* in-flight operations per domain (default 1024) */
	int32_t send_buffers;      /* ferry_send buffer pool: count (default 64) */
	int32_t send_buffer_size;  /* and size in bytes (default 65536) */
	int32_t handshake_timeout_ms; /* connection setup bound (default 10000) */
	int32_t log_level;         /* FERRY_LOG_*: engine logs go to stderr */
	/* Failure semantics (appended in 1.1; zero keeps each default): */
	int32_t max_pending;          /* transfers a worker holds before submits wait
	                                 for room, then fail FERRY_E_QUEUE_FULL
	                                 (default 16384) */
	int64_t request_timeout_ms;   /* deadline of every transfer: past it, it fails
	                                 FERRY_E_TIMEOUT (default 30000; negative: none) */
	int64_t liveness_interval_ms; /* peer checks and heartbeats (default 500;
	                                 negative: only provider-reported errors) */
	int64_t stuck_timeout_ms;     /* a worker stuck this long in one provider call
	                                 is abandoned (default 10000; negative: never) */
	/* GPU groups (appended in 1.2): */
	const int32_t *gpus;          /* CUDA ordinals (the driver's): one group per
	                                 GPU with nics NICs (0 with TOPOLOGY: all
	                                 its nearest), so ferry_register_gpu can
	                                 register that GPU's memory; NULL: the host
	                                 group only. Copied. Needs the CUDA driver. */
	int32_t gpu_count;            /* entries of gpus */
	int32_t reserved0;            /* zero */
	int32_t gpu_placement;        /* FERRY_GPU_PLACE_*: how GPU groups get NICs */
	int32_t reserved1;            /* zero */
} ferry_config;

/* ferry_config.gpu_placement. TOPOLOGY reads the machine (PCI tree, the
 * CUDA driver's GPU list): each GPU's group takes its nearest NICs and
 * pins its worker to a core near it, and the engine has only GPU groups
 * (host memory registers with the first one). FIRST_NICS skips the
 * topology: a host group of nics NICs, then one group per GPU with the
 * transport's first nics NICs (machines whose PCI topology is hidden,
 * such as some VMs, and tests). */
#define FERRY_GPU_PLACE_TOPOLOGY 0
#define FERRY_GPU_PLACE_FIRST_NICS 1

#ifndef FERRY_NO_PROTOTYPES
/* Zeroes the size bytes at cfg and sets struct_size to size (never more
 * than this library's sizeof(ferry_config)). Call it through
 * ferry_config_init, which passes the caller's own sizeof: a program
 * built against an older, shorter ferry_config keeps working with a newer
 * library, and a newer one with an older library. */
void ferry_config_init_size(ferry_config *cfg, size_t size);

/* Zeroes *cfg and sets struct_size: ferry_config_init_size with the size
 * of the ferry_config this program was compiled with. (The exported
 * function of the same name, for programs built against the 1.0 header,
 * initialises only the 1.0 fields.) */
void ferry_config_init(ferry_config *cfg);
#define ferry_config_init(cfg) ferry_config_init_size((cfg), sizeof *(cfg))

/* Opens an engine: chooses the transport, starts its worker threads (one
 * per group, each owning its NICs) and its dispatcher. On success *out is
 * the engine handle. The strings in cfg are copied. Errors:
 * FERRY_E_INVALID, FERRY_E_NOT_SUPPORTED (the transport exists but cannot
 * run here), FERRY_E_NO_TRANSPORT, FERRY_E_UNKNOWN_PROVIDER,
 * FERRY_E_PROVIDER, FERRY_E_TIMEOUT (open took longer than timeout_ms). */
int ferry_engine_open(const ferry_config *cfg, int64_t timeout_ms,
                      ferry_engine_t *out);

/* Closes the engine and releases its handle and every handle that belongs
 * to it (its regions and immediate counters; calls on them then return
 * FERRY_E_BAD_HANDLE or FERRY_E_UNKNOWN_REGION). Work not yet posted fails
 * with FERRY_E_CLOSED; in-flight operations drain for up to timeout_ms;
 * memory is unregistered, bouncing receive buffers freed, NICs closed.
 * When it returns no callback of this engine runs any more, so their user
 * data may be freed. Calls racing with close on other threads fail with
 * FERRY_E_CLOSED (or FERRY_E_BAD_HANDLE once the handle is gone); waits
 * on their transfers return FERRY_E_CLOSED. Calling it from one of the engine's own callbacks returns
 * only after timeout_ms: do not. Returns FERRY_OK, or the drain's error
 * (the handle is released either way): FERRY_E_TIMEOUT when operations
 * were still in flight at the deadline (abandoned, the NICs closed), or
 * FERRY_E_ABANDONED when a worker was stuck in a NIC library call and
 * could not be stopped: close still returns by timeout_ms, but that
 * worker's NICs stay open and the memory registered through it must not
 * be freed. */
int ferry_engine_close(ferry_engine_t e, int64_t timeout_ms);

/* The engine's main address (NIC 0 of its main group): where peers send
 * and where barriers are aimed, in its binary form. Writes *len (the size
 * needed) and, when cap is large enough, the bytes; otherwise returns
 * FERRY_E_BUFFER_TOO_SMALL. At most 257 bytes. */
int ferry_engine_address(ferry_engine_t e, uint8_t *buf, size_t cap,
                         size_t *len);

/* The main address as lowercase hex text, NUL-terminated. *len (may be
 * NULL) receives the text length without the NUL; cap must exceed it. */
int ferry_engine_address_hex(ferry_engine_t e, char *buf, size_t cap,
                             size_t *len);

/* The main group's NIC count (peers' descriptors may list 1 to 4: writes are
 * striped over the target's NICs). */
int ferry_engine_nics(ferry_engine_t e, int32_t *nics);

/* A JSON description of the engine: provider, transport, the reason it was
 * chosen, poll mode, main address and every group with its domains.
 * NUL-terminated; same size rules as ferry_engine_address_hex. */
int ferry_engine_info(ferry_engine_t e, char *buf, size_t cap, size_t *len);
#endif

typedef struct ferry_stats {
	uint64_t completed;  /* transfers that succeeded */
	uint64_t failed;     /* transfers that failed */
	uint64_t unclaimed;  /* immediates held now: no counter or callback yet */
	uint64_t posted;     /* operations posted, over all NICs */
	uint64_t bytes;      /* bytes posted, over all NICs */
	uint64_t imms;       /* immediates received, over all NICs */
} ferry_stats;

#ifndef FERRY_NO_PROTOTYPES
/* A snapshot of the engine's counters. */
int ferry_engine_stats(ferry_engine_t e, ferry_stats *out);

/* ------------------------------------------------------------------- memory */

/* Maps at least size bytes of zeroed, page-aligned host memory outside any
 * garbage-collected heap, suitable for registration. *ptr receives it.
 * Release it with ferry_host_free after unregistering it. */
int ferry_host_alloc(size_t size, void **ptr);

/* Unmaps memory from ferry_host_alloc. FERRY_E_BUSY while a region still
 * covers it (unregister it, or close its engine, first); FERRY_E_INVALID
 * for a pointer ferry_host_alloc did not return. */
int ferry_host_free(void *ptr);
#endif

#define FERRY_ACCESS_LOCAL 0        /* sources of writes, receive buffers */
#define FERRY_ACCESS_REMOTE_WRITE 1 /* also writable by peers: has a descriptor */

#define FERRY_GPU_PATH_DMABUF 1       /* ferry_register_gpu: through a dma-buf fd */
#define FERRY_GPU_PATH_PEER_MEMORY 2  /* ferry_register_gpu: by device address */

#ifndef FERRY_NO_PROTOTYPES
/* Registers [addr, addr+len) of host memory with every NIC of the engine's
 * host group. The memory must stay valid until the region is unregistered
 * or the engine closed. Over "ipc", memory registered with
 * FERRY_ACCESS_REMOTE_WRITE must come from ferry_host_alloc (peers map it);
 * other memory gives FERRY_E_NOT_SUPPORTED. */
int ferry_register(ferry_engine_t e, void *addr, uint64_t len, int32_t access,
                   ferry_region_t *out);

/* (1.2) Registers [dev_ptr, dev_ptr+len) of CUDA device memory with the
 * NICs of the engine group of its GPU (open the engine with that ordinal
 * in ferry_config.gpus). Through a dma-buf of the range when the kernel
 * (Linux >= 5.12), the driver and the NIC stack allow it, else by address
 * (the provider's own CUDA support: libfabric FI_HMEM, nvidia-peermem).
 * *path (may be NULL) receives FERRY_GPU_PATH_DMABUF or
 * FERRY_GPU_PATH_PEER_MEMORY. Errors: FERRY_E_INVALID (0 or wrapping
 * range, memory the CUDA driver does not know as device memory of one
 * GPU), FERRY_E_NOT_SUPPORTED (no CUDA driver, no group for that GPU, a
 * provider without GPU memory support; the message says which). Release it
 * with ferry_unregister. */
int ferry_register_gpu(ferry_engine_t e, uint64_t dev_ptr, uint64_t len,
                       int32_t access, ferry_region_t *out, int32_t *path);

/* (1.2) FERRY_OK when memory of CUDA device ordinal can be registered
 * through dma-buf here, else FERRY_E_NOT_SUPPORTED with what is missing
 * (kernel, driver, device) in ferry_last_error. */
int ferry_gpu_dmabuf_supported(int32_t ordinal);

/* Unregisters a region and releases its handle. Operations already
 * submitted with it finish first. A second call returns
 * FERRY_E_UNKNOWN_REGION. */
int ferry_unregister(ferry_region_t r);

/* A new descriptor handle for a FERRY_ACCESS_REMOTE_WRITE region
 * (FERRY_E_INVALID for a local-only one). Free it with
 * ferry_descriptor_free. */
int ferry_region_descriptor(ferry_region_t r, ferry_descriptor_t *out);

/* --------------------------------------------------------------- descriptors */

/* A descriptor is the remote-usable description of a region: base, length
 * and one (NIC address, key) per NIC. Send its bytes or hex to the peer
 * out of band; the peer turns them back into a handle. Descriptor handles
 * belong to no engine and are immutable: share them between threads. */

/* The versioned binary form. Size rules as ferry_engine_address. */
int ferry_descriptor_to_bytes(ferry_descriptor_t d, uint8_t *buf, size_t cap,
                              size_t *len);

/* Decodes the binary form (FERRY_E_BAD_ENCODING for truncated, trailing
 * or unknown-version input). */
int ferry_descriptor_from_bytes(const uint8_t *buf, size_t len,
                                ferry_descriptor_t *out);

/* The hex text form, NUL-terminated. Size rules as ferry_engine_address_hex. */
int ferry_descriptor_to_hex(ferry_descriptor_t d, char *buf, size_t cap,
                            size_t *len);

/* Decodes the hex text form (NUL-terminated). */
int ferry_descriptor_from_hex(const char *hex, ferry_descriptor_t *out);

/* The region's base address in its owner, its length and its NIC count.
 * Any output pointer may be NULL. */
int ferry_descriptor_info(ferry_descriptor_t d, uint64_t *base,
                          uint64_t *length, int32_t *nics);

/* Releases a descriptor handle. Transfers already submitted with it are
 * not affected (they hold a copy). */
int ferry_descriptor_free(ferry_descriptor_t d);

/* ---------------------------------------------------------------- completion */

/* A transfer handle: submit with it as the completion, then wait. One
 * transfer at a time: submitting it again before the wait returned its
 * result fails with FERRY_E_BUSY. Safe for one submitting and one waiting
 * thread. */
int ferry_transfer_new(ferry_transfer_t *out);

/* Waits for the transfer's end and returns its result: FERRY_OK, or the
 * code of its error (FERRY_E_PROVIDER, FERRY_E_CLOSED, ...; the message is
 * in ferry_last_error). FERRY_E_TIMEOUT when timeout_ms passed first: the
 * transfer still runs and a later wait collects it. */
int ferry_transfer_wait(ferry_transfer_t t, int64_t timeout_ms);

/* Releases a transfer handle. A transfer still running with it completes
 * into nothing. */
int ferry_transfer_free(ferry_transfer_t t);

/* A transfer counter: the callback-free path. Every transfer submitted
 * with it adds 1 to done when it ends; a failed one also adds 1 to errors
 * (so a waiter counting done never hangs on a failure). Workers update it
 * directly; share it between any number of transfers and threads. */
int ferry_counter_new(ferry_counter_t *out);

/* Reads the counts (either pointer may be NULL). Never blocks. */
int ferry_counter_read(ferry_counter_t c, int64_t *done, int64_t *errors);

/* Waits until done >= n, or FERRY_E_TIMEOUT after timeout_ms. */
int ferry_counter_wait(ferry_counter_t c, int64_t n, int64_t timeout_ms);

/* Releases a counter handle. Transfers still running with it are not
 * affected; their counts are lost. */
int ferry_counter_free(ferry_counter_t c);
#endif

/* Called once per transfer submitted with the callback, with FERRY_OK or
 * the transfer's error code, on the engine's dispatcher thread. Suits
 * event loops (signal an eventfd, resolve a future). */
typedef void (*ferry_done_fn)(void *user_data, int code);

#ifndef FERRY_NO_PROTOTYPES
/* Wraps fn and user_data as a completion that any number of transfers,
 * on any engines, may use at once. */
int ferry_callback_new(ferry_done_fn fn, void *user_data, ferry_callback_t *out);

/* Releases the handle. Transfers already submitted with it still call fn
 * when they end: keep user_data valid until they have (or until their
 * engines closed). */
int ferry_callback_free(ferry_callback_t cb);
#endif

/* ------------------------------------------------------------------- writes */

#define FERRY_ROUTE_SHARDED 0     /* split over `value` NICs (0: all) */
#define FERRY_ROUTE_PINNED 1      /* everything through NIC `value` */
#define FERRY_ROUTE_SHARD_BYTES 2 /* scatter only: split every target's bytes over all NICs */

/* How a request uses the group's NICs. A zeroed ferry_route (or NULL where
 * a pointer is taken) is the default: sharded over every NIC; for
 * scatter, targets split into contiguous blocks per NIC (a scatter's
 * FERRY_ROUTE_SHARDED takes value 0 only; FERRY_ROUTE_SHARD_BYTES ignores
 * value). Imm writes and barriers use FERRY_ROUTE_PINNED or the default
 * (round-robin for an imm write, destinations in blocks per NIC for a
 * barrier). A bad kind or NIC index is FERRY_E_INVALID. */
typedef struct ferry_route {
	int32_t kind;  /* FERRY_ROUTE_* */
	int32_t value; /* shard count, or the pinned NIC index */
} ferry_route;

/* One contiguous write of length bytes from src+src_offset to
 * dst+dst_offset. Sharded over n NICs it posts exactly n writes (empty
 * shards are zero-byte writes) and, with has_imm, the receiver sees n
 * immediates; pinned it posts one. */
typedef struct ferry_single_write {
	ferry_region_t src;
	uint64_t src_offset;
	uint64_t length;
	ferry_descriptor_t dst;
	uint64_t dst_offset;
	uint32_t imm;
	int32_t has_imm;
	ferry_route route;
} ferry_single_write;

/* pages independent writes of length bytes: page i goes from
 * src + src_offset + src_stride * src_pages[i] to
 * dst + dst_offset + dst_stride * dst_pages[i]. Pages are split into
 * contiguous ranges per NIC; with has_imm the receiver sees one immediate
 * per page. The page arrays are copied. */
typedef struct ferry_paged_write {
	ferry_region_t src;
	const uint32_t *src_pages;
	uint64_t src_stride;
	uint64_t src_offset;
	ferry_descriptor_t dst;
	const uint32_t *dst_pages;
	uint64_t dst_stride;
	uint64_t dst_offset;
	size_t pages;
	uint64_t length;
	uint32_t imm;
	int32_t has_imm;
} ferry_paged_write;

/* One destination range of a scatter. */
typedef struct ferry_scatter_target {
	ferry_descriptor_t dst;
	uint64_t length;
	uint64_t src_offset;
	uint64_t dst_offset;
} ferry_scatter_target;

/* Ranges of one source region to many peers. Each target's receiver sees
 * one immediate (FERRY_ROUTE_SHARDED, FERRY_ROUTE_PINNED) or one per NIC
 * (FERRY_ROUTE_SHARD_BYTES). The target array is copied. */
typedef struct ferry_scatter_write {
	ferry_region_t src;
	const ferry_scatter_target *targets;
	size_t count;
	uint32_t imm;
	int32_t has_imm;
	ferry_route route;
} ferry_scatter_write;

/* The submit functions validate everything (region, bounds against the
 * descriptor, NIC counts, routes) in the caller's thread and return an
 * error without posting anything on bad input. On FERRY_OK the request is
 * queued to the engine's worker: they never wait for the network, only,
 * briefly, for room in the worker's queue. The result arrives through c. */

#ifndef FERRY_NO_PROTOTYPES
int ferry_submit_single(ferry_engine_t e, const ferry_single_write *w,
                        ferry_completion_t c);
int ferry_submit_paged(ferry_engine_t e, const ferry_paged_write *w,
                       ferry_completion_t c);
int ferry_submit_scatter(ferry_engine_t e, const ferry_scatter_write *w,
                         ferry_completion_t c);

/* A zero-byte write carrying only imm to dst: the receiver sees exactly one
 * immediate. route may be NULL (the next NIC round-robin) or pinned. */
int ferry_submit_imm(ferry_engine_t e, uint32_t imm, ferry_descriptor_t dst,
                     const ferry_route *route, ferry_completion_t c);

/* One zero-byte write with imm to each of the count destinations: each
 * receiver sees one immediate per destination naming it. */
int ferry_submit_barrier(ferry_engine_t e, uint32_t imm,
                         const ferry_descriptor_t *dsts, size_t count,
                         const ferry_route *route, ferry_completion_t c);

/* ------------------------------------------------------- immediate counters */

/* Makes imm a credit counter on the engine (replacing any counter for imm,
 * whose waiters then get FERRY_E_REMOVED). Arrivals are counted even
 * before anyone waits. */
int ferry_imm_counter_new(ferry_engine_t e, uint32_t imm,
                          ferry_imm_counter_t *out);

/* Takes n credits: returns once n immediates have arrived since the
 * credits last taken (including ones that arrived before this call), or
 * FERRY_E_TIMEOUT after timeout_ms with the credits given back (nothing is
 * lost). One waiting thread at a time per counter. */
int ferry_imm_counter_wait(ferry_imm_counter_t c, int64_t n,
                           int64_t timeout_ms);

/* Arrivals minus credits taken (negative while a wait is short). */
int ferry_imm_counter_count(ferry_imm_counter_t c, int64_t *count);

/* Stops counting (if this counter still owns its immediate) and releases
 * the handle. Later arrivals of imm go to the ferry_on_imm callbacks. */
int ferry_imm_counter_free(ferry_imm_counter_t c);
#endif

/* Called each time `expected` immediates of imm arrived. Return nonzero to
 * keep counting (the counter was already reset: it fires again after
 * another `expected` arrivals), zero to remove it; immediates counted
 * since are then handed to the ferry_on_imm callbacks. Runs on the
 * engine's dispatcher thread. */
typedef int (*ferry_expect_fn)(void *user_data, uint32_t imm);

#ifndef FERRY_NO_PROTOTYPES
/* Makes imm an expected-count counter calling fn(user_data, imm)
 * (expected >= 1, fn not NULL, else FERRY_E_INVALID). A
 * counter already registered for imm is replaced; what it had counted is
 * written to *prev_count (may be NULL). Immediates that arrived while imm
 * had no counter went to the ferry_on_imm callbacks or, with none added,
 * were held: the new counter starts with those. user_data must stay
 * valid until the counter is removed or the engine closed. */
int ferry_expect_imm(ferry_engine_t e, uint32_t imm, uint32_t expected,
                     ferry_expect_fn fn, void *user_data, int64_t *prev_count);

/* Removes the counter of imm, whatever its kind, and writes what it had
 * counted to *prev_count (may be NULL). FERRY_E_INVALID when imm has no
 * counter. */
int ferry_remove_imm(ferry_engine_t e, uint32_t imm, int64_t *prev_count);
#endif

/* Receives every immediate that no counter claims. */
typedef void (*ferry_imm_fn)(void *user_data, uint32_t imm);

#ifndef FERRY_NO_PROTOTYPES
/* Adds fn to the callbacks for unclaimed immediates; they run on the
 * dispatcher thread in the order they were added, until the engine
 * closes. There is no removal. */
int ferry_on_imm(ferry_engine_t e, ferry_imm_fn fn, void *user_data);
#endif

/* ---------------------------------------------------------------- peers */

/* Told that a peer was declared lost: addr is its endpoint address (binary
 * form, valid during the call only). Runs on the dispatcher thread. */
typedef void (*ferry_peer_lost_fn)(void *user_data, const uint8_t *addr, size_t addr_len);

#ifndef FERRY_NO_PROTOTYPES
/* Adds fn to the callbacks run each time a peer is declared lost (once
 * per loss, per NIC address), until the engine closes. There is no
 * removal. */
int ferry_on_peer_lost(ferry_engine_t e, ferry_peer_lost_fn fn, void *user_data);

/* Has the engine check the liveness of the peer whose main address is
 * addr (binary form) even when nothing is sent to it, every
 * liveness_interval_ms, so a receiver waiting for its immediates learns
 * that it died (ferry_peer_status, ferry_on_peer_lost). */
int ferry_watch_peer(ferry_engine_t e, const uint8_t *addr, size_t addr_len);

/* FERRY_OK while the peer at addr is not known to be lost, else
 * FERRY_E_PEER_LOST with the reason in ferry_last_error. */
int ferry_peer_status(ferry_engine_t e, const uint8_t *addr, size_t addr_len);
#endif

/* ------------------------------------------------------------ send / receive */

/* The side channel: small two-sided messages over NIC 0 of the main group.
 * Receives the bytes of one message; data is valid only during the call. */
typedef void (*ferry_recv_fn)(void *user_data, const uint8_t *data,
                              size_t len);

/* Reports a receive that failed (FERRY_E_CLOSED at engine close); the
 * message text is valid only during the call. */
typedef void (*ferry_error_fn)(void *user_data, int code, const char *message);

#ifndef FERRY_NO_PROTOTYPES
/* Copies len bytes into a registered send buffer and sends them to the
 * engine whose main address (binary form) is addr. Waits up to timeout_ms
 * for a free buffer; the send itself completes through c. len must not
 * exceed the send buffer size (FERRY_E_TOO_LARGE). */
int ferry_send(ferry_engine_t e, const uint8_t *addr, size_t addr_len,
               const void *data, size_t len, ferry_completion_t c,
               int64_t timeout_ms);

/* Posts count receives of size bytes into buffers the engine owns. Each
 * message is copied out and handed to on_data on the dispatcher thread;
 * the buffer is re-posted at once. on_error (may be NULL) gets failures
 * and FERRY_E_CLOSED at close. The buffers are freed at engine close. */
int ferry_recv_bouncing(ferry_engine_t e, int32_t count, int32_t size,
                        ferry_recv_fn on_data, ferry_error_fn on_error,
                        void *user_data);
#endif

/* ----------------------------------------------------------------- bootstrap */

/* Before the first write, the processes of a job must exchange main
 * addresses and descriptors. A group does that over a small TCP store run
 * by rank 0. Every rank must issue the same sequence of collectives; a
 * failed collective breaks the group (later calls return the same error).
 * One thread per group at a time. */

#ifndef FERRY_NO_PROTOTYPES
/* Joins the job described by the environment: torchrun (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI, Slurm, overridden by
 * FERRY_RANK, FERRY_WORLD_SIZE, FERRY_LOCAL_RANK, FERRY_MASTER (host:port);
 * every rank presents FERRY_JOB_TOKEN, and the master must be a loopback
 * address unless FERRY_ALLOW_REMOTE=1. With nothing set it is rank 0 of a
 * world of 1. Returns once every rank joined; FERRY_E_TIMEOUT names the
 * missing ranks in its message. */
int ferry_group_join(int64_t timeout_ms, ferry_group_t *out);

/* (1.2) ferry_group_join with the settings given as count "NAME=value"
 * strings (the names above) instead of the process environment, which is
 * then not read at all: for callers bridging another launcher, and for
 * languages whose changes to the environment the library cannot see. */
int ferry_group_join_env(const char *const *vars, size_t count,
                         int64_t timeout_ms, ferry_group_t *out);

/* This process's rank and the world size (either may be NULL). */
int ferry_group_rank(ferry_group_t g, int32_t *rank, int32_t *world_size);

/* Every rank contributes len <= slot bytes; out (world_size * slot bytes)
 * receives rank i's bytes at out + i * slot and lens[i] (world_size
 * entries) their length. FERRY_E_BUFFER_TOO_SMALL when a rank sent more
 * than slot (its lens entry says how much; the others are filled in). */
int ferry_group_all_gather(ferry_group_t g, const void *data, size_t len,
                           void *out, size_t slot, size_t *lens,
                           int64_t timeout_ms);

/* Rank root's *len bytes of buf reach every rank: on the others buf
 * (cap bytes) receives them and *len their length. */
int ferry_group_broadcast(ferry_group_t g, int32_t root, void *buf,
                          size_t cap, size_t *len, int64_t timeout_ms);

/* Returns when every rank has called it. */
int ferry_group_barrier(ferry_group_t g, int64_t timeout_ms);

/* Leaves the job and releases the handle. Not collective: call
 * ferry_group_barrier first when other ranks may still need rank 0's
 * store. */
int ferry_group_close(ferry_group_t g);
#endif

/* ------------------------------------------------------- all-to-all (1.2) */

/* Mixture-of-Experts dispatch and combine for expert parallelism (Go
 * package a2a): every rank sends each of its tokens to the ranks owning
 * the token's K experts (dispatch), the experts run, and their outputs
 * travel back and are summed with the gate weights (combine). Rank r owns
 * experts [r*L, (r+1)*L), L = ceil(num_experts / world_size).
 *
 * Every rank of the world creates one context with the same config (apart
 * from its rank), then runs iterations of dispatch and combine. Each of
 * the two may run as one call (do_send and do_recv both 1) or as a send
 * half and a receive half, with other work between them; the cycle is
 * always dispatch send, dispatch recv, combine send, combine recv. A call
 * out of that order is FERRY_E_CALL_ORDER and changes nothing; a bad
 * argument is FERRY_E_INVALID naming the argument and changes nothing; a
 * failure of the exchange itself (a lost rank, a timeout) breaks the
 * context (later calls: FERRY_E_BROKEN) until ferry_a2a_set_active or
 * ferry_a2a_close. One thread at a time per context (FERRY_E_BUSY).
 *
 * Arrays are passed as ferry_tensor: a pointer with the size in bytes of
 * the memory behind it, a dtype, a shape and element strides, as torch,
 * numpy and DLPack describe them, and every one is checked against the
 * context's shapes before anything moves. */

typedef uint64_t ferry_a2a_t; /* an all-to-all context */

/* Element types of ferry_tensor and of the a2a config. FP8 is one opaque
 * byte (e4m3 or e5m2: the exchange never looks inside); a UINT8 tensor is
 * accepted wherever FP8 is expected (frameworks without a float8 type pass
 * fp8 data as a uint8 view). */
#define FERRY_DTYPE_FP8 1
#define FERRY_DTYPE_BF16 2
#define FERRY_DTYPE_FP16 3
#define FERRY_DTYPE_FP32 4
#define FERRY_DTYPE_INT32 5
#define FERRY_DTYPE_UINT32 6
#define FERRY_DTYPE_UINT8 7

#define FERRY_MEMORY_HOST 0 /* CPU memory */
#define FERRY_MEMORY_CUDA 1 /* CUDA device memory: staged through host memory */

#define FERRY_TENSOR_MAX_DIMS 4

/* A view of caller memory. data points at element [0, 0, ...]; nbytes is
 * how many bytes from data on the caller owns (every element the shape
 * and strides reach must lie inside, else FERRY_E_INVALID). strides are in
 * elements, one per dimension, none negative; all zero means packed
 * (row-major). Unused shape and stride entries are ignored. */
typedef struct ferry_tensor {
	void *data;
	uint64_t nbytes;
	int32_t dtype;  /* FERRY_DTYPE_* */
	int32_t ndim;   /* 0 (a scalar) to FERRY_TENSOR_MAX_DIMS */
	int64_t shape[FERRY_TENSOR_MAX_DIMS];
	int64_t strides[FERRY_TENSOR_MAX_DIMS];
	int32_t memory; /* FERRY_MEMORY_* */
	int32_t device; /* CUDA ordinal for FERRY_MEMORY_CUDA, else 0 */
} ferry_tensor;

#define FERRY_A2A_BACKEND_HOST 0     /* Go loops over host memory ("host") */
#define FERRY_A2A_BACKEND_CUDA 1     /* ferry's CUDA kernels on this rank's GPU ("cuda") */
#define FERRY_A2A_BACKEND_CUDA_EMU 2 /* the same kernels compiled with a C++20
                                        compiler at run time and run on the CPU
                                        ("cuda-emu"; needs g++ or $CXX) */

#define FERRY_A2A_NO_PRIVATE_WINDOW (-1) /* max_private_tokens: no window at all */

/* Context settings. Initialise with ferry_a2a_config_init, then set
 * fields; zero means the default where one is named. Every rank passes the
 * same values apart from rank. */
typedef struct ferry_a2a_config {
	uint32_t struct_size;  /* set by ferry_a2a_config_init */
	int32_t backend;       /* FERRY_A2A_BACKEND_* */
	/* The world: a bootstrap group (its ranks, in order, are the world;
	 * the context all-gathers its descriptors over it, so every rank of
	 * the group creates its context at the same time) ... */
	ferry_group_t group;
	/* ... or, with group 0, explicit ranks of one process: world_size
	 * contexts created by threads of this process with the same
	 * world_name meet in memory (tests, single-host emulation). With a
	 * group, rank and world_size must be 0 or equal the group's. */
	int32_t rank;
	int32_t world_size;
	const char *world_name; /* copied */
	/* The engine moving bytes between domains. 0: the context opens its
	 * own (with transport, node and nics_per_rank) and closes it. An
	 * engine passed in stays the caller's and must outlive the context;
	 * contexts sharing one need disjoint imm_base ranges. */
	ferry_engine_t engine;
	const char *transport;  /* own engine: as ferry_config.transport (NULL: "auto") */
	const char *node;       /* own engine: as ferry_config.node */

	int32_t nvlink_size;    /* S: consecutive ranks sharing memory, divides world_size (0: 1) */
	int32_t replica_size;   /* D: consecutive ranks holding the same tokens
	                           (pplx dp_size), divides nvlink_size (0: 1) */
	int32_t nics_per_rank;  /* NICs each rank aggregates, 1 to 4 (0: 1) */

	int32_t max_tokens;         /* T: most tokens per rank per dispatch */
	int32_t hidden;             /* H: elements per token */
	int32_t hidden_scales;      /* Hs: float32 scales per token (0: none) */
	int32_t num_experts;        /* E */
	int32_t experts_per_token;  /* K (top-k); a token's K experts must differ */
	int32_t dispatch_dtype;     /* FP8, BF16, FP16 or FP32: dispatched tokens */
	int32_t combine_dtype;      /* BF16, FP16 or FP32: expert outputs and results */
	int32_t expert_padding;     /* flat layout: each expert's rows start at a
	                               multiple of this (0: 1) */
	int32_t max_private_tokens; /* M: rows per (source group, receiver) sent
	                               before the counts are known (0: default,
	                               FERRY_A2A_NO_PRIVATE_WINDOW: none) */
	int32_t max_tokens_per_expert; /* 0: flat layout (expert outputs [rows, H]);
	                                  B > 0: batched layout [L, B, H], and a
	                                  count above B fails the dispatch with
	                                  FERRY_E_EXPERT_OVERFLOW on every rank */
	uint32_t imm_base;          /* first immediate value used (0: 0x80000000) */
	int32_t cuda_device;        /* backend cuda: the GPU ordinal (-1: the group's
	                               local rank, or rank, modulo the GPU count) */
	int64_t timeout_ms;         /* bound on every wait for other ranks, inside
	                               the calls and in the workers (0: 30000) */
} ferry_a2a_config;

/* Sizes derived from a config (ferry_a2a_info). */
typedef struct ferry_a2a_info {
	uint32_t struct_size;      /* the caller's sizeof(ferry_a2a_info), set before the call */
	int32_t rank;
	int32_t world_size;
	int32_t local_experts;     /* L */
	int32_t output_rows;       /* rows of out_expert_x / expert_y (flat: the
	                              smallest legal count; batched: L * B) */
	int32_t max_tokens_per_expert; /* B, 0 in the flat layout */
	int32_t token_bytes;       /* H * size(dispatch_dtype) */
	int32_t combine_bytes;     /* H * size(combine_dtype) */
	int32_t private_tokens;    /* M in use */
	int32_t backend;           /* FERRY_A2A_BACKEND_* */
	uint32_t generation;       /* membership generation (ferry_a2a_set_active) */
	int32_t reserved0;
} ferry_a2a_info;

#ifndef FERRY_NO_PROTOTYPES
/* Zeroes size bytes at cfg and sets struct_size (the same rules as
 * ferry_config_init_size); use the macro. */
void ferry_a2a_config_init_size(ferry_a2a_config *cfg, size_t size);
#define ferry_a2a_config_init(cfg) ferry_a2a_config_init_size((cfg), sizeof *(cfg))

/* Creates this rank's context: validates the config (FERRY_E_INVALID
 * naming the field), opens the engine if none is given, allocates and
 * registers the buffers, shares memory with the ranks of its NVLink
 * domain and all-gathers descriptors with the world. Collective: every
 * rank calls it, within timeout_ms of each other. Errors also:
 * FERRY_E_NOT_SUPPORTED (backend cuda without a GPU, cuda-emu without a
 * C++20 compiler: the message names what is missing), FERRY_E_TIMEOUT. */
int ferry_a2a_create(const ferry_a2a_config *cfg, int64_t timeout_ms,
                     ferry_a2a_t *out);

/* The context's derived sizes. info->struct_size must be set. */
int ferry_a2a_get_info(ferry_a2a_t a, ferry_a2a_info *info);

/* Dispatch, the arguments of pplx-garden's dispatch (m_max = dp_x.shape[0]
 * <= max_tokens; m = *bound_m when bound_m is not NULL, else m_max):
 *   out_expert_num_tokens int32 [L]: copies received per local expert
 *   out_expert_x   dispatch dtype, flat [R, H] with R >= output_rows, or
 *                  batched [L, B, H]; unit inner stride
 *   out_expert_x_scale float32 [R, Hs] / [L, B, Hs], any strides; NULL
 *                  iff hidden_scales is 0
 *   dp_x           dispatch dtype [m_max, H], unit inner stride
 *   dp_x_scale     float32 [m_max, Hs], any strides; NULL iff Hs is 0
 *   indices        int32 or uint32 [m_max, K], packed; ids in [0, E)
 *   weights        float32 [m_max, K] (checked, not used; may be NULL)
 *   bound_m        int32 scalar ([] or [1]) holding m, or NULL
 * Flat layout: local expert i's rows start at a multiple of
 * expert_padding, experts in order; batched: at row i*B of [L*B] rows.
 * do_send runs the send half (reads dp_x, dp_x_scale, indices, bound_m),
 * do_recv the receive half (waits, writes the outputs); at least one.
 * The tensors a half does not use may be NULL. Every backend works on
 * host memory: a FERRY_MEMORY_CUDA tensor (any backend; device = its CUDA
 * ordinal) is copied to host memory before the call and, when the call
 * writes it, back after the call succeeded (the CUDA driver's copies:
 * correct, not fast; without a driver FERRY_E_NOT_SUPPORTED names it).
 * The copies are ordered after work on the legacy default stream only:
 * synchronize any other stream that writes the inputs first, and read
 * the outputs after the call returns.
 * stream must be 0: the calls return when their half is done (launches
 * on a caller's stream, CUDA graphs and a device-side bound_m are in the
 * Go API, package a2a/cudabackend, not in this version). */
int ferry_a2a_dispatch(ferry_a2a_t a, const ferry_tensor *out_expert_num_tokens,
                       const ferry_tensor *out_expert_x,
                       const ferry_tensor *out_expert_x_scale,
                       const ferry_tensor *dp_x, const ferry_tensor *dp_x_scale,
                       const ferry_tensor *indices, const ferry_tensor *weights,
                       const ferry_tensor *bound_m, int32_t do_send,
                       int32_t do_recv, uint64_t stream, int64_t timeout_ms);

/* Combine, the arguments of pplx-garden's combine:
 *   out_tokens  combine dtype [m, H] (m as in the dispatch), unit inner stride
 *   indices     as passed to the dispatch (shape checked; the dispatch's
 *               copy is what is used)
 *   weights     float32 [m, K], packed: the gate weights applied
 *   expert_y    combine dtype, the row layout of the dispatch's
 *               out_expert_x ([R, H] or [L, B, H])
 *   bound_m     as in the dispatch (checked against its m), or NULL
 * out_tokens[t] = (accumulate ? out_tokens[t] : 0) + sum_k weights[t,k] *
 * y(t,k), summed in fp32, rounded once. do_send sends expert_y back;
 * do_recv waits and reduces into out_tokens. */
int ferry_a2a_combine(ferry_a2a_t a, const ferry_tensor *out_tokens,
                      const ferry_tensor *indices, const ferry_tensor *weights,
                      const ferry_tensor *expert_y, const ferry_tensor *bound_m,
                      int32_t do_send, int32_t do_recv, int32_t accumulate,
                      uint64_t stream, int64_t timeout_ms);

/* What the last dispatch dropped: copies of this rank's tokens routed to
 * the experts of inactive ranks (ferry_a2a_set_active) and so not sent.
 * *dropped (may be NULL) gets the total; per_expert (n entries, may be
 * NULL with n 0) gets num_experts counts (n must be at least that). */
int ferry_a2a_dropped(ferry_a2a_t a, int64_t *dropped, int32_t *per_expert,
                      size_t n);

/* Changes the ranks taking part from the next iteration on (the
 * active-rank mask). Collective among the active ranks, each passing the
 * same generation (larger than the context's, and different modulo 64)
 * and active[world_size] (nonzero: active; this rank must be). Allowed
 * between iterations and on a broken context, which it revives: copies
 * routed to the experts of inactive ranks are dropped (ferry_a2a_dropped)
 * and combine sums as if their weights were zero. A rank restarted as a
 * new process cannot join through this version's C API. */
int ferry_a2a_set_active(ferry_a2a_t a, uint32_t generation,
                         const uint8_t *active, size_t n, int64_t timeout_ms);

/* Releases the context (its buffers, registrations, workers and, when it
 * opened it, its engine) and its handle; later calls on it are
 * FERRY_E_BAD_HANDLE. Not collective, but peers still iterating with this
 * rank then fail. */
int ferry_a2a_close(ferry_a2a_t a);
#endif

/* -------------------------------------------------------- directory (1.3) */

/* A directory is where engines that come and go find each other (Go
 * package fabric/directory): an engine publishes its entry (a name, its
 * NIC addresses, labels such as role=prefill) and named regions (a
 * descriptor and metadata); others look them up by name or by a label
 * selector, or watch for engines joining and leaving.
 *
 * URLs:
 *   etcd://HOST:PORT[,HOST:PORT...]/PREFIX   an etcd cluster (v3 API;
 *       plain http). Entries live under a lease of ttl_ms that this
 *       process renews: a process that dies, hangs or is cut off from etcd
 *       disappears within the TTL and watchers see FERRY_DIR_LOST, while
 *       ferry_publication_close removes its entry at once
 *       (FERRY_DIR_CLOSED).
 *   mem://NAME   in-process: every handle of this process opened with the
 *       same NAME shares one directory (tests, engines of one process).
 *
 * Names (engines, regions, label and metadata keys) are 1 to 128
 * characters of [A-Za-z0-9._:-]. Labels and metadata are passed as count
 * "key=value" strings. Entries are returned as JSON text:
 *   {"name":"p0","nics":1,"addrs":["<hex>",...],"labels":{"role":"prefill"}}
 * where addrs are the NIC addresses in the hex form of
 * ferry_engine_address_hex, the main address first (decode it with
 * ferry_address_from_hex for ferry_send and the peer functions).
 * Everything read back is validated: a malformed entry a buggy or hostile
 * writer left is refused (FERRY_E_BAD_ENCODING, or FERRY_E_NIC_MISMATCH
 * for a region whose descriptor does not match its engine). Text outputs
 * follow the size rules of ferry_engine_address_hex.
 *
 * Errors: FERRY_E_INVALID names the bad argument; FERRY_E_NOT_FOUND,
 * FERRY_E_EXISTS; FERRY_E_TIMEOUT when timeout_ms passed first;
 * FERRY_E_UNAVAILABLE when the server cannot be reached; FERRY_E_CLOSED
 * after close. */

typedef uint64_t ferry_directory_t;   /* an open directory */
typedef uint64_t ferry_publication_t; /* this process's live entry of one engine */
typedef uint64_t ferry_dir_watch_t;   /* a stream of directory events */

/* ferry_dir_watch_next's event kinds. */
#define FERRY_DIR_JOINED 1   /* an engine appeared (or was there when the watch began) */
#define FERRY_DIR_UPDATED 2  /* a live engine changed its labels */
#define FERRY_DIR_LOST 3     /* an engine vanished without closing: its lease ran out */
#define FERRY_DIR_CLOSED 4   /* an engine closed its publication in order */
#define FERRY_DIR_REJECTED 5 /* a value under the prefix failed validation */

#ifndef FERRY_NO_PROTOTYPES
/* Opens the directory at url. ttl_ms is the lease of this handle's
 * publications on etcd (0: 10000; whole seconds; the server raises a TTL
 * below its minimum of about 2 s) and is ignored by mem://. Waits up to
 * timeout_ms for the server to answer. */
int ferry_directory_open(const char *url, int64_t ttl_ms, int64_t timeout_ms,
                         ferry_directory_t *out);

/* Ends the handle's watches and releases its watch and publication
 * handles. Publications not closed before stop being renewed: on etcd
 * their entries expire within the TTL (watchers see FERRY_DIR_LOST), on
 * mem:// at once, the same way. */
int ferry_directory_close(ferry_directory_t d);

/* Publishes engine e as name with count "key=value" labels (labels may be
 * NULL when count is 0). FERRY_E_EXISTS while another live publication
 * holds name. Close the publication before the engine. */
int ferry_directory_publish(ferry_directory_t d, ferry_engine_t e,
                            const char *name, const char *const *labels,
                            size_t count, int64_t timeout_ms,
                            ferry_publication_t *out);

/* Publishes (or replaces) the region name of the publication's engine:
 * the descriptor (of a region of that engine: FERRY_E_NIC_MISMATCH
 * otherwise) with count "key=value" metadata strings. */
int ferry_publication_add_region(ferry_publication_t p, const char *name,
                                 ferry_descriptor_t desc,
                                 const char *const *meta, size_t count,
                                 int64_t timeout_ms);

/* Withdraws the region name (FERRY_E_NOT_FOUND if not published). */
int ferry_publication_remove_region(ferry_publication_t p, const char *name,
                                    int64_t timeout_ms);

/* Replaces the entry's labels; watchers see FERRY_DIR_UPDATED. */
int ferry_publication_set_labels(ferry_publication_t p,
                                 const char *const *labels, size_t count,
                                 int64_t timeout_ms);

/* Removes the entry and its regions in order (watchers see
 * FERRY_DIR_CLOSED, not FERRY_DIR_LOST) and releases the handle, which is
 * released even when the removal fails. */
int ferry_publication_close(ferry_publication_t p, int64_t timeout_ms);

/* The entry of engine name, as JSON text. */
int ferry_directory_lookup(ferry_directory_t d, const char *name,
                           int64_t timeout_ms, char *buf, size_t cap,
                           size_t *len);

/* The live entries whose labels match selector, a comma list of
 * key=value, key!=value or key (present); "" or NULL matches all. A JSON
 * array of entries sorted by name. Malformed entries are left out. */
int ferry_directory_select(ferry_directory_t d, const char *selector,
                           int64_t timeout_ms, char *buf, size_t cap,
                           size_t *len);

/* Waits until at least n live entries match selector, then writes them
 * as ferry_directory_select does: how a process started late finds the
 * engines it needs. FERRY_E_TIMEOUT (with the count found) when fewer
 * than n matched within timeout_ms. */
int ferry_directory_wait_for(ferry_directory_t d, const char *selector,
                             int32_t n, int64_t timeout_ms, char *buf,
                             size_t cap, size_t *len);

/* The region name of engine: a new descriptor handle in *desc (free it
 * with ferry_descriptor_free) and its metadata as a JSON object in buf.
 * When buf is too small, FERRY_E_BUFFER_TOO_SMALL and no handle is made. */
int ferry_directory_region(ferry_directory_t d, const char *engine,
                           const char *name, int64_t timeout_ms,
                           ferry_descriptor_t *desc, char *buf, size_t cap,
                           size_t *len);

/* Starts a watch: the first events are a FERRY_DIR_JOINED per live
 * engine, then every change, in order, held for ferry_dir_watch_next
 * until read. Starting reads the live entries: FERRY_E_TIMEOUT when that
 * took longer than timeout_ms. */
int ferry_directory_watch(ferry_directory_t d, int64_t timeout_ms,
                          ferry_dir_watch_t *out);

/* The next event: *kind gets its FERRY_DIR_* kind and buf the JSON text
 * {"kind":"lost","entry":{...}} ("error":"..." for FERRY_DIR_REJECTED).
 * FERRY_E_TIMEOUT when none came within timeout_ms (0 polls);
 * FERRY_E_CLOSED once the directory was closed and every event read. An
 * event that does not fit buf stays first in line. One reader at a time
 * per watch (FERRY_E_BUSY for a second thread). */
int ferry_dir_watch_next(ferry_dir_watch_t w, int64_t timeout_ms,
                         int32_t *kind, char *buf, size_t cap, size_t *len);

/* Ends the watch and releases its handle. */
int ferry_dir_watch_close(ferry_dir_watch_t w);

/* Ties engine e's peer liveness to the directory: when an engine leaves
 * (FERRY_DIR_LOST or FERRY_DIR_CLOSED), every address it published is
 * declared lost in e, so transfers queued to it fail with
 * FERRY_E_PEER_LOST at once and ferry_on_peer_lost callbacks run, without
 * waiting for e's own checks. Lasts until the directory handle closes;
 * starting it is a watch's start, bounded by timeout_ms. */
int ferry_directory_lose_on_leave(ferry_directory_t d, ferry_engine_t e,
                                  int64_t timeout_ms);

/* Decodes an address's hex text form (an entry's addrs) into the binary
 * form the peer functions and ferry_send take. Size rules as
 * ferry_engine_address. */
int ferry_address_from_hex(const char *hex, uint8_t *buf, size_t cap,
                           size_t *len);
#endif

/* ---------------------------------------------------------- connect (1.4) */

#ifndef FERRY_NO_PROTOTYPES
/* Warms count peers up before the first transfer to them: addrs[i] (binary
 * form, addr_lens[i] bytes: a main address or any NIC address of a
 * descriptor) is resolved on every NIC of e, and the provider's connection
 * setup is completed where it has one (tcp;ofi_rxm's connection, verbs'
 * RC handshake, ipc's control socket), so the first transfer sets nothing
 * up. FERRY_E_PEER_LOST for a peer that is not there (no endpoint, a
 * refused or reset connection, an exited process), FERRY_E_TIMEOUT when
 * timeout_ms passed first (a tcp;ofi_rxm peer that refuses connections
 * shows only after the handshake timeout, 10 s by default). Connecting a
 * connected peer again changes nothing. */
int ferry_connect(ferry_engine_t e, const uint8_t *const *addrs,
                  const size_t *addr_lens, size_t count, int64_t timeout_ms);
#endif

/* ------------------------------------------ leases and notifications (1.5) */

/* Immediate values from FERRY_LEASE_BASE up belong to leases: a lease is a
 * run of consecutive values the engine hands out for one request, plus a
 * mailbox for the request's notification. Once the lease is retired, its
 * values' immediates are dropped at arrival (counted: see
 * ferry_engine_drops), never credited to a later lease, whose values
 * differ even when it reuses the same slots. Immediates that arrive for a
 * live lease before a counter is registered are held for it; they never
 * go to ferry_on_imm callbacks. Counters for values of this range that are
 * not leased now are refused with FERRY_E_NOT_LEASED: pick values by hand
 * below FERRY_LEASE_BASE only. */
#define FERRY_LEASE_BASE 3221225472u /* 0xC0000000 */
#define FERRY_MAX_LEASE_IMMS 4096
/* The largest notification payload. */
#define FERRY_MAX_NOTIFY_PAYLOAD 4096

#define FERRY_E_NOT_LEASED (-29)       /* a lease-range value not leased now (retired, or picked by hand) */
#define FERRY_E_NOTIFY_TOO_LARGE (-30) /* a notification payload over FERRY_MAX_NOTIFY_PAYLOAD */
#define FERRY_E_LEASES_EXHAUSTED (-31) /* no free run of lease values, or no free mailbox */

typedef uint64_t ferry_lease_t;

#ifndef FERRY_NO_PROTOTYPES
/* Leases n (1 to FERRY_MAX_LEASE_IMMS) consecutive immediate values on e:
 * *first gets the first; writes carry first + i, and counters for them are
 * made as for any value (ferry_imm_counter_new, ferry_expect_imm).
 * FERRY_E_LEASES_EXHAUSTED when no run of n + 1 free slots is left (65536
 * slots in all). The handle belongs to e: its close releases it. */
int ferry_lease_imms(ferry_engine_t e, uint32_t n, ferry_lease_t *out,
                     uint32_t *first);

/* Retires the lease and releases its handle: its counters are removed
 * (their waits end with FERRY_E_REMOVED), immediates held for it are
 * dropped, immediates and notifications that arrive for it later are
 * dropped and counted, and its mailbox is given back. */
int ferry_lease_retire(ferry_lease_t l);

/* The lease's mailbox in binary form, for the initiator of the request:
 * the first call allocates it (256 per engine: FERRY_E_LEASES_EXHAUSTED
 * when all are taken), later calls return the same bytes. Size rules as
 * ferry_engine_address (FERRY_E_BUFFER_TOO_SMALL reports the size; 256
 * bytes always suffice). */
int ferry_lease_mailbox(ferry_lease_t l, uint8_t *buf, size_t cap,
                        size_t *len);

/* Sends payload (len bytes, at most FERRY_MAX_NOTIFY_PAYLOAD, else
 * FERRY_E_NOTIFY_TOO_LARGE before anything is sent) to a lease's mailbox
 * (mailbox_len bytes from ferry_lease_mailbox of the target engine). The
 * payload is copied before the call returns. The target hands it over
 * (ferry_lease_wait_notification) after the writes that e reported
 * complete before this call, where a completion means delivery (verbs,
 * ipc, mem, shm, and libfabric writes through NIC 0; a tcp;ofi_rxm or efa
 * write through another NIC completes once sent): from 1.6,
 * ferry_submit_notified attaches the notification to the request itself,
 * which holds over every transport and NIC. e sends its notifications one
 * at a time, in the order of these calls, so they arrive in that order.
 * c reports when the notification was written into the mailbox. */
int ferry_notify(ferry_engine_t e, const uint8_t *mailbox, size_t mailbox_len,
                 const void *payload, size_t len, ferry_completion_t c);

/* Waits up to timeout_ms for the next notification to the lease's mailbox
 * (one the engine already received is returned at once) and copies its
 * payload to buf; *len gets its length and *seq (may be NULL) its arrival
 * number at this engine (from 1, over all leases). A payload larger than
 * cap fails with FERRY_E_BUFFER_TOO_SMALL and is lost: pass
 * FERRY_MAX_NOTIFY_PAYLOAD bytes. FERRY_E_TIMEOUT when none came,
 * FERRY_E_INVALID for a lease without a mailbox. From 1.6 a mailbox
 * queues FERRY_MAILBOX_DEPTH notifications, returned in the order they
 * were sent, and notifications that were lost (a second engine sending to
 * the same mailbox) are reported once, in their place, with
 * FERRY_E_NOTIFICATIONS_LOST (ferry_last_error says how many); the next
 * call goes on with those after them. */
int ferry_lease_wait_notification(ferry_lease_t l, int64_t timeout_ms,
                                  void *buf, size_t cap, size_t *len,
                                  uint64_t *seq);

/* The engine's drop counters: immediates dropped because their value was
 * a lease's that is not live (a retired request's late writes), and
 * notifications lost at this engine (a second engine sending to the same
 * mailbox; each is also reported by ferry_lease_wait_notification, from
 * 1.6 as FERRY_E_NOTIFICATIONS_LOST). Either pointer may be NULL. */
int ferry_engine_drops(ferry_engine_t e, uint64_t *imms_dropped,
                       uint64_t *notifications_dropped);
#endif

/* ------------------------------------------------------------ reads (1.5) */

/* RDMA READ: the initiator pulls bytes from a peer's region into one of
 * its own. The peer registers the region with FERRY_ACCESS_REMOTE_READ
 * (ferry_register's access is a set of bits: remote write does not imply
 * remote read; FERRY_ACCESS_REMOTE_WRITE | FERRY_ACCESS_REMOTE_READ grants
 * both) and hands out its descriptor as for writes. A read delivers no
 * immediate: the peer sees nothing, and the initiator's completion says
 * the bytes are in its region. Deadlines, back-pressure, splitting and
 * lost peers work as for writes (FERRY_E_PEER_LOST, FERRY_E_TIMEOUT). A
 * region registered without the bit fails the read with
 * FERRY_E_NOT_READABLE on mem, ipc and verbs; libfabric's tcp and shm do
 * not check it (1.17 reads it; 2.1's shm leaves the read to its
 * deadline): register readable only what peers may read. Over "ipc", a
 * readable region must come from ferry_host_alloc, as a writable one. */

#define FERRY_ACCESS_REMOTE_READ 2 /* readable by peers: has a descriptor */

#define FERRY_E_NOT_READABLE (-32) /* a read of a region registered without FERRY_ACCESS_REMOTE_READ */

/* length bytes from src (a peer's region) at src_offset into the local
 * region dst at dst_offset. Sharded over n NICs it posts n reads, one per
 * NIC; pinned, one. */
typedef struct ferry_single_read {
	ferry_region_t dst;
	uint64_t dst_offset;
	uint64_t length;
	ferry_descriptor_t src;
	uint64_t src_offset;
	ferry_route route;
} ferry_single_read;

/* pages independent reads of length bytes: page i comes from
 * src + src_offset + src_stride * src_pages[i] into
 * dst + dst_offset + dst_stride * dst_pages[i]. Pages are split into
 * contiguous ranges per NIC. The page arrays are copied. */
typedef struct ferry_paged_read {
	ferry_region_t dst;
	const uint32_t *dst_pages;
	uint64_t dst_stride;
	uint64_t dst_offset;
	ferry_descriptor_t src;
	const uint32_t *src_pages;
	uint64_t src_stride;
	uint64_t src_offset;
	size_t pages;
	uint64_t length;
} ferry_paged_read;

/* One remote range of a scatter read: length bytes from src at src_offset
 * into the read's local region at dst_offset. */
typedef struct ferry_scatter_source {
	ferry_descriptor_t src;
	uint64_t length;
	uint64_t src_offset;
	uint64_t dst_offset;
} ferry_scatter_source;

/* Ranges of one or more peers' regions into one local region, the scatter
 * shape turned around; route spreads the sources over the NICs as it
 * spreads a scatter write's targets (FERRY_ROUTE_SHARDED: blocks of
 * sources per NIC; FERRY_ROUTE_SHARD_BYTES: every source's bytes split
 * over all NICs; FERRY_ROUTE_PINNED). The source array is copied. */
typedef struct ferry_scatter_read {
	ferry_region_t dst;
	const ferry_scatter_source *sources;
	size_t count;
	ferry_route route;
} ferry_scatter_read;

#ifndef FERRY_NO_PROTOTYPES
/* As the write submits: everything (regions, bounds against the
 * descriptors, routes) is validated in the caller's thread, and bad input
 * returns an error with nothing posted; the result arrives through c. */
int ferry_submit_read(ferry_engine_t e, const ferry_single_read *r,
                      ferry_completion_t c);
int ferry_submit_paged_read(ferry_engine_t e, const ferry_paged_read *r,
                            ferry_completion_t c);
int ferry_submit_scatter_read(ferry_engine_t e, const ferry_scatter_read *r,
                              ferry_completion_t c);
#endif

/* Request shapes for ferry_expected_imms. */
#define FERRY_SHAPE_SINGLE 0  /* a single write routed by route */
#define FERRY_SHAPE_PAGED 1   /* a paged write of count pages */
#define FERRY_SHAPE_SCATTER 2 /* a scatter routed by route, count of its targets naming the receiver */
#define FERRY_SHAPE_IMM 3     /* an immediate-only write */
#define FERRY_SHAPE_BARRIER 4 /* a barrier, count of its destinations naming the receiver */

#ifndef FERRY_NO_PROTOTYPES
/* How many immediates a request of the given shape delivers to its
 * receiver when the writer's engine has writer_nics NICs and the
 * receiving region's descriptor lists target_nics (1 to 4 each; they need
 * not be equal: see ferry_descriptor_info for a descriptor's count): the
 * count a receiver waits for (ferry_imm_counter_wait, ferry_expect_imm)
 * to know every byte of the request landed. route (may be NULL: sharded
 * over every NIC) is the request's. The counts: imm 1; barrier and paged
 * count; single pinned 1, sharded over n NICs n, sharded over 0 (all)
 * max(writer_nics, target_nics); scatter count, or count * writer_nics
 * with FERRY_ROUTE_SHARD_BYTES. A request without has_imm delivers none
 * (do not ask). *out gets 0 for a request the submit would refuse (more
 * shards than NICs). FERRY_E_INVALID for an unknown shape or route kind,
 * NIC counts outside 1..4, a negative count, or a NULL out. */
int ferry_expected_imms(int32_t shape, const ferry_route *route,
                        int64_t count, int32_t writer_nics,
                        int32_t target_nics, int64_t *out);
#endif

/* --------------- notified requests, registration stats, huge pages (1.6) */

/* A mailbox queues FERRY_MAILBOX_DEPTH notifications its lease has not
 * taken (ferry_lease_wait_notification). A sender that many ahead waits,
 * reading the mailbox's free slots (an RDMA READ, only then), until the
 * target takes one or the request's deadline passes (FERRY_E_TIMEOUT); its
 * later notifications wait behind it, keeping their order. One engine
 * sends to a mailbox: another engine's notifications to it collide and are
 * lost, reported as FERRY_E_NOTIFICATIONS_LOST, never dropped silently. */
#define FERRY_MAILBOX_DEPTH 8

#define FERRY_E_NOTIFICATIONS_LOST (-33) /* notifications to this lease were lost; reported in their place */

/* One notification of a request: payload (len bytes, at most
 * FERRY_MAX_NOTIFY_PAYLOAD) for the mailbox of mailbox_len bytes from
 * ferry_lease_mailbox at the target. Both are copied at submit. */
typedef struct ferry_notification {
	const uint8_t *mailbox;
	size_t mailbox_len;
	const void *payload;
	size_t len;
} ferry_notification;

/* Where an engine's groups register (ferry_registration_stats.modes). */
#define FERRY_REGISTER_ON_WORKER 0      /* on the group's worker, one NIC after another */
#define FERRY_REGISTER_NICS_IN_PARALLEL 1 /* beside the worker, NICs at once, the worker waiting */
#define FERRY_REGISTER_BESIDE 2         /* beside the worker, which keeps transferring */

/* The engine's registrations: live region handles, the provider
 * registrations behind them (fewer when handles share one: ranges inside
 * a live registration are cache hits), the range cache's hits and misses,
 * and where each group registers (groups entries of modes, in
 * ferry_engine_info's group order; at most 16 are written). */
typedef struct ferry_registration_stats {
	uint32_t struct_size; /* the caller's sizeof(ferry_registration_stats), set before the call */
	uint32_t groups;
	uint64_t handles;
	uint64_t registrations;
	uint64_t hits;
	uint64_t misses;
	int32_t modes[16]; /* FERRY_REGISTER_* */
} ferry_registration_stats;

/* Huge-page policies of ferry_host_alloc_with. */
#define FERRY_HUGE_PAGES_AUTO 0     /* huge pages when the system has enough free and the size is at least one (rounding up adds at most an eighth); else base pages */
#define FERRY_HUGE_PAGES_NEVER 1    /* base pages, as ferry_host_alloc */
#define FERRY_HUGE_PAGES_REQUIRED 2 /* huge pages or an error: FERRY_E_NOT_SUPPORTED (no hugetlbfs) or FERRY_E_NO_MEMORY (too few free) */

#ifndef FERRY_NO_PROTOTYPES
/* Submits request with notifications attached: request is a
 * ferry_single_write, ferry_paged_write or ferry_scatter_write, as shape
 * (FERRY_SHAPE_SINGLE, FERRY_SHAPE_PAGED, FERRY_SHAPE_SCATTER) says, and
 * notes holds count notifications: exactly 1 for a single or paged write;
 * 1 or more for a scatter (one per target peer, to a lease's mailbox
 * there). They are sent once every write of the request completed, and
 * the request's writes complete only once visible at their target (on
 * tcp;ofi_rxm and efa they ask delivery completion), so each target hands
 * its notification over (ferry_lease_wait_notification) after all of the
 * request's bytes are in place there, over every transport and NIC. The
 * request, the notifications and their payloads are validated and copied
 * in the caller's thread (FERRY_E_NOTIFY_TOO_LARGE, FERRY_E_BAD_ENCODING
 * for a mailbox that is not one, FERRY_E_INVALID for a count the shape
 * does not take); c reports the writes and the notifications together. */
int ferry_submit_notified(ferry_engine_t e, int32_t shape, const void *request,
                          const ferry_notification *notes, size_t count,
                          ferry_completion_t c);

/* The engine's registration counts (Engine.RegistrationStats in Go).
 * out->struct_size must be set; fields past it are not written. */
int ferry_engine_registration_stats(ferry_engine_t e,
                                    ferry_registration_stats *out);

/* ferry_host_alloc with a huge-page policy (FERRY_HUGE_PAGES_*): *ptr gets
 * the memory, *page_size (may be NULL) the size of the pages backing it
 * (the base page size, or the huge page size). Huge pages make a large
 * registration cheaper (fewer pages to pin and map). Free it with
 * ferry_host_free. */
int ferry_host_alloc_with(size_t size, int32_t huge_pages, void **ptr,
                          size_t *page_size);
#endif

#ifdef __cplusplus
}
#endif

#endif /* FERRY_H */
