//go:build cgo

// Setup and teardown of a domain's C resources; see shim.h for why the
// shim exists.
#include "shim_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>


static int err_or(int fallback)
{
	return errno ? errno : fallback;
}

uint8_t *fy_ud_recv_buf(fy_dom *d, uint32_t i)
{
	return d->ud_mem + (uint64_t)i * FY_UD_BUF;
}

uint8_t *fy_ud_send_buf(fy_dom *d, uint32_t i)
{
	return d->ud_mem + (uint64_t)(d->cfg.ud_recv + i) * FY_UD_BUF;
}

int fy_post_ud_recv(fy_dom *d, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)fy_ud_recv_buf(d, i), .length = FY_UD_BUF, .lkey = d->ud_mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WRID(FY_K_UDRECV, i), .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(d->ud_qp, &wr, &bad);
}

// post_imm_recvs tops the RMA SRQ up with n zero-length receives, each of
// which an incoming write-with-immediate consumes. What cannot be posted now
// stays in imm_deficit for the next poll.
void fy_post_imm_recvs(fy_dom *d, uint32_t n)
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

// create_srq puts an SRQ on the parent domain and, should a provider refuse
// that, on the plain PD (the same kernel PD): receives are posted from one
// thread either way, and the lock-free path that matters is the send side.
static struct ibv_srq *create_srq(fy_dom *d, struct ibv_srq_init_attr *sa)
{
	struct ibv_srq_init_attr copy = *sa;
	struct ibv_srq *srq = ibv_create_srq(d->qpd, sa);
	if (!srq && d->qpd != d->pd)
		srq = ibv_create_srq(d->pd, &copy);
	return srq;
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
	if (!(d->msg_srq = create_srq(d, &sa)))
		FAIL("ibv_create_srq(msg)", err_or(ENOMEM));
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = cfg->rma_srq_wr;
	sa.attr.max_sge = 1;
	errno = 0;
	if (!(d->rma_srq = create_srq(d, &sa)))
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
		if ((err = fy_post_ud_recv(d, i)))
			FAIL("ibv_post_recv(ud)", err);
	fy_post_imm_recvs(d, cfg->rma_srq_wr);
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
	// Address handles go on the plain PD: they gain nothing from the thread
	// domain, and not every provider takes a parent domain here.
	struct ibv_ah *ah = ibv_create_ah(d->pd, &a);
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
	uint8_t *buf = fy_ud_send_buf(d, i);
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

struct ibv_mr *fy_reg_mr(fy_dom *d, uint64_t addr, uint64_t len, int access, int dmabuf_fd, uint64_t dmabuf_off,
			 int *err)
{
	struct ibv_mr *mr;
	errno = 0;
	if (dmabuf_fd >= 0)
		// iova = the virtual address, so peers address dma-buf regions
		// exactly like host ones.
		mr = ibv_reg_dmabuf_mr(d->pd, dmabuf_off, len, addr, dmabuf_fd, access);
	else
		mr = ibv_reg_mr(d->pd, (void *)(uintptr_t)addr, len, access);
	*err = mr ? 0 : err_or(EINVAL);
	return mr;
}

int fy_dereg_mr(struct ibv_mr *mr)
{
	return ibv_dereg_mr(mr);
}

