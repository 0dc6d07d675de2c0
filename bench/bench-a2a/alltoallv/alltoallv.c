/*
 * alltoallv: the peer bench-a2a times beside each case. Every rank moves
 * the same per-pair byte counts as one iteration of the case with
 * MPI_Alltoallv (MPI_BYTE), once for dispatch and once for combine, and
 * rank 0 prints every rank's timed samples in microseconds:
 *
 *   dispatch <us> <us> ...
 *   combine <us> <us> ...
 *
 * usage: mpirun -np W alltoallv ITERS WARMUP W D[0][0] .. D[W-1][W-1] C[0][0] .. C[W-1][W-1]
 * where X[r][q] is the bytes rank r sends rank q in that phase.
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

/* phase times iters Alltoallv calls after warmup of them, with the byte
 * matrix m (W*W), and gathers the samples on rank 0, which prints them. */
static void phase(const char *name, const long long *m, int W, int rank, int iters, int warmup) {
	int *sc = calloc(W, sizeof(int)), *rc = calloc(W, sizeof(int));
	int *sd = calloc(W, sizeof(int)), *rd = calloc(W, sizeof(int));
	long long st = 0, rt = 0;
	for (int q = 0; q < W; q++) {
		long long s = m[(long long)rank * W + q], r = m[(long long)q * W + rank];
		if (s < 0 || r < 0 || st + s > INT_MAX || rt + r > INT_MAX) fail("byte counts outside [0, INT_MAX]");
		sc[q] = (int)s, rc[q] = (int)r, sd[q] = (int)st, rd[q] = (int)rt;
		st += s, rt += r;
	}
	char *sb = malloc(st ? st : 1), *rb = malloc(rt ? rt : 1);
	double *t = calloc(iters, sizeof(double)), *all = NULL;
	if (!sc || !rc || !sd || !rd || !sb || !rb || !t) fail("out of memory");
	memset(sb, 1, st ? st : 1);
	memset(rb, 0, rt ? rt : 1);
	for (int it = 0; it < warmup + iters; it++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		MPI_Alltoallv(sb, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
		double t1 = MPI_Wtime();
		if (it >= warmup) t[it - warmup] = (t1 - t0) * 1e6;
	}
	if (rank == 0 && !(all = malloc((size_t)iters * W * sizeof(double)))) fail("out of memory");
	MPI_Gather(t, iters, MPI_DOUBLE, all, iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("%s", name);
		for (long long i = 0; i < (long long)iters * W; i++) printf(" %.3f", all[i]);
		printf("\n");
		fflush(stdout);
		free(all);
	}
	free(sc), free(rc), free(sd), free(rd), free(sb), free(rb), free(t);
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 4) return fail("usage: alltoallv ITERS WARMUP W D[W*W] C[W*W]");
	int iters = atoi(argv[1]), warmup = atoi(argv[2]), W = atoi(argv[3]);
	if (iters < 1 || warmup < 0 || W != size) return fail("bad ITERS, WARMUP or W (W must be the job's size)");
	if (argc != 4 + 2 * W * W) return fail("want 2*W*W byte counts");
	long long *m = calloc(2 * (size_t)W * W, sizeof(long long));
	if (!m) return fail("out of memory");
	for (int i = 0; i < 2 * W * W; i++) m[i] = atoll(argv[4 + i]);
	phase("dispatch", m, W, rank, iters, warmup);
	phase("combine", m + (size_t)W * W, W, rank, iters, warmup);
	free(m);
	MPI_Finalize();
	return 0;
}
