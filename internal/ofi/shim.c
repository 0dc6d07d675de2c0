//go:build cgo

/*
 * Discovery, the open/close sequence (kept in C so a failure part way
 * unwinds in one place) and memory registration. The per-operation loops
 * are in datapath.c, the raw benchmark loop in raw.c.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define FERRY_HDR_VERSION FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)

_Static_assert(sizeof(struct ferry_write_op) == 64, "write op is 8 words");
_Static_assert(sizeof(struct ferry_send_op) == 40, "send op is 5 words");
_Static_assert(sizeof(struct ferry_recv_op) == 32, "recv op is 4 words");
_Static_assert(sizeof(struct ferry_event) == 32, "event is 32 bytes");

int ferry_getinfo(const char *prov, const char *node, uint64_t caps, uint64_t mr_mode,
		  uint64_t flags, struct fi_info **out)
{
	return ferry_getinfo_service(prov, node, NULL, caps, mr_mode, flags, out);
}

int ferry_getinfo_service(const char *prov, const char *node, const char *service,
			  uint64_t caps, uint64_t mr_mode, uint64_t flags, struct fi_info **out)
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
	if (service && !*service)
		service = NULL;
	ret = fi_getinfo(ferry_api_version(), node, service, flags, hints, out);
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
 * and no provider-side CUDA copies. The option names are enum constants,
 * not macros, so they are compiled in by header version (CUDA_API_PERMITTED
 * came with 1.18, SHARED_MEMORY_PERMITTED with 1.21). A library older than
 * the headers, or a provider the option does not concern, answers
 * -FI_ENOPROTOOPT: not applicable. */
static int efa_setopts(struct fid_ep *ep)
{
	(void)ep;
#if FERRY_HDR_VERSION >= FI_VERSION(1, 21)
	{
		bool off = false; /* both options take a bool, checked by size */
		int ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_SHARED_MEMORY_PERMITTED, &off,
				sizeof off);
		if (ret && ret != -FI_ENOPROTOOPT)
			return ret;
	}
#endif
#if FERRY_HDR_VERSION >= FI_VERSION(1, 18)
	{
		bool off = false;
		int ret = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CUDA_API_PERMITTED, &off,
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
	e->rules = ferry_gen_rules(fi_version());
	e->delivered_mask = FERRY_WRITE_DELIVERED;

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
