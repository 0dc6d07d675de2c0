//go:build cgo

/*
 * The per-operation loops of ferry's libfabric binding: posting batches of
 * writes, sends and receives, reading the completion queue into an array,
 * and the raw benchmark loop. Also the open/close sequence, kept in C so a
 * failure part way unwinds in one place.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim.h"

_Static_assert(sizeof(struct ferry_write_op) == 64, "write op is 8 words");
_Static_assert(sizeof(struct ferry_send_op) == 40, "send op is 5 words");
_Static_assert(sizeof(struct ferry_recv_op) == 32, "recv op is 4 words");
_Static_assert(sizeof(struct ferry_event) == 32, "event is 32 bytes");

/* The newest API this code was written against is 1.22; ask for no newer
 * than that, no newer than the headers we compiled with (the library fills
 * structs of that layout) and no newer than the library we run on. */
uint32_t ferry_api_version(void)
{
	uint32_t v = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
	uint32_t rt = fi_version();
	if (FI_VERSION_LT(rt, v))
		v = rt;
	if (FI_VERSION_LT(FI_VERSION(1, 22), v))
		v = FI_VERSION(1, 22);
	return v;
}

int ferry_getinfo(const char *prov, const char *node, uint64_t caps, uint64_t mr_mode,
		  uint64_t flags, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;

	*out = NULL;
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = caps;
	/* No mode bits: op contexts are plain integers, never fi_context. */
	hints->mode = 0;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = (int)mr_mode;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov && *prov) {
		/* fi_freeinfo frees it, so it must come from malloc. */
		hints->fabric_attr->prov_name = strdup(prov);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return -FI_ENOMEM;
		}
	}
	if (!node || !*node) {
		node = NULL;
		flags = 0;
	}
	ret = fi_getinfo(ferry_api_version(), node, NULL, flags, hints, out);
	fi_freeinfo(hints);
	return ret;
}

struct fi_info *ferry_dupinfo(const struct fi_info *info)
{
	return fi_dupinfo(info);
}

int ferry_set_src_str(struct fi_info *info, const char *name)
{
	char *s = strdup(name);
	if (!s)
		return -FI_ENOMEM;
	free(info->src_addr);
	info->src_addr = s;
	info->src_addrlen = strlen(s) + 1;
	info->addr_format = FI_ADDR_STR;
	return 0;
}

int ferry_pci_addr(const struct fi_info *info, char *buf, size_t len)
{
	const struct fi_pci_attr *p;

	if (!info->nic || !info->nic->bus_attr || info->nic->bus_attr->bus_type != FI_BUS_PCI)
		return 0;
	p = &info->nic->bus_attr->attr.pci;
	snprintf(buf, len, "%04x:%02x:%02x.%x", p->domain_id, p->bus_id, p->device_id,
		 p->function_id);
	return 1;
}

size_t ferry_link_speed(const struct fi_info *info)
{
	if (!info->nic || !info->nic->link_attr)
		return 0;
	return info->nic->link_attr->speed;
}

/* EFA options that keep every byte on the NIC: no shared-memory shortcut
 * and no provider-side CUDA copies. Options this libfabric does not know
 * are compiled out; ones the provider refuses with -FI_ENOPROTOOPT do not
 * apply to it. */
static int efa_setopts(struct fid_ep *ep)
{
	int ret = 0;
	(void)ep;
#ifdef FI_OPT_SHARED_MEMORY_PERMITTED
	{
		int off = 0;
		ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &off,
				sizeof off);
		if (ret && ret != -FI_ENOPROTOOPT)
			return ret;
	}
#endif
#ifdef FI_OPT_CUDA_API_PERMITTED
	{
		bool off = false;
		ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &off,
				sizeof off);
		if (ret && ret != -FI_ENOPROTOOPT)
			return ret;
	}
#endif
	return 0;
}

int ferry_close(struct ferry_ep *e)
{
	int first = 0, ret;

	if (!e)
		return 0;
#define CLOSE_FID(f)                                 \
	do {                                         \
		if (f) {                             \
			ret = fi_close(&(f)->fid);   \
			if (ret && !first)           \
				first = ret;         \
			(f) = NULL;                  \
		}                                    \
	} while (0)
	CLOSE_FID(e->ep);
	CLOSE_FID(e->av);
	CLOSE_FID(e->cq);
	CLOSE_FID(e->domain);
	CLOSE_FID(e->fabric);
#undef CLOSE_FID
	if (e->info)
		fi_freeinfo(e->info);
	free(e);
	return first;
}

int ferry_open(struct fi_info *info, size_t cq_size, int efa_opts, struct ferry_ep **out, int *step)
{
	struct fi_cq_attr cqa;
	struct fi_av_attr ava;
	struct ferry_ep *e;
	int ret;

	*out = NULL;
	e = calloc(1, sizeof *e);
	if (!e) {
		fi_freeinfo(info);
		*step = FERRY_STEP_NOMEM;
		return -FI_ENOMEM;
	}
	e->info = info;

	*step = FERRY_STEP_FABRIC;
	ret = fi_fabric(info->fabric_attr, &e->fabric, NULL);
	if (ret)
		goto fail;
	*step = FERRY_STEP_DOMAIN;
	ret = fi_domain(e->fabric, info, &e->domain, NULL);
	if (ret)
		goto fail;

	memset(&cqa, 0, sizeof cqa);
	cqa.format = FI_CQ_FORMAT_DATA;
	cqa.size = cq_size;
	cqa.wait_obj = FI_WAIT_NONE;
	*step = FERRY_STEP_CQ;
	ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL);
	if (ret)
		goto fail;

	memset(&ava, 0, sizeof ava);
	ava.type = info->domain_attr->av_type;
	*step = FERRY_STEP_AV;
	ret = fi_av_open(e->domain, &ava, &e->av, NULL);
	if (ret)
		goto fail;

	*step = FERRY_STEP_EP;
	ret = fi_endpoint(e->domain, info, &e->ep, NULL);
	if (ret)
		goto fail;
	*step = FERRY_STEP_BIND_CQ;
	ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto fail;
	*step = FERRY_STEP_BIND_AV;
	ret = fi_ep_bind(e->ep, &e->av->fid, 0);
	if (ret)
		goto fail;
	if (efa_opts) {
		*step = FERRY_STEP_SETOPT;
		ret = efa_setopts(e->ep);
		if (ret)
			goto fail;
	}
	*step = FERRY_STEP_ENABLE;
	ret = fi_enable(e->ep);
	if (ret)
		goto fail;
	*step = 0;
	*out = e;
	return 0;
fail:
	ferry_close(e);
	return ret;
}

int ferry_getname(struct ferry_ep *e, void *buf, size_t *len)
{
	return fi_getname(&e->ep->fid, buf, len);
}

int ferry_av_insert(struct ferry_ep *e, const void *addr, fi_addr_t *out)
{
	int ret = fi_av_insert(e->av, addr, 1, out, 0, NULL);
	if (ret == 1)
		return 0;
	return ret < 0 ? ret : -FI_EINVAL;
}

int ferry_mr_reg(struct ferry_ep *e, uint64_t addr, uint64_t len, uint64_t access,
		 uint64_t requested_key, int cuda, int device, int dmabuf_fd,
		 struct fid_mr **mr, uint64_t *key, uint64_t *desc)
{
	struct iovec iov = { (void *)(uintptr_t)addr, (size_t)len };
	struct fi_mr_attr a;
	uint64_t flags = 0;
	int ret;

	*mr = NULL;
	memset(&a, 0, sizeof a);
	a.mr_iov = &iov;
	a.iov_count = 1;
	a.access = access;
	a.requested_key = requested_key;
	a.iface = FI_HMEM_SYSTEM;
	if (cuda) {
		a.iface = FI_HMEM_CUDA;
		a.device.cuda = device;
#ifdef FI_MR_DMABUF
		struct fi_mr_dmabuf dmabuf;
		if (dmabuf_fd >= 0) {
			memset(&dmabuf, 0, sizeof dmabuf);
			dmabuf.fd = dmabuf_fd;
			dmabuf.offset = 0;
			dmabuf.len = (size_t)len;
			dmabuf.base_addr = (void *)(uintptr_t)addr;
			a.dmabuf = &dmabuf;
			flags |= FI_MR_DMABUF;
		}
#else
		(void)dmabuf_fd;
#endif
	}
	ret = fi_mr_regattr(e->domain, &a, flags, mr);
	if (ret) {
		*mr = NULL;
		return ret;
	}
	if (e->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		ret = fi_mr_bind(*mr, &e->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(*mr);
		if (ret)
			goto fail;
	}
	*key = fi_mr_key(*mr);
	if (*key == FI_KEY_NOTAVAIL) {
		ret = -FI_ENOKEY;
		goto fail;
	}
	*desc = (uint64_t)(uintptr_t)fi_mr_desc(*mr);
	return 0;
fail:
	fi_close(&(*mr)->fid);
	*mr = NULL;
	return ret;
}

int ferry_mr_close(struct fid_mr *mr)
{
	return fi_close(&mr->fid);
}

/* Post writes from the front of ops until the provider is busy. Returns the
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

/* Completion flags say what an entry is. Target-side write completions are
 * checked first: providers disagree on whether they also carry FI_RMA or a
 * length, and some (sockets) set FI_REMOTE_CQ_DATA on initiator entries. */
static uint32_t classify(uint64_t flags)
{
	if (flags & FI_REMOTE_WRITE)
		return FERRY_EV_IMM;
	if (flags & FI_WRITE)
		return FERRY_EV_WRITE;
	if (flags & FI_SEND)
		return FERRY_EV_SEND;
	if (flags & FI_RECV)
		return FERRY_EV_RECV;
	return 0;
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
	ev->context = (uint64_t)(uintptr_t)ee.op_context;
	ev->kind = classify(ee.flags);
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
				uint32_t kind = classify(c->flags);

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

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The raw benchmark: for each iteration post all of ops on init (polling
 * both queues whenever the provider is busy, since tcp and shm progress
 * only when polled), then wait for every initiator completion and, for
 * writes with an immediate, every target immediate. Warmup iterations run
 * first and are not timed. On failure *phase is the iteration (warmups
 * negative) and the return value a negative fi errno. */
int ferry_raw_loop(struct ferry_ep *init, struct ferry_ep *target,
		   const struct ferry_write_op *ops, int n, int iters, int warmup,
		   int64_t timeout_ns, int64_t *lat_ns, int *phase)
{
	struct ferry_event ev[64];
	int expect_imm = 0, i, it;

	for (i = 0; i < n; i++)
		if (ops[i].flags & FERRY_WRITE_HAS_IMM)
			expect_imm++;
	for (it = -warmup; it < iters; it++) {
		int64_t t0 = now_ns();
		int posted = 0, done = 0, imms = 0;
		unsigned spins = 0;

		*phase = it;
		while (posted < n || done < n || imms < expect_imm) {
			int m;

			if (posted < n) {
				posted += ferry_post_writes(init, ops + posted, n - posted);
				if (init->last_err)
					return init->last_err;
			}
			m = ferry_poll(init, ev, 64);
			if (m < 0)
				return m;
			for (i = 0; i < m; i++) {
				if (ev[i].err)
					return -ev[i].err;
				if (ev[i].kind == FERRY_EV_WRITE)
					done++;
			}
			m = ferry_poll(target, ev, 64);
			if (m < 0)
				return m;
			for (i = 0; i < m; i++) {
				if (ev[i].err)
					return -ev[i].err;
				if (ev[i].kind == FERRY_EV_IMM)
					imms++;
			}
			if ((++spins & 1023) == 0 && now_ns() - t0 > timeout_ns)
				return -FI_ETIMEDOUT;
		}
		if (it >= 0)
			lat_ns[it] = now_ns() - t0;
	}
	return 0;
}

void ferry_layout(uint64_t *out, int max)
{
	uint64_t v[] = {
		sizeof(struct ferry_write_op),
		offsetof(struct ferry_write_op, local),
		offsetof(struct ferry_write_op, length),
		offsetof(struct ferry_write_op, local_desc),
		offsetof(struct ferry_write_op, remote),
		offsetof(struct ferry_write_op, remote_key),
		offsetof(struct ferry_write_op, peer),
		offsetof(struct ferry_write_op, context),
		offsetof(struct ferry_write_op, imm),
		offsetof(struct ferry_write_op, flags),
		sizeof(struct ferry_send_op),
		offsetof(struct ferry_send_op, local),
		offsetof(struct ferry_send_op, length),
		offsetof(struct ferry_send_op, local_desc),
		offsetof(struct ferry_send_op, peer),
		offsetof(struct ferry_send_op, context),
		sizeof(struct ferry_recv_op),
		offsetof(struct ferry_recv_op, local),
		offsetof(struct ferry_recv_op, length),
		offsetof(struct ferry_recv_op, local_desc),
		offsetof(struct ferry_recv_op, context),
		sizeof(struct ferry_event),
		offsetof(struct ferry_event, context),
		offsetof(struct ferry_event, length),
		offsetof(struct ferry_event, kind),
		offsetof(struct ferry_event, imm),
		offsetof(struct ferry_event, err),
		offsetof(struct ferry_event, prov_errno),
	};
	int i;
	for (i = 0; i < max && i < (int)(sizeof v / sizeof v[0]); i++)
		out[i] = v[i];
}
