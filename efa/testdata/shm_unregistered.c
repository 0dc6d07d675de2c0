/*
 * What libfabric's shm provider does with RMA writes into a region its
 * target has unregistered (fi_close of the MR). Two processes: the parent
 * is the target, the child the writer. The writer writes once into the
 * target's region (key 5), the target closes that MR and the writer writes
 * three more times with the same key (two of LEN bytes, one of 8), then once
 * into a second region (key 6, registered only with the argument "two").
 * Both sides print every completion and error completion they read.
 *
 *   gcc -o /tmp/shmunreg efa/testdata/shm_unregistered.c -lfabric
 *   /tmp/shmunreg one 65536; /tmp/shmunreg two 65536
 *   (FI_LOG_LEVEL=warn shows the target's "unknown key" warnings;
 *   DELIVERY=1 asks for FI_DELIVERY_COMPLETE, CONTEXT_MODE=1 puts FI_CONTEXT
 *   in the hints' mode; against the libfabric that
 *   make deps builds: -I.deps/libfabric-2.1/include -L.deps/libfabric-2.1/lib
 *   -Wl,-rpath,.deps/libfabric-2.1/lib.)
 *
 * Not built with the package (testdata); efa/doc.go's "Unregistered
 * regions" note gives what it showed on 1.17 and 2.1.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define REGION (1 << 20)

static const char *side;
static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_av *av;

static void must(int ret, const char *what)
{
	if (ret) {
		fprintf(stderr, "%s: %s: %s\n", side, what, fi_strerror(-ret));
		exit(1);
	}
}

static void open_endpoint(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA, .size = 1024 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_MSG;
	/* What the engine offers; shm keeps FI_MR_VIRT_ADDR alone. */
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("shm");
	/* The engine asks with no mode bits; with FI_CONTEXT shm answers with
	 * an info whose msg_order lets it take its fast RMA path. */
	if (getenv("CONTEXT_MODE"))
		hints->mode = FI_CONTEXT;
	must(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), "fi_getinfo");
	must(fi_fabric(info->fabric_attr, &fab, NULL), "fi_fabric");
	must(fi_domain(fab, info, &dom, NULL), "fi_domain");
	must(fi_cq_open(dom, &cqa, &cq, NULL), "fi_cq_open");
	must(fi_av_open(dom, &ava, &av, NULL), "fi_av_open");
	must(fi_endpoint(dom, info, &ep, NULL), "fi_endpoint");
	must(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	must(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
	must(fi_enable(ep), "fi_enable");
}

/* Read the queue for secs seconds, printing what comes. Polling is also
 * what makes shm progress either side. */
static void read_cq(double secs)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		struct fi_cq_data_entry c[8];
		ssize_t n = fi_cq_read(cq, c, 8);

		for (ssize_t i = 0; i < n; i++)
			printf("%s: completion context=%p flags=%#llx\n", side, c[i].op_context,
			       (unsigned long long)c[i].flags);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e;
			char text[256];

			memset(&e, 0, sizeof e);
			fi_cq_readerr(cq, &e, 0);
			printf("%s: ERROR completion context=%p flags=%#llx err=%d (%s) prov_errno=%d (%s)\n", side,
			       e.op_context, (unsigned long long)e.flags, e.err, fi_strerror(e.err < 0 ? -e.err : e.err),
			       e.prov_errno, fi_cq_strerror(cq, e.prov_errno, e.err_data, text, sizeof text));
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
}

/* Wait for one byte on fd, polling the queue meanwhile (a shm peer's first
 * write needs the target to progress). */
static void await(int fd)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		char c;

		if (poll(&p, 1, 0) > 0 && read(fd, &c, 1) == 1)
			return;
		read_cq(0.01);
	}
}

static void xfer(int fd, void *p, size_t n, int out)
{
	if ((out ? write(fd, p, n) : read(fd, p, n)) != (ssize_t)n) {
		perror("pipe");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int two = argc > 1 && strcmp(argv[1], "two") == 0;
	size_t len = argc > 2 ? strtoul(argv[2], NULL, 0) : 65536;
	int down[2], up[2];
	pid_t child;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(down) || pipe(up) || len == 0 || len > REGION)
		return 1;
	child = fork();
	if (child) {
		char name[256], *buf = aligned_alloc(4096, REGION), *buf2 = aligned_alloc(4096, REGION);
		size_t namelen = sizeof name;
		struct fid_mr *mr, *mr2 = NULL;
		uint64_t addr = (uintptr_t)buf, addr2 = (uintptr_t)buf2;

		side = "target";
		open_endpoint();
		printf("target: libfabric %s, mr_mode %#x, tx msg_order %#llx\n",
		       fi_tostr(&info->fabric_attr->api_version, FI_TYPE_VERSION), info->domain_attr->mr_mode,
		       (unsigned long long)info->tx_attr->msg_order);
		memset(buf, 0, REGION);
		memset(buf2, 0, REGION);
		must(fi_mr_reg(dom, buf, REGION, FI_REMOTE_WRITE, 0, 5, 0, &mr, NULL), "fi_mr_reg");
		if (two)
			must(fi_mr_reg(dom, buf2, REGION, FI_REMOTE_WRITE, 0, 6, 0, &mr2, NULL), "fi_mr_reg(2)");
		must(fi_getname(&ep->fid, name, &namelen), "fi_getname");
		xfer(down[1], &namelen, sizeof namelen, 1);
		xfer(down[1], name, namelen, 1);
		xfer(down[1], &addr, sizeof addr, 1);
		xfer(down[1], &addr2, sizeof addr2, 1);
		await(up[0]);
		read_cq(0.3);
		printf("target: region 5 byte 0 is %d; closing its MR\n", buf[0]);
		must(fi_close(&mr->fid), "fi_close(mr)");
		xfer(down[1], "u", 1, 1);
		read_cq(4);
		printf("target: region 5 byte 0 is now %d (the writer wrote 9 after the close), region 6 byte 0 %d\n",
		       buf[0], buf2[0]);
		waitpid(child, NULL, 0);
		return 0;
	}

	static struct fi_context ctx[8];
	char name[256], *src = aligned_alloc(4096, REGION);
	size_t namelen;
	uint64_t addr, addr2;
	fi_addr_t peer;
	struct fid_mr *smr;
	void *desc;

	side = "writer";
	open_endpoint();
	xfer(down[0], &namelen, sizeof namelen, 0);
	if (namelen > sizeof name)
		return 1;
	xfer(down[0], name, namelen, 0);
	xfer(down[0], &addr, sizeof addr, 0);
	xfer(down[0], &addr2, sizeof addr2, 0);
	if (fi_av_insert(av, name, 1, &peer, 0, NULL) != 1)
		return 1;
	memset(src, 7, REGION);
	must(fi_mr_reg(dom, src, REGION, FI_WRITE, 0, 9, 0, &smr, NULL), "fi_mr_reg(source)");
	desc = fi_mr_desc(smr);
	for (int i = 0; i < 5; i++) {
		size_t l = i == 3 ? 8 : len;
		uint64_t key = i == 4 ? 6 : 5, to = i == 4 ? addr2 : addr;
		struct iovec iov = { src, l };
		struct fi_rma_iov rma = { to, l, key };
		struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = peer,
					  .rma_iov = &rma, .rma_iov_count = 1, .context = &ctx[i] };
		uint64_t flags = FI_COMPLETION | (getenv("DELIVERY") ? FI_DELIVERY_COMPLETE : 0);
		ssize_t ret;

		if (i == 4 && !two)
			break;
		while ((ret = fi_writemsg(ep, &msg, flags)) == -FI_EAGAIN)
			read_cq(0);
		printf("writer: write %d (key %llu, %zu B%s) posted: %zd, context %p\n", i, (unsigned long long)key,
		       l, i >= 1 && i <= 3 ? ", after the close" : "", ret, (void *)&ctx[i]);
		if (i == 0) {
			read_cq(0.5);
			xfer(up[1], "w", 1, 1);
			await(down[0]);
			memset(src, 9, REGION);
		}
		if (i == 3)
			read_cq(0.5);
	}
	read_cq(2.5);
	printf("writer: done\n");
	return 0;
}
