//go:build cgo

// Batch helpers over libibverbs; see shim.h for why they exist.
#include "shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WRID(kind, idx) (((uint64_t)(kind) << FY_KIND_SHIFT) | (uint64_t)(idx))
#define WRID_KIND(w) ((int)((w) >> FY_KIND_SHIFT))
#define WRID_IDX(w) ((uint32_t)((w) & 0xffffffffu))
#define CHAIN_MAX 16

static int err_or(int fallback)
{
	return errno ? errno : fallback;
}

static uint8_t *ud_recv_buf(fy_dom *d, uint32_t i)
{
	return d->ud_mem + (uint64_t)i * FY_UD_BUF;
}

static uint8_t *ud_send_buf(fy_dom *d, uint32_t i)
{
	return d->ud_mem + (uint64_t)(d->cfg.ud_recv + i) * FY_UD_BUF;
}

static int post_ud_recv(fy_dom *d, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)ud_recv_buf(d, i), .length = FY_UD_BUF, .lkey = d->ud_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WRID(FY_K_UDRECV, i), .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(d->ud_qp, &wr, &bad);
}

// post_imm_recvs tops the RMA SRQ up with n zero-length receives, each of
// which an incoming write-with-immediate consumes. What cannot be posted now
// stays in imm_deficit for the next poll.
static void post_imm_recvs(fy_dom *d, uint32_t n)
{
	struct ibv_recv_wr wr[CHAIN_MAX], *bad;
	n += d->imm_deficit;
	d->imm_deficit = 0;
	while (n > 0) {
		uint32_t k = n < CHAIN_MAX ? n : CHAIN_MAX;
		for (uint32_t i = 0; i < k; i++) {
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = WRID(FY_K_IMM, 0);
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		bad = NULL;
		if (ibv_post_srq_recv(d->rma_srq, wr, &bad)) {
			uint32_t done = 0;
			for (struct ibv_recv_wr *w = wr; w && w != bad; w = w->next)
				done++;
			d->imm_deficit = n - done;
			return;
		}
		n -= k;
	}
}

static int ud_to_rts(fy_dom *d)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = d->cfg.port;
	a.qkey = d->cfg.qkey;
	if (ibv_modify_qp(d->ud_qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return err_or(EINVAL);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(d->ud_qp, &a, IBV_QP_STATE))
		return err_or(EINVAL);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(d->ud_qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return err_or(EINVAL);
	return 0;
}

static struct ibv_cq *create_cq(fy_dom *d)
{
	if (d->td) {
		// A single-threaded CQ on the parent domain skips the CQ lock.
		struct ibv_cq_init_attr_ex ca;
		memset(&ca, 0, sizeof(ca));
		ca.cqe = d->cfg.cqe;
		ca.wc_flags = IBV_WC_STANDARD_FLAGS;
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
		ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
		ca.parent_domain = d->qpd;
		struct ibv_cq_ex *cx = ibv_create_cq_ex(d->ctx, &ca);
		if (cx) {
			d->cq_ex = 1;
			return ibv_cq_ex_to_cq(cx);
		}
	}
	return ibv_create_cq(d->ctx, d->cfg.cqe, NULL, NULL, 0);
}

int fy_open(const char *name, const fy_config *cfg, fy_dom **out, const char **stage)
{
	struct ibv_device **list;
	int n = 0, err = 0;
	fy_dom *d;

	*out = NULL;
	*stage = "ibv_get_device_list";
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return err_or(ENOSYS);
	d = calloc(1, sizeof(*d));
	if (!d) {
		ibv_free_device_list(list);
		return ENOMEM;
	}
	d->cfg = *cfg;
	*stage = "find device";
	for (int i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
			errno = 0;
			d->ctx = ibv_open_device(list[i]);
			*stage = "ibv_open_device";
			err = d->ctx ? 0 : err_or(ENODEV);
			break;
		}
	ibv_free_device_list(list);
	if (!d->ctx) {
		free(d);
		return err ? err : ENODEV;
	}

#define FAIL(s, e)                  \
	do {                        \
		*stage = (s);       \
		err = (e);          \
		goto fail;          \
	} while (0)

	errno = 0;
	if (!(d->pd = ibv_alloc_pd(d->ctx)))
		FAIL("ibv_alloc_pd", err_or(ENOMEM));
	d->qpd = d->pd;
	if (cfg->want_td) {
		struct ibv_td_init_attr ta = {0};
		d->td = ibv_alloc_td(d->ctx, &ta);
		if (d->td) {
			struct ibv_parent_domain_init_attr pa;
			memset(&pa, 0, sizeof(pa));
			pa.pd = d->pd;
			pa.td = d->td;
			struct ibv_pd *p = ibv_alloc_parent_domain(d->ctx, &pa);
			if (p)
				d->qpd = p;
			else {
				ibv_dealloc_td(d->td);
				d->td = NULL;
			}
		}
	}
	errno = 0;
	if (!(d->cq = create_cq(d)))
		FAIL("ibv_create_cq", err_or(ENOMEM));

	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = cfg->msg_srq_wr;
	sa.attr.max_sge = 1;
	errno = 0;
	if (!(d->msg_srq = ibv_create_srq(d->qpd, &sa)))
		FAIL("ibv_create_srq(msg)", err_or(ENOMEM));
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = cfg->rma_srq_wr;
	sa.attr.max_sge = 1;
	errno = 0;
	if (!(d->rma_srq = ibv_create_srq(d->qpd, &sa)))
		FAIL("ibv_create_srq(rma)", err_or(ENOMEM));

	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = d->cq;
	qa.recv_cq = d->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = cfg->ud_send;
	qa.cap.max_recv_wr = cfg->ud_recv;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 1;
	errno = 0;
	if (!(d->ud_qp = ibv_create_qp(d->qpd, &qa)))
		FAIL("ibv_create_qp(ud)", err_or(ENOMEM));
	if ((err = ud_to_rts(d)))
		FAIL("ibv_modify_qp(ud)", err);

	size_t udlen = (size_t)(cfg->ud_recv + cfg->ud_send) * FY_UD_BUF;
	if (posix_memalign((void **)&d->ud_mem, 4096, udlen))
		FAIL("posix_memalign", ENOMEM);
	memset(d->ud_mem, 0, udlen);
	errno = 0;
	if (!(d->ud_mr = ibv_reg_mr(d->pd, d->ud_mem, udlen, IBV_ACCESS_LOCAL_WRITE)))
		FAIL("ibv_reg_mr(ud)", err_or(ENOMEM));

	d->slot_ctx = calloc(cfg->slots, sizeof(uint64_t));
	d->slot_free = calloc(cfg->slots, sizeof(uint32_t));
	d->rslot_ctx = calloc(cfg->recv_slots, sizeof(uint64_t));
	d->rslot_free = calloc(cfg->recv_slots, sizeof(uint32_t));
	d->udsend_free = calloc(cfg->ud_send, sizeof(uint32_t));
	if (!d->slot_ctx || !d->slot_free || !d->rslot_ctx || !d->rslot_free || !d->udsend_free)
		FAIL("calloc", ENOMEM);
	for (uint32_t i = 0; i < cfg->slots; i++)
		d->slot_free[i] = cfg->slots - 1 - i;
	d->nfree = cfg->slots;
	for (uint32_t i = 0; i < cfg->recv_slots; i++)
		d->rslot_free[i] = cfg->recv_slots - 1 - i;
	d->rnfree = cfg->recv_slots;
	for (uint32_t i = 0; i < cfg->ud_send; i++)
		d->udsend_free[i] = i;
	d->udsend_nfree = cfg->ud_send;

	for (uint32_t i = 0; i < cfg->ud_recv; i++)
		if ((err = post_ud_recv(d, i)))
			FAIL("ibv_post_recv(ud)", err);
	post_imm_recvs(d, cfg->rma_srq_wr);
	if (d->imm_deficit)
		FAIL("ibv_post_srq_recv(rma)", ENOMEM);
	*stage = "";
	*out = d;
	return 0;
fail:
	fy_close(d);
	return err ? err : EINVAL;
#undef FAIL
}

void fy_close(fy_dom *d)
{
	if (!d)
		return;
	if (d->ud_qp)
		ibv_destroy_qp(d->ud_qp);
	if (d->msg_srq)
		ibv_destroy_srq(d->msg_srq);
	if (d->rma_srq)
		ibv_destroy_srq(d->rma_srq);
	if (d->cq)
		ibv_destroy_cq(d->cq);
	if (d->ud_mr)
		ibv_dereg_mr(d->ud_mr);
	if (d->qpd && d->qpd != d->pd)
		ibv_dealloc_pd(d->qpd);
	if (d->td)
		ibv_dealloc_td(d->td);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	free(d->ud_mem);
	free(d->slot_ctx);
	free(d->slot_free);
	free(d->rslot_ctx);
	free(d->rslot_free);
	free(d->udsend_free);
	free(d->msg_qp);
	free(d->rma_qp);
	free(d);
}

int fy_ud_qpn(fy_dom *d)
{
	return (int)d->ud_qp->qp_num;
}

int fy_set_peer(fy_dom *d, uint32_t idx, struct ibv_qp *msg, struct ibv_qp *rma)
{
	if (idx >= d->npeer) {
		uint32_t n = d->npeer ? d->npeer : 16;
		while (n <= idx)
			n *= 2;
		struct ibv_qp **m = realloc(d->msg_qp, n * sizeof(*m));
		if (!m)
			return ENOMEM;
		d->msg_qp = m;
		struct ibv_qp **r = realloc(d->rma_qp, n * sizeof(*r));
		if (!r)
			return ENOMEM;
		d->rma_qp = r;
		for (uint32_t i = d->npeer; i < n; i++)
			d->msg_qp[i] = d->rma_qp[i] = NULL;
		d->npeer = n;
	}
	d->msg_qp[idx] = msg;
	d->rma_qp[idx] = rma;
	return 0;
}

struct ibv_qp *fy_create_rc_qp(fy_dom *d, int rma, uint32_t max_send_wr, uint32_t *qpn, int *err)
{
	struct ibv_qp_init_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = d->cq;
	qa.recv_cq = d->cq;
	qa.srq = rma ? d->rma_srq : d->msg_srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = max_send_wr;
	qa.cap.max_send_sge = 1;
	qa.sq_sig_all = 0;
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(d->qpd, &qa);
	if (!qp) {
		*err = err_or(ENOMEM);
		return NULL;
	}
	*qpn = qp->qp_num;
	*err = 0;
	return qp;
}

int fy_modify_qp(struct ibv_qp *qp, const fy_qp_attr *s)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum ibv_qp_state)s->state;
	a.qp_access_flags = s->access;
	a.pkey_index = s->pkey_index;
	a.port_num = s->port;
	a.qkey = s->qkey;
	a.path_mtu = (enum ibv_mtu)s->path_mtu;
	a.dest_qp_num = s->dest_qpn;
	a.rq_psn = s->rq_psn;
	a.sq_psn = s->sq_psn;
	a.max_dest_rd_atomic = s->max_dest_rd_atomic;
	a.max_rd_atomic = s->max_rd_atomic;
	a.min_rnr_timer = s->min_rnr_timer;
	a.timeout = s->timeout;
	a.retry_cnt = s->retry_cnt;
	a.rnr_retry = s->rnr_retry;
	a.ah_attr.is_global = s->is_global;
	a.ah_attr.dlid = s->dlid;
	a.ah_attr.sl = s->sl;
	a.ah_attr.port_num = s->port;
	if (s->is_global) {
		memcpy(a.ah_attr.grh.dgid.raw, s->dgid, 16);
		a.ah_attr.grh.sgid_index = s->sgid_index;
		a.ah_attr.grh.hop_limit = s->hop_limit;
		a.ah_attr.grh.traffic_class = s->traffic_class;
		a.ah_attr.grh.flow_label = s->flow_label;
	}
	errno = 0;
	int rc = ibv_modify_qp(qp, &a, (int)s->mask);
	if (rc)
		return rc > 0 ? rc : err_or(EINVAL);
	return 0;
}

int fy_destroy_qp(struct ibv_qp *qp)
{
	return ibv_destroy_qp(qp);
}

struct ibv_ah *fy_create_ah(fy_dom *d, const uint8_t *gid, uint16_t dlid, int global, uint8_t sgid_index,
			    uint8_t hop_limit, int *err)
{
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof(a));
	a.port_num = d->cfg.port;
	a.dlid = dlid;
	a.is_global = global ? 1 : 0;
	if (global) {
		memcpy(a.grh.dgid.raw, gid, 16);
		a.grh.sgid_index = sgid_index;
		a.grh.hop_limit = hop_limit;
	}
	errno = 0;
	struct ibv_ah *ah = ibv_create_ah(d->qpd, &a);
	*err = ah ? 0 : err_or(EINVAL);
	return ah;
}

int fy_destroy_ah(struct ibv_ah *ah)
{
	return ibv_destroy_ah(ah);
}

int fy_ud_send(fy_dom *d, struct ibv_ah *ah, uint32_t qpn, const uint8_t *msg, uint32_t len)
{
	if (len > FY_UD_MSG_MAX)
		return EMSGSIZE;
	if (d->udsend_nfree == 0)
		return EAGAIN;
	uint32_t i = d->udsend_free[--d->udsend_nfree];
	uint8_t *buf = ud_send_buf(d, i);
	memcpy(buf, msg, len);
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = len, .lkey = d->ud_mr->lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(FY_K_UDSEND, i);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = d->cfg.qkey;
	int rc = ibv_post_send(d->ud_qp, &wr, &bad);
	if (rc)
		d->udsend_free[d->udsend_nfree++] = i;
	return rc;
}

struct ibv_mr *fy_reg_mr(fy_dom *d, uint64_t addr, uint64_t len, int access, int dmabuf_fd, int *err)
{
	struct ibv_mr *mr;
	errno = 0;
	if (dmabuf_fd >= 0)
		// iova = the virtual address, so peers address dma-buf regions
		// exactly like host ones.
		mr = ibv_reg_dmabuf_mr(d->pd, 0, len, addr, dmabuf_fd, access);
	else
		mr = ibv_reg_mr(d->pd, (void *)(uintptr_t)addr, len, access);
	*err = mr ? 0 : err_or(EINVAL);
	return mr;
}

int fy_dereg_mr(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

// fy_post_writes posts each segment as one chain (one doorbell) on the RMA
// queue pair of its peer. It stops at the first refusal: *accepted counts
// the ops posted, found by walking the chain up to bad_wr. ENOMEM (send
// queue full) and EAGAIN (no free slot) mean "busy, retry after a poll".
int fy_post_writes(fy_dom *d, const fy_write_op *ops, const fy_seg *segs, int nseg, int *accepted)
{
	struct ibv_send_wr wr[4];
	struct ibv_sge sge[4];
	uint32_t slot[4];
	*accepted = 0;
	for (int s = 0; s < nseg; s++) {
		const fy_write_op *op = ops + segs[s].first;
		uint32_t n = segs[s].count;
		if (n == 0 || n > 4)
			return EINVAL;
		if (op->peer >= d->npeer || !d->rma_qp[op->peer])
			return ENOTCONN;
		struct ibv_qp *qp = d->rma_qp[op->peer];
		if (n > d->nfree)
			n = d->nfree;
		if (n == 0)
			return EAGAIN;
		for (uint32_t i = 0; i < n; i++) {
			const fy_write_op *o = op + i;
			slot[i] = d->slot_free[--d->nfree];
			d->slot_ctx[slot[i]] = o->context;
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = WRID(FY_K_WRITE, slot[i]);
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			if (o->length) {
				sge[i].addr = o->local;
				sge[i].length = (uint32_t)o->length;
				sge[i].lkey = (uint32_t)o->local_desc;
				wr[i].sg_list = &sge[i];
				wr[i].num_sge = 1;
			}
			if (o->flags & 1) {
				wr[i].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
				wr[i].imm_data = htonl(o->imm);
			} else {
				wr[i].opcode = IBV_WR_RDMA_WRITE;
			}
			wr[i].send_flags = IBV_SEND_SIGNALED;
			wr[i].wr.rdma.remote_addr = o->remote;
			wr[i].wr.rdma.rkey = (uint32_t)o->remote_key;
		}
		struct ibv_send_wr *bad = NULL;
		int rc = ibv_post_send(qp, wr, &bad);
		if (rc) {
			uint32_t done = 0;
			for (struct ibv_send_wr *w = wr; w && w != bad; w = w->next)
				done++;
			for (uint32_t i = n; i > done; i--)
				d->slot_free[d->nfree++] = slot[i - 1];
			*accepted += (int)done;
			return rc;
		}
		*accepted += (int)n;
		if (n < segs[s].count)
			return EAGAIN;
	}
	return 0;
}

int fy_post_sends(fy_dom *d, const fy_send_op *ops, int n, int *accepted)
{
	*accepted = 0;
	for (int i = 0; i < n; i++) {
		const fy_send_op *o = ops + i;
		if (o->peer >= d->npeer || !d->msg_qp[o->peer])
			return ENOTCONN;
		if (d->nfree == 0)
			return EAGAIN;
		uint32_t s = d->slot_free[--d->nfree];
		d->slot_ctx[s] = o->context;
		struct ibv_sge sge = {.addr = o->local, .length = (uint32_t)o->length, .lkey = (uint32_t)o->local_desc};
		struct ibv_send_wr wr, *bad;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID(FY_K_SEND, s);
		wr.sg_list = o->length ? &sge : NULL;
		wr.num_sge = o->length ? 1 : 0;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		int rc = ibv_post_send(d->msg_qp[o->peer], &wr, &bad);
		if (rc) {
			d->slot_free[d->nfree++] = s;
			return rc;
		}
		(*accepted)++;
	}
	return 0;
}

int fy_post_recvs(fy_dom *d, const fy_recv_op *ops, int n, int *accepted)
{
	struct ibv_recv_wr wr[CHAIN_MAX], *bad;
	struct ibv_sge sge[CHAIN_MAX];
	uint32_t slot[CHAIN_MAX];
	*accepted = 0;
	while (*accepted < n) {
		uint32_t k = (uint32_t)(n - *accepted);
		if (k > CHAIN_MAX)
			k = CHAIN_MAX;
		if (k > d->rnfree)
			k = d->rnfree;
		if (k == 0)
			return EAGAIN;
		for (uint32_t i = 0; i < k; i++) {
			const fy_recv_op *o = ops + *accepted + i;
			slot[i] = d->rslot_free[--d->rnfree];
			d->rslot_ctx[slot[i]] = o->context;
			sge[i].addr = o->local;
			sge[i].length = (uint32_t)o->length;
			sge[i].lkey = (uint32_t)o->local_desc;
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = WRID(FY_K_RECV, slot[i]);
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		bad = NULL;
		int rc = ibv_post_srq_recv(d->msg_srq, wr, &bad);
		if (rc) {
			uint32_t done = 0;
			for (struct ibv_recv_wr *w = wr; w && w != bad; w = w->next)
				done++;
			for (uint32_t i = k; i > done; i--)
				d->rslot_free[d->rnfree++] = slot[i - 1];
			*accepted += (int)done;
			return rc;
		}
		*accepted += (int)k;
	}
	return 0;
}

int fy_wc_errno(int status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return ECANCELED;
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
		return EMSGSIZE;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_MW_BIND_ERR:
		return EACCES;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return EHOSTUNREACH;
	case IBV_WC_REM_OP_ERR:
		return EREMOTEIO;
	default:
		return EIO;
	}
}

// fy_poll reaps up to maxev user-visible completions and up to maxud
// handshake messages. Internal receives are re-posted here, so an idle
// domain keeps its SRQ and UD queue full without Go's help.
int fy_poll(fy_dom *d, fy_event *ev, int maxev, fy_ud_msg *ud, int maxud, int *nud)
{
	struct ibv_wc wc[16];
	int nev = 0;
	uint32_t imm = 0;
	*nud = 0;
	for (;;) {
		int room = maxev - nev;
		if (maxud - *nud < room)
			room = maxud - *nud;
		if (room > 16)
			room = 16;
		if (room <= 0)
			break;
		int got = ibv_poll_cq(d->cq, room, wc);
		if (got < 0) {
			if (imm)
				post_imm_recvs(d, imm);
			return got;
		}
		for (int i = 0; i < got; i++) {
			struct ibv_wc *w = &wc[i];
			uint32_t idx = WRID_IDX(w->wr_id);
			fy_event *e = &ev[nev];
			switch (WRID_KIND(w->wr_id)) {
			case FY_K_WRITE:
			case FY_K_SEND:
				e->context = d->slot_ctx[idx];
				d->slot_free[d->nfree++] = idx;
				e->kind = WRID_KIND(w->wr_id) == FY_K_WRITE ? FY_EV_WRITE : FY_EV_SEND;
				e->length = 0;
				e->imm = 0;
				e->err = fy_wc_errno(w->status);
				e->prov_err = w->status ? (int32_t)w->status : 0;
				nev++;
				break;
			case FY_K_RECV:
				e->context = d->rslot_ctx[idx];
				d->rslot_free[d->rnfree++] = idx;
				e->kind = FY_EV_RECV;
				e->length = w->status == IBV_WC_SUCCESS ? w->byte_len : 0;
				e->imm = 0;
				e->err = fy_wc_errno(w->status);
				e->prov_err = w->status ? (int32_t)w->status : 0;
				nev++;
				break;
			case FY_K_IMM:
				if (w->status != IBV_WC_SUCCESS) {
					d->dropped++;
					break;
				}
				imm++;
				if (!(w->wc_flags & IBV_WC_WITH_IMM)) {
					d->dropped++;
					break;
				}
				e->context = 0;
				e->length = w->byte_len;
				e->kind = FY_EV_IMM;
				e->imm = ntohl(w->imm_data);
				e->err = 0;
				e->prov_err = 0;
				nev++;
				break;
			case FY_K_UDRECV:
				if (w->status != IBV_WC_SUCCESS) {
					d->dropped++;
					break;
				}
				if (w->byte_len > FY_GRH && w->byte_len <= FY_UD_BUF) {
					fy_ud_msg *m = &ud[(*nud)++];
					m->len = w->byte_len - FY_GRH;
					m->src_qp = w->src_qp;
					memcpy(m->data, ud_recv_buf(d, idx) + FY_GRH, m->len);
				}
				post_ud_recv(d, idx);
				break;
			case FY_K_UDSEND:
				d->udsend_free[d->udsend_nfree++] = idx;
				break;
			default:
				d->dropped++;
			}
		}
		if (got < room)
			break;
	}
	if (imm || d->imm_deficit)
		post_imm_recvs(d, imm);
	return nev;
}
