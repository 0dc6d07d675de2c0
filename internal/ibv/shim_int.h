//go:build cgo

/* Declarations shared by the C files of the shim; not part of its API. */
#ifndef FERRY_IBV_SHIM_INT_H
#define FERRY_IBV_SHIM_INT_H

#include "shim.h"

#define WRID(kind, idx) (((uint64_t)(kind) << FY_KIND_SHIFT) | (uint64_t)(idx))
#define WRID_KIND(w) ((int)((w) >> FY_KIND_SHIFT))
#define WRID_IDX(w) ((uint32_t)((w) & 0xffffffffu))
#define CHAIN_MAX 16

uint8_t *fy_ud_recv_buf(fy_dom *d, uint32_t i);
uint8_t *fy_ud_send_buf(fy_dom *d, uint32_t i);
int fy_post_ud_recv(fy_dom *d, uint32_t i);
void fy_post_imm_recvs(fy_dom *d, uint32_t n);
#endif
