// The parts of the ABI that need no Go: per-thread error text, code names,
// the version, and trampolines that call the application's function
// pointers. Keeping these in C means they work even when called before the
// Go runtime has anything to say, and the error text truly follows the C
// caller's thread (a Go goroutine is not a thread).

#include <stddef.h>
#include <string.h>

// ferry.h first, with its prototypes, so the compiler checks the
// definitions below against them; shim.h then adds nothing it hides.
#include "ferry.h"
#include "shim.h"

// Messages longer than this are truncated; ferry's are one line.
#define ERR_CAP 1024

static __thread char err_text[ERR_CAP];
static __thread size_t err_len;

void ferryp_set_error(const char *msg, size_t n) {
	if (n >= ERR_CAP)
		n = ERR_CAP - 1;
	if (n > 0)
		memcpy(err_text, msg, n);
	err_text[n] = 0;
	err_len = n;
}

size_t ferry_last_error(char *buf, size_t len) {
	if (buf != NULL && len > 0) {
		size_t n = err_len < len - 1 ? err_len : len - 1;
		memcpy(buf, err_text, n);
		buf[n] = 0;
	}
	return err_len;
}

const char *ferry_strerror(int code) {
	switch (code) {
	case FERRY_OK: return "FERRY_OK";
	case FERRY_E_INVALID: return "FERRY_E_INVALID";
	case FERRY_E_CLOSED: return "FERRY_E_CLOSED";
	case FERRY_E_UNKNOWN_REGION: return "FERRY_E_UNKNOWN_REGION";
	case FERRY_E_OUT_OF_BOUNDS: return "FERRY_E_OUT_OF_BOUNDS";
	case FERRY_E_NOT_SUPPORTED: return "FERRY_E_NOT_SUPPORTED";
	case FERRY_E_TIMEOUT: return "FERRY_E_TIMEOUT";
	case FERRY_E_PROVIDER: return "FERRY_E_PROVIDER";
	case FERRY_E_NIC_MISMATCH: return "FERRY_E_NIC_MISMATCH";
	case FERRY_E_BAD_ENCODING: return "FERRY_E_BAD_ENCODING";
	case FERRY_E_NO_TRANSPORT: return "FERRY_E_NO_TRANSPORT";
	case FERRY_E_UNKNOWN_PROVIDER: return "FERRY_E_UNKNOWN_PROVIDER";
	case FERRY_E_BUSY: return "FERRY_E_BUSY";
	case FERRY_E_TOO_LARGE: return "FERRY_E_TOO_LARGE";
	case FERRY_E_REMOVED: return "FERRY_E_REMOVED";
	case FERRY_E_BAD_HANDLE: return "FERRY_E_BAD_HANDLE";
	case FERRY_E_BUFFER_TOO_SMALL: return "FERRY_E_BUFFER_TOO_SMALL";
	case FERRY_E_RENDEZVOUS: return "FERRY_E_RENDEZVOUS";
	case FERRY_E_PEER_LOST: return "FERRY_E_PEER_LOST";
	case FERRY_E_STALE_DESCRIPTOR: return "FERRY_E_STALE_DESCRIPTOR";
	case FERRY_E_NOT_LEASED: return "FERRY_E_NOT_LEASED";
	case FERRY_E_NOTIFY_TOO_LARGE: return "FERRY_E_NOTIFY_TOO_LARGE";
	case FERRY_E_LEASES_EXHAUSTED: return "FERRY_E_LEASES_EXHAUSTED";
	case FERRY_E_QUEUE_FULL: return "FERRY_E_QUEUE_FULL";
	case FERRY_E_ABANDONED: return "FERRY_E_ABANDONED";
	case FERRY_E_NO_MEMORY: return "FERRY_E_NO_MEMORY";
	case FERRY_E_CALL_ORDER: return "FERRY_E_CALL_ORDER";
	case FERRY_E_BROKEN: return "FERRY_E_BROKEN";
	case FERRY_E_EXPERT_OVERFLOW: return "FERRY_E_EXPERT_OVERFLOW";
	case FERRY_E_NOT_FOUND: return "FERRY_E_NOT_FOUND";
	case FERRY_E_EXISTS: return "FERRY_E_EXISTS";
	case FERRY_E_UNAVAILABLE: return "FERRY_E_UNAVAILABLE";
	case FERRY_E_NOT_READABLE: return "FERRY_E_NOT_READABLE";
	case FERRY_E_NOTIFICATIONS_LOST: return "FERRY_E_NOTIFICATIONS_LOST";
	case FERRY_E_INTERNAL: return "FERRY_E_INTERNAL";
	}
	return "FERRY_E_UNKNOWN_CODE";
}

#define STR2(x) #x
#define STR(x) STR2(x)

uint32_t ferry_version(void) { return FERRY_VERSION; }

const char *ferry_version_string(void) {
	return STR(FERRY_VERSION_MAJOR) "." STR(FERRY_VERSION_MINOR) "." STR(FERRY_VERSION_PATCH);
}

/* init_sized zeroes the first size bytes of a struct whose full size is
 * full and whose first field is its uint32_t struct_size, never writing
 * past either bound. */
static void init_sized(void *p, size_t size, size_t full) {
	if (p == NULL || size < sizeof(uint32_t))
		return;
	if (size > full)
		size = full;
	memset(p, 0, size);
	uint32_t n = (uint32_t)size;
	memcpy(p, &n, sizeof n);
}

void ferry_config_init_size(ferry_config *cfg, size_t size) { init_sized(cfg, size, sizeof *cfg); }

/* The 1.0 ABI's entry point: programs built against the 1.0 header pass a
 * 1.0-sized ferry_config, so it must not write past the 1.0 fields. */
#undef ferry_config_init
void ferry_config_init(ferry_config *cfg) {
	ferry_config_init_size(cfg, offsetof(ferry_config, max_pending));
}

void ferry_a2a_config_init_size(ferry_a2a_config *cfg, size_t size) { init_sized(cfg, size, sizeof *cfg); }

int ferryp_call_expect(ferry_expect_fn fn, uintptr_t ud, uint32_t imm) {
	return fn((void *)ud, imm);
}

void ferryp_call_imm(ferry_imm_fn fn, uintptr_t ud, uint32_t imm) { fn((void *)ud, imm); }
void ferryp_call_peer_lost(ferry_peer_lost_fn fn, uintptr_t ud, const uint8_t *addr, size_t n) {
	fn((void *)ud, addr, n);
}

void ferryp_call_recv(ferry_recv_fn fn, uintptr_t ud, const void *data, size_t n) {
	fn((void *)ud, (const uint8_t *)data, n);
}

void ferryp_call_done(ferry_done_fn fn, uintptr_t ud, int code) { fn((void *)ud, code); }

void ferryp_call_error(ferry_error_fn fn, uintptr_t ud, int code, const char *msg) {
	if (fn != NULL)
		fn((void *)ud, code, msg);
}
