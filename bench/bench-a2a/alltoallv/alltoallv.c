/*
 * alltoallv: the peer bench-a2a times beside each case. Every rank moves
 * the same per-pair byte counts as one iteration of the case with
 * MPI_Alltoallv (MPI_BYTE), once for dispatch and once for combine, and
 * rank 0 prints every rank's timed samples in microseconds:
 *
 *   dispatch <us> <us> ...
 *   combine <us> <us> ...
 *
 * usage: mpirun -np W alltoallv step|phase ITERS WARMUP W D[0][0] .. D[W-1][W-1] C[0][0] .. C[W-1][W-1]
 * where X[r][q] is the bytes rank r sends rank q in that phase. step
 * alternates the phases, one of each per iteration, as a step of the
 * all-to-all does; phase runs all of dispatch's calls, then combine's.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *msg) {
	fprintf(stderr, "alltoallv: %s\n", msg);
	MPI_Abort(MPI_COMM_WORLD, 2);
	return 2;
}

/* side is one phase's buffers and counts on this rank. */
struct side {
	int *sc, *rc, *sd, *rd;
	char *sb, *rb;
	double *t;
};

/* setup fills s from the byte matrix m (W*W): what this rank sends each
 * peer and receives from it, with fresh buffers of those sizes. */
static void setup(struct side *s, const long long *m, int W, int rank, int iters) {
	s->sc = calloc(W, sizeof(int)), s->rc = calloc(W, sizeof(int));
	s->sd = calloc(W, sizeof(int)), s->rd = calloc(W, sizeof(int));
	long long st = 0, rt = 0;
	if (!s->sc || !s->rc || !s->sd || !s->rd) fail("out of memory");
	for (int q = 0; q < W; q++) {
		long long a = m[(long long)rank * W + q], b = m[(long long)q * W + rank];
		if (a < 0 || b < 0 || st + a > INT_MAX || rt + b > INT_MAX) fail("byte counts outside [0, INT_MAX]");
		s->sc[q] = (int)a, s->rc[q] = (int)b, s->sd[q] = (int)st, s->rd[q] = (int)rt;
		st += a, rt += b;
	}
	s->sb = malloc(st ? st : 1), s->rb = malloc(rt ? rt : 1);
	s->t = calloc(iters, sizeof(double));
	if (!s->sb || !s->rb || !s->t) fail("out of memory");
	memset(s->sb, 1, st ? st : 1);
	memset(s->rb, 0, rt ? rt : 1);
}

/* call times one MPI_Alltoallv of s, after a barrier, into sample it. */
static void call(struct side *s, int it, int warmup) {
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	MPI_Alltoallv(s->sb, s->sc, s->sd, MPI_BYTE, s->rb, s->rc, s->rd, MPI_BYTE, MPI_COMM_WORLD);
	double t1 = MPI_Wtime();
	if (it >= warmup) s->t[it - warmup] = (t1 - t0) * 1e6;
}

/* report gathers every rank's samples of s on rank 0, which prints them. */
static void report(const char *name, struct side *s, int W, int rank, int iters) {
	double *all = NULL;
	if (rank == 0 && !(all = malloc((size_t)iters * W * sizeof(double)))) fail("out of memory");
	MPI_Gather(s->t, iters, MPI_DOUBLE, all, iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("%s", name);
		for (long long i = 0; i < (long long)iters * W; i++) printf(" %.3f", all[i]);
		printf("\n");
		fflush(stdout);
		free(all);
	}
	free(s->sc), free(s->rc), free(s->sd), free(s->rd), free(s->sb), free(s->rb), free(s->t);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 5) return fail("usage: alltoallv step|phase ITERS WARMUP W D[W*W] C[W*W]");
	int step = strcmp(argv[1], "step") == 0;
	if (!step && strcmp(argv[1], "phase") != 0) return fail("order is step or phase");
	int iters = atoi(argv[2]), warmup = atoi(argv[3]), W = atoi(argv[4]);
	if (iters < 1 || warmup < 0 || W != size) return fail("bad ITERS, WARMUP or W (W must be the job's size)");
	if (argc != 5 + 2 * W * W) return fail("want 2*W*W byte counts");
	long long *m = calloc(2 * (size_t)W * W, sizeof(long long));
	if (!m) return fail("out of memory");
	for (int i = 0; i < 2 * W * W; i++) m[i] = atoll(argv[5 + i]);
	struct side d, c;
	setup(&d, m, W, rank, iters);
	setup(&c, m + (size_t)W * W, W, rank, iters);
	if (step) {
		/* As an all-to-all step runs: dispatch, then combine, each on its
		 * own buffers, so neither finds its bytes left in cache by a call
		 * just like it. */
		for (int it = 0; it < warmup + iters; it++) {
			call(&d, it, warmup);
			call(&c, it, warmup);
		}
	} else {
		/* Each phase's calls back to back on the same buffers. */
		for (int it = 0; it < warmup + iters; it++) call(&d, it, warmup);
		for (int it = 0; it < warmup + iters; it++) call(&c, it, warmup);
	}
	report("dispatch", &d, W, rank, iters);
	report("combine", &c, W, rank, iters);
	free(m);
	MPI_Finalize();
	return 0;
}
