/* shim.h: the library's private C helpers (shim.c). Not installed. */
#ifndef FERRY_SHIM_H
#define FERRY_SHIM_H

#include <stddef.h>
#include <stdint.h>

#define FERRY_NO_PROTOTYPES
#include "ferry.h"

#define FERRY_HIDDEN __attribute__((visibility("hidden")))

/* Records msg (n bytes, not NUL-terminated) as the calling thread's last
 * error. */
FERRY_HIDDEN void ferryp_set_error(const char *msg, size_t n);

/* Trampolines: Go cannot call a C function pointer itself. User data
 * crosses Go as an integer so that Go never holds it as a pointer. */
FERRY_HIDDEN int ferryp_call_expect(ferry_expect_fn fn, uintptr_t ud, uint32_t imm);
FERRY_HIDDEN void ferryp_call_imm(ferry_imm_fn fn, uintptr_t ud, uint32_t imm);
FERRY_HIDDEN void ferryp_call_peer_lost(ferry_peer_lost_fn fn, uintptr_t ud, const uint8_t *addr, size_t n);
FERRY_HIDDEN void ferryp_call_recv(ferry_recv_fn fn, uintptr_t ud, const void *data, size_t n);
FERRY_HIDDEN void ferryp_call_done(ferry_done_fn fn, uintptr_t ud, int code);
FERRY_HIDDEN void ferryp_call_error(ferry_error_fn fn, uintptr_t ud, int code, const char *msg);

#endif
