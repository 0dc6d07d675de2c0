#!/usr/bin/env bash
# Installs the C libraries ferry links against when pkg-config cannot find
# them. Debian/Ubuntu with apt-get; anything else gets instructions.
# NVRTC, for the kernel compile gate, is deps-nvrtc.sh's and
# deps-cudatools.sh's business (they never fail the build). libfabric 2.1,
# built into .deps/ beside the system's 1.17 so both generations are
# tested, is deps-libfabric2.sh's (it never fails the build either); it
# runs last, once the tools it needs are here.
set -euo pipefail

"$(dirname "$0")/deps-nvrtc.sh"
# NVRTC 12.4 and nvdisasm 11.8/12.4 for the gate's second compiler
# generation and its SASS check, into .deps/ (never fails the build).
"$(dirname "$0")/deps-cudatools.sh"
libfabric2() { "$(dirname "$0")/deps-libfabric2.sh"; }

need_pkgs=()
command -v pkg-config >/dev/null 2>&1 || need_pkgs+=(pkg-config)
if command -v pkg-config >/dev/null 2>&1; then
	pkg-config --exists libfabric || need_pkgs+=(libfabric-dev libfabric-bin)
	pkg-config --exists libibverbs || need_pkgs+=(libibverbs-dev ibverbs-providers)
else
	need_pkgs+=(libfabric-dev libfabric-bin libibverbs-dev ibverbs-providers)
fi
command -v gcc >/dev/null 2>&1 || need_pkgs+=(gcc libc6-dev)
command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++) # the CPU emulator of the kernels
# Open MPI: bench-a2a --backend host times MPI_Alltoallv beside each case.
command -v mpirun >/dev/null 2>&1 || need_pkgs+=(openmpi-bin)
command -v mpicc >/dev/null 2>&1 || need_pkgs+=(libopenmpi-dev)
# fabric/directory/etcd tests run a real etcd server on loopback.
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
for extra in ${FERRY_EXTRA_PKGS:-}; do need_pkgs+=("$extra"); done

if [ ${#need_pkgs[@]} -eq 0 ]; then
	echo "deps: libfabric $(pkg-config --modversion libfabric), libibverbs $(pkg-config --modversion libibverbs)"
	libfabric2
	exit 0
fi

echo "deps: installing ${need_pkgs[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: no apt-get here. Install libfabric (>= 1.17) and libibverbs development files" >&2
	echo "      and pkg-config with your package manager, then run make again." >&2
	exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
		echo "deps: not root and no sudo: run as root: apt-get install -y ${need_pkgs[*]}" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "deps: apt-get update failed (network?)" >&2; exit 1; }
$SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null || {
	echo "deps: apt-get install ${need_pkgs[*]} failed; install them by hand and run make again" >&2
	exit 1
}
echo "deps: libfabric $(pkg-config --modversion libfabric), libibverbs $(pkg-config --modversion libibverbs)"
libfabric2
