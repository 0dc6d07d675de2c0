//go:build cgo

// The data path: batched posts and the completion poller.
#include "shim_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

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
			wr[i].wr_id = WRID((o->flags & 4) ? FY_K_READ : FY_K_WRITE, slot[i]);
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
			if (o->length) {
				sge[i].addr = o->local;
				sge[i].length = (uint32_t)o->length;
				sge[i].lkey = (uint32_t)o->local_desc;
				wr[i].sg_list = &sge[i];
				wr[i].num_sge = 1;
			}
			if (o->flags & 4) {
				/* rdma.WriteRead: remote into local, no immediate. */
				wr[i].opcode = IBV_WR_RDMA_READ;
			} else if (o->flags & 1) {
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

static void note_err_qp(fy_dom *d, uint32_t qpn)
{
	for (uint32_t i = 0; i < d->nerr_qp; i++)
		if (d->err_qp[i] == qpn)
			return;
	if (d->nerr_qp < sizeof(d->err_qp) / sizeof(d->err_qp[0]))
		d->err_qp[d->nerr_qp++] = qpn;
}

int fy_take_err_qps(fy_dom *d, uint32_t *out, int max)
{
	int n = (int)d->nerr_qp < max ? (int)d->nerr_qp : max;
	memcpy(out, d->err_qp, (size_t)n * sizeof(uint32_t));
	d->nerr_qp = 0;
	return n;
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
				fy_post_imm_recvs(d, imm);
			return got;
		}
		for (int i = 0; i < got; i++) {
			struct ibv_wc *w = &wc[i];
			uint32_t idx = WRID_IDX(w->wr_id);
			fy_event *e = &ev[nev];
			switch (WRID_KIND(w->wr_id)) {
			case FY_K_WRITE:
			case FY_K_READ:
			case FY_K_SEND:
				e->context = d->slot_ctx[idx];
				d->slot_free[d->nfree++] = idx;
				e->kind = WRID_KIND(w->wr_id) == FY_K_SEND ? FY_EV_SEND : FY_EV_WRITE;
				e->length = 0;
				e->imm = 0;
				e->err = fy_wc_errno(w->status);
				/* A read the responder refused for access: the region
				 * was not registered with remote read (or the range or
				 * key is wrong, which the engine checks before posting). */
				if (WRID_KIND(w->wr_id) == FY_K_READ && w->status == IBV_WC_REM_ACCESS_ERR)
					e->err = EPERM;
				e->prov_err = w->status ? (int32_t)w->status : 0;
				if (w->status != IBV_WC_SUCCESS)
					note_err_qp(d, w->qp_num);
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
				if (w->status != IBV_WC_SUCCESS)
					note_err_qp(d, w->qp_num);
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
					memcpy(m->data, fy_ud_recv_buf(d, idx) + FY_GRH, m->len);
				}
				fy_post_ud_recv(d, idx);
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
		fy_post_imm_recvs(d, imm);
	return nev;
}
