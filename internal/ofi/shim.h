/*
 * C side of ferry's libfabric binding. Everything that runs per operation
 * lives here so Go crosses into C once per batch, not once per op. The
 * structs shared with Go are pointer-free and fixed-layout; the Go package
 * checks their sizes and offsets against these definitions.
 */
#ifndef FERRY_OFI_SHIM_H
#define FERRY_OFI_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

/* Same layout as rdma.WriteOp: eight 8-byte words. */
struct ferry_write_op {
	uint64_t local;
	uint64_t length;
	uint64_t local_desc;
	uint64_t remote;
	uint64_t remote_key;
	uint64_t peer;
	uint64_t context;
	uint32_t imm;
	uint32_t flags;
};

/* Same layout as fabric.SendOp. */
struct ferry_send_op {
	uint64_t local;
	uint64_t length;
	uint64_t local_desc;
	uint64_t peer;
	uint64_t context;
};

/* Same layout as fabric.RecvOp. */
struct ferry_recv_op {
	uint64_t local;
	uint64_t length;
	uint64_t local_desc;
	uint64_t context;
};

/* Same layout as rdma.Event. */
struct ferry_event {
	uint64_t context;
	uint64_t length;
	uint32_t kind;
	uint32_t imm;
	int32_t err;
	int32_t prov_errno;
};

/* fabric.WriteHasImm, fabric.WriteDelivered */
#define FERRY_WRITE_HAS_IMM 1u
#define FERRY_WRITE_DELIVERED 2u
/* The op is an RDMA READ (fi_readmsg): remote into local. */
#define FERRY_WRITE_READ 4u
/* rdma.WriteVisible: the write's completion must mean delivery where the
 * endpoint's delivered_mask includes it (providers whose completion means
 * less, see ferry_ep.delivered_mask). */
#define FERRY_WRITE_VISIBLE 8u

/* fabric.EventKind values. */
enum {
	FERRY_EV_WRITE = 1,
	FERRY_EV_SEND = 2,
	FERRY_EV_RECV = 3,
	FERRY_EV_IMM = 4,
};

/* The rules that differ between libfabric generations. */
#include "generation.h"

/* Error completions read by one poll call keep their text here until the
 * next poll; the Go side copies them out. */
#define FERRY_MAX_ERRS 16
#define FERRY_ERR_TEXT 200

struct ferry_err {
	uint64_t context;
	int32_t err;
	int32_t prov_errno;
	char text[FERRY_ERR_TEXT];
};

/* One opened endpoint and everything it needs. Allocated in C so libfabric
 * and the Go side can both hold its address. */
struct ferry_ep {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	/* FERRY_RULE_* bits for the library loaded (generation.h) */
	uint32_t rules;
	/* op flags that ask FI_DELIVERY_COMPLETE: FERRY_WRITE_DELIVERED always,
	 * FERRY_WRITE_VISIBLE where the provider completes a write once sent
	 * (ferry_ep_visible_needs_delivery) */
	uint32_t delivered_mask;
	/* error of the op a post call stopped at, 0 if none or -FI_EAGAIN */
	int last_err;
	/* error completions read by the last poll */
	int nerr;
	struct ferry_err errs[FERRY_MAX_ERRS];
};

/* Steps of ferry_open, reported when one fails. */
enum {
	FERRY_STEP_FABRIC = 1,
	FERRY_STEP_DOMAIN,
	FERRY_STEP_CQ,
	FERRY_STEP_AV,
	FERRY_STEP_EP,
	FERRY_STEP_BIND_CQ,
	FERRY_STEP_BIND_AV,
	FERRY_STEP_SETOPT,
	FERRY_STEP_ENABLE,
	FERRY_STEP_NOMEM,
};

uint32_t ferry_api_version(void);
int ferry_getinfo(const char *prov, const char *node, uint64_t caps, uint64_t mr_mode,
		  uint64_t flags, struct fi_info **out);
/* ferry_getinfo with a service (a port) for the source address too. */
int ferry_getinfo_service(const char *prov, const char *node, const char *service,
			  uint64_t caps, uint64_t mr_mode, uint64_t flags, struct fi_info **out);
struct fi_info *ferry_dupinfo(const struct fi_info *info);
int ferry_set_src_str(struct fi_info *info, const char *name);
int ferry_pci_addr(const struct fi_info *info, char *buf, size_t len);
size_t ferry_link_speed(const struct fi_info *info);

int ferry_open(struct fi_info *info, size_t cq_size, int efa_opts, struct ferry_ep **out, int *step);
int ferry_close(struct ferry_ep *e);
int ferry_getname(struct ferry_ep *e, void *buf, size_t *len);
int ferry_av_insert(struct ferry_ep *e, const void *addr, fi_addr_t *out);

int ferry_mr_reg(struct ferry_ep *e, uint64_t addr, uint64_t len, uint64_t access,
		 uint64_t requested_key, int cuda, int device, int dmabuf_fd,
		 struct fid_mr **mr, uint64_t *key, uint64_t *desc);
int ferry_mr_close(struct fid_mr *mr);

int ferry_post_writes(struct ferry_ep *e, const struct ferry_write_op *ops, int n);
int ferry_post_sends(struct ferry_ep *e, const struct ferry_send_op *ops, int n);
int ferry_post_recvs(struct ferry_ep *e, const struct ferry_recv_op *ops, int n);
int ferry_poll(struct ferry_ep *e, struct ferry_event *ev, int max);

int ferry_raw_loop(struct ferry_ep *init, struct ferry_ep *target,
		   const struct ferry_write_op *ops, int n, int iters, int warmup,
		   int64_t timeout_ns, int64_t *lat_ns, int *phase);

#ifdef FI_MR_DMABUF
#define FERRY_HAVE_DMABUF 1
#else
#define FERRY_HAVE_DMABUF 0
#endif

/* signals.c */
int ferry_signals_reset_mask(void);
void ferry_fault_for_test(void);

/* Layout of the shared structs, for the Go side's checks. */
void ferry_layout(uint64_t *out, int max);

#endif
