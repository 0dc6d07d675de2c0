#!/usr/bin/env bash
# ipc against its peers on this host, in interleaved cycles: each cycle
# takes one sample of every contender, so all of them see the same (often
# shared and busy) machine, and the ratios of one cycle compare. Prints a
# row per cycle and the medians.
#
#   memcpy   one thread of glibc memcpy, 64 MiB (C, 40 copies)
#   ucx      ucx_perftest -t put_bw -x posix, 64 MiB (UCX's shared memory)
#   ipc/shm  fabric-debug loopback --workloads single --sizes 64M
#   paged    fabric-debug loopback --workloads paged --sizes 64 --pages 10000
#
# Bandwidths in GB/s (10^9 B/s), paged rates in Mop/s. Needs gcc and
# ucx-utils (apt-get install -y ucx-utils). Usage: scripts/ipc-compare.sh [cycles]
set -euo pipefail
cycles=${1:-8}
root=$(cd "$(dirname "$0")/.." && pwd)
command -v ucx_perftest >/dev/null || { echo "ipc-compare: ucx_perftest missing: apt-get install -y ucx-utils" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/memcpy.c" <<'EOF'
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
	size_t n = 64 << 20; int iters = 40;
	char *a = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *b = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(a, 1, n); memset(b, 2, n); memcpy(b, a, n);
	double t = now();
	for (int i = 0; i < iters; i++) { memcpy(b, a, n); __asm__ volatile("" ::"r"(b) : "memory"); }
	printf("%.2f\n", n * (double)iters / (now() - t) / 1e9);
	return 0;
}
EOF
gcc -O2 -o "$work/memcpy" "$work/memcpy.c"
(cd "$root" && go build -o "$work/fabric-debug" ./bench/fabric-debug)
fd="$work/fabric-debug"

ucx() {
	local port=$((20000 + RANDOM % 20000)) srv
	ucx_perftest -t put_bw -x posix -d memory -s 67108864 -n 40 -w 5 -p "$port" >/dev/null 2>&1 &
	srv=$!
	sleep 0.3
	timeout 60 ucx_perftest localhost -t put_bw -x posix -d memory -s 67108864 -n 40 -w 5 -p "$port" 2>&1 |
		awk '/Final/ {printf "%.2f", $7 * 1.048576 / 1000}' # MB/s of 2^20 B
	wait "$srv" || true
}
single() { "$fd" loopback --provider "$1" --workloads single --sizes 64M --iters 40 --warmup 5 2>&1 | awk '/^  single/ {printf "%.2f", $10 / 8}'; }
paged() { "$fd" loopback --provider "$1" --workloads paged --sizes 64 --pages 10000 2>&1 | awk '/^  paged/ {printf "%.2f", $11}'; }

echo "cycle memcpy ucx ipc shm ipc/ucx ipc/memcpy paged_ipc paged_shm paged_ratio load" | tee "$work/rows"
for c in $(seq 1 "$cycles"); do
	m=$("$work/memcpy"); u=$(ucx); i=$(single ipc); s=$(single shm); pi=$(paged ipc); ps=$(paged shm)
	awk -v c="$c" -v m="$m" -v u="$u" -v i="$i" -v s="$s" -v pi="$pi" -v ps="$ps" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
		'BEGIN {printf "%d %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.1f %s\n", c, m, u, i, s, i/u, i/m, pi, ps, pi/ps, l}' | tee -a "$work/rows"
done
median() { sort -g | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
printf "median"
k=2
for name in memcpy ucx ipc shm ipc/ucx ipc/memcpy paged_ipc paged_shm paged_ratio; do
	printf " %s=%s" "$name" "$(awk -v k=$k 'NR > 1 {print $k}' "$work/rows" | median)"
	k=$((k + 1))
done
echo
