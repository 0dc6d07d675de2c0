//go:build cgo

/*
 * The per-operation loops: posting batches of writes, sends and receives,
 * and reading the completion queue into an array of events. Go calls each
 * once per batch.
 */
#include <stdio.h>
#include <string.h>

#include "shim.h"

/* Post writes (and reads, FERRY_WRITE_READ: the same op turned around, with
 * fi_readmsg and no immediate) from the front of ops until the provider is busy. Returns the
 * number accepted; e->last_err is the error of ops[returned] when it is not a
 * transient -FI_EAGAIN. Every message struct lives on this stack frame:
 * libfabric copies what it keeps at post time. */
int ferry_post_writes(struct ferry_ep *e, const struct ferry_write_op *ops, int n)
{
	struct fid_ep *ep = e->ep;
	int i;

	e->last_err = 0;
	for (i = 0; i < n; i++) {
		const struct ferry_write_op *op = &ops[i];
		/* Always one iov, even of length 0: sockets and rxd crash on an
		 * empty iov array, and EFA wants a valid rma_iov for imm-only
		 * writes. */
		struct iovec iov = { (void *)(uintptr_t)op->local, (size_t)op->length };
		void *desc = (void *)(uintptr_t)op->local_desc;
		struct fi_rma_iov rma = { op->remote, (size_t)op->length, op->remote_key };
		struct fi_msg_rma msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = (fi_addr_t)op->peer,
			.rma_iov = &rma,
			.rma_iov_count = 1,
			.context = (void *)(uintptr_t)op->context,
			.data = op->imm,
		};
		uint64_t flags = FI_COMPLETION;
		ssize_t ret;

		if (op->flags & FERRY_WRITE_HAS_IMM)
			flags |= FI_REMOTE_CQ_DATA;
		if (op->flags & e->delivered_mask)
			flags |= FI_DELIVERY_COMPLETE;
		if (op->flags & FERRY_WRITE_READ)
			ret = fi_readmsg(ep, &msg, FI_COMPLETION);
		else
			ret = fi_writemsg(ep, &msg, flags);
		if (ret == -FI_EAGAIN)
			return i;
		if (ret) {
			e->last_err = (int)ret;
			return i;
		}
	}
	return n;
}

int ferry_post_sends(struct ferry_ep *e, const struct ferry_send_op *ops, int n)
{
	struct fid_ep *ep = e->ep;
	int i;

	e->last_err = 0;
	for (i = 0; i < n; i++) {
		const struct ferry_send_op *op = &ops[i];
		struct iovec iov = { (void *)(uintptr_t)op->local, (size_t)op->length };
		void *desc = (void *)(uintptr_t)op->local_desc;
		struct fi_msg msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = (fi_addr_t)op->peer,
			.context = (void *)(uintptr_t)op->context,
		};
		ssize_t ret = fi_sendmsg(ep, &msg, FI_COMPLETION);
		if (ret == -FI_EAGAIN)
			return i;
		if (ret) {
			e->last_err = (int)ret;
			return i;
		}
	}
	return n;
}

int ferry_post_recvs(struct ferry_ep *e, const struct ferry_recv_op *ops, int n)
{
	struct fid_ep *ep = e->ep;
	int i;

	e->last_err = 0;
	for (i = 0; i < n; i++) {
		const struct ferry_recv_op *op = &ops[i];
		struct iovec iov = { (void *)(uintptr_t)op->local, (size_t)op->length };
		void *desc = (void *)(uintptr_t)op->local_desc;
		struct fi_msg msg = {
			.msg_iov = &iov,
			.desc = &desc,
			.iov_count = 1,
			.addr = FI_ADDR_UNSPEC,
			.context = (void *)(uintptr_t)op->context,
		};
		ssize_t ret = fi_recvmsg(ep, &msg, FI_COMPLETION);
		if (ret == -FI_EAGAIN)
			return i;
		if (ret) {
			e->last_err = (int)ret;
			return i;
		}
	}
	return n;
}

static int read_error(struct ferry_ep *e, struct ferry_event *ev)
{
	struct fi_cq_err_entry ee;
	struct ferry_err *slot;
	const char *txt, *base;
	ssize_t ret;

	/* err_data_size 0: the provider lends its own buffer, valid until the
	 * next read, which is why the text is copied right here. */
	memset(&ee, 0, sizeof ee);
	ret = fi_cq_readerr(e->cq, &ee, 0);
	if (ret < 0)
		return (int)ret;
	if (ret == 0)
		return -FI_EAGAIN;
	memset(ev, 0, sizeof *ev);
	ev->kind = ferry_classify(ee.flags, e->rules);
	/* A target-side entry has no op of ours behind it. */
	if (ev->kind != FERRY_EV_IMM)
		ev->context = (uint64_t)(uintptr_t)ee.op_context;
	ev->length = ee.len;
	/* Some providers (shm) report err negated; the engine gets it positive. */
	ev->err = ee.err < 0 ? -ee.err : ee.err;
	if (!ev->err)
		ev->err = FI_EIO;
	ev->prov_errno = ee.prov_errno;
	if (ev->kind == FERRY_EV_IMM && (ee.flags & FI_REMOTE_CQ_DATA))
		ev->imm = (uint32_t)ee.data;

	slot = &e->errs[e->nerr++];
	slot->context = ev->context;
	slot->err = ev->err;
	slot->prov_errno = ev->prov_errno;
	/* The generic text, then the provider's own when it says more (with
	 * prov_errno 0, fi_cq_strerror answers "Success"). */
	base = fi_strerror(ev->err);
	snprintf(slot->text, sizeof slot->text, "%s", base ? base : "unknown error");
	if (ee.prov_errno) {
		char ptxt[FERRY_ERR_TEXT];
		txt = fi_cq_strerror(e->cq, ee.prov_errno, ee.err_data, ptxt, sizeof ptxt);
		if (txt && (!base || strcmp(txt, base) != 0)) {
			size_t l = strlen(slot->text);
			snprintf(slot->text + l, sizeof slot->text - l, " (%s)", txt);
		}
	}
	return 0;
}

/* Read completions into ev until it is full or the queue is empty. Returns
 * the number stored, or a negative error when the queue itself failed. */
int ferry_poll(struct ferry_ep *e, struct ferry_event *ev, int max)
{
	struct fi_cq_data_entry buf[16];
	int n = 0;

	e->nerr = 0;
	while (n < max) {
		size_t want = (size_t)(max - n);
		ssize_t ret, j;

		if (want > 16)
			want = 16;
		ret = fi_cq_read(e->cq, buf, want);
		if (ret > 0) {
			for (j = 0; j < ret; j++) {
				const struct fi_cq_data_entry *c = &buf[j];
				struct ferry_event *o = &ev[n];
				uint32_t kind = ferry_classify(c->flags, e->rules);

				if (kind == FERRY_EV_IMM) {
					/* A remote write without data carries no
					 * immediate and is nothing to report. */
					if (!(c->flags & FI_REMOTE_CQ_DATA))
						continue;
					o->context = 0;
					o->length = 0;
					o->imm = (uint32_t)c->data;
				} else {
					o->context = (uint64_t)(uintptr_t)c->op_context;
					o->length = kind == FERRY_EV_RECV ? c->len : 0;
					o->imm = 0;
				}
				o->kind = kind;
				o->err = 0;
				o->prov_errno = 0;
				n++;
			}
			continue;
		}
		if (ret == -FI_EAGAIN)
			break;
		if (ret == -FI_EAVAIL) {
			int r;
			if (e->nerr == FERRY_MAX_ERRS)
				break;
			r = read_error(e, &ev[n]);
			if (r == -FI_EAGAIN)
				break;
			if (r)
				return r;
			n++;
			continue;
		}
		return ret < 0 ? (int)ret : -FI_EOTHER;
	}
	return n;
}
