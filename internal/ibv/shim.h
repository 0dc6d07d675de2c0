//go:build cgo

/* Small C helpers over libibverbs for ferry's verbs provider. They exist so
 * that the Go side crosses into C once per batch (post N work requests, poll N
 * completions), keeps every ibv_* struct in C memory, and never hands a Go
 * pointer to the library for longer than one call. Policy (sizes, which GID,
 * which port, handshake) lives in Go. */
#ifndef FERRY_IBV_SHIM_H
#define FERRY_IBV_SHIM_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* wr_id layout: the kind of operation in the top byte, a slot index below.
 * Error completions leave wc.opcode undefined, so the kind must travel in
 * wr_id. Mirrored by verbs/wrid.go. */
#define FY_KIND_SHIFT 56
enum {
	FY_K_WRITE = 1,
	FY_K_SEND = 2,
	FY_K_RECV = 3,
	FY_K_IMM = 4,
	FY_K_UDRECV = 5,
	FY_K_UDSEND = 6,
	FY_K_READ = 7, /* an RDMA READ (rdma.WriteRead): reported as a write */
};

/* Event kinds, identical to fabric.EventKind. */
enum { FY_EV_WRITE = 1, FY_EV_SEND = 2, FY_EV_RECV = 3, FY_EV_IMM = 4 };

/* Layouts shared with Go (rdma.WriteOp, SendOp, RecvOp, Event). */
typedef struct {
	uint64_t local, length, local_desc, remote, remote_key, peer, context;
	uint32_t imm, flags;
} fy_write_op;
typedef struct {
	uint64_t local, length, local_desc, peer, context;
} fy_send_op;
typedef struct {
	uint64_t local, length, local_desc, context;
} fy_recv_op;
typedef struct {
	uint64_t context, length;
	uint32_t kind, imm;
	int32_t err, prov_err;
} fy_event;

/* One doorbell: ops[first, first+count) all go to the same peer. */
typedef struct {
	uint32_t first, count;
} fy_seg;

#define FY_UD_BUF 256 /* bytes per UD buffer, GRH included */
#define FY_GRH 40
#define FY_UD_MSG_MAX (FY_UD_BUF - FY_GRH)

typedef struct {
	uint32_t len, src_qp;
	uint8_t data[FY_UD_MSG_MAX];
} fy_ud_msg;

typedef struct {
	uint32_t cqe;        /* completion queue entries */
	uint32_t slots;      /* send-side operations in flight (writes + sends) */
	uint32_t recv_slots; /* user receives in flight */
	uint32_t msg_srq_wr, rma_srq_wr;
	uint32_t ud_recv, ud_send;
	uint32_t qkey;
	uint8_t port;
	uint8_t want_td; /* try a thread domain + parent domain */
} fy_config;

/* Everything one domain owns in C. Only its worker thread touches it. */
typedef struct fy_dom {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_td *td;
	struct ibv_pd *qpd; /* parent domain when td != NULL, else pd */
	struct ibv_cq *cq;
	int cq_ex;
	struct ibv_srq *msg_srq, *rma_srq;
	struct ibv_qp *ud_qp;
	struct ibv_mr *ud_mr;
	uint8_t *ud_mem;
	fy_config cfg;

	uint64_t *slot_ctx;
	uint32_t *slot_free;
	uint32_t nfree;
	uint64_t *rslot_ctx;
	uint32_t *rslot_free;
	uint32_t rnfree;
	uint32_t *udsend_free;
	uint32_t udsend_nfree;

	struct ibv_qp **msg_qp, **rma_qp;
	uint32_t npeer;

	uint32_t imm_deficit; /* zero-length receives still to re-post */
	uint64_t dropped;     /* completions with nothing to report (flushes of internal receives) */
	/* Queue pairs that reported an error completion since the last
	 * fy_take_err_qps: an RC queue pair in ERR stays there, so its peer
	 * must be connected again. */
	uint32_t err_qp[16];
	uint32_t nerr_qp;
	/* Out-parameter for the Go side: a pointer into C memory, because the
	 * address of a Go local passed to C escapes to the heap. */
	int out_n;
} fy_dom;

typedef struct {
	uint32_t state, mask, access;
	uint32_t dest_qpn, rq_psn, sq_psn, qkey;
	uint16_t pkey_index, dlid;
	uint8_t port, path_mtu, max_dest_rd_atomic, max_rd_atomic;
	uint8_t min_rnr_timer, timeout, retry_cnt, rnr_retry;
	uint8_t is_global, sgid_index, hop_limit, traffic_class, sl;
	uint8_t dgid[16];
	uint32_t flow_label;
} fy_qp_attr;

int fy_open(const char *name, const fy_config *cfg, fy_dom **out, const char **stage);
void fy_close(fy_dom *d);
int fy_ud_qpn(fy_dom *d);

int fy_set_peer(fy_dom *d, uint32_t idx, struct ibv_qp *msg, struct ibv_qp *rma);
struct ibv_qp *fy_create_rc_qp(fy_dom *d, int rma, uint32_t max_send_wr, uint32_t *qpn, int *err);
int fy_modify_qp(struct ibv_qp *qp, const fy_qp_attr *a);
int fy_destroy_qp(struct ibv_qp *qp);

struct ibv_ah *fy_create_ah(fy_dom *d, const uint8_t *gid, uint16_t dlid, int global, uint8_t sgid_index,
			    uint8_t hop_limit, int *err);
int fy_destroy_ah(struct ibv_ah *ah);
int fy_ud_send(fy_dom *d, struct ibv_ah *ah, uint32_t qpn, const uint8_t *msg, uint32_t len);

struct ibv_mr *fy_reg_mr(fy_dom *d, uint64_t addr, uint64_t len, int access, int dmabuf_fd, uint64_t dmabuf_off,
			 int *err);
int fy_dereg_mr(struct ibv_mr *mr);

int fy_post_writes(fy_dom *d, const fy_write_op *ops, const fy_seg *segs, int nseg, int *accepted);
int fy_post_sends(fy_dom *d, const fy_send_op *ops, int n, int *accepted);
int fy_post_recvs(fy_dom *d, const fy_recv_op *ops, int n, int *accepted);
int fy_poll(fy_dom *d, fy_event *ev, int maxev, fy_ud_msg *ud, int maxud, int *nud);

int fy_wc_errno(int status);
int fy_take_err_qps(fy_dom *d, uint32_t *out, int max);
#endif
