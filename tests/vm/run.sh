#!/usr/bin/env bash
# make test-verbs: runs ferry's verbs provider against a real verbs device,
# Soft-RoCE (rdma_rxe), inside a small VM that boots Debian's kernel.
#
# Steps: install the host packages that are missing (apt-get), build the
# test binaries on the host (cgo), build the VM image (image.sh), boot it
# with qemu (KVM when it can run a stock kernel, else TCG), collect the
# guest's logs from the second serial port, and exit non-zero on any
# failure or when the guest gives no verdict.
#
# Environment:
#   FERRY_VM_DIR   work and cache directory (default <repo>/.vm)
#   FERRY_VM_STAGE a directory with tests/*.test, bin/*, run/*.sh already
#                  built: skip the Go build
#   FERRY_VM_TESTARGS flags for every test binary (-test.run=...); the
#                  default runs each benchmark once
#   FERRY_VM_LARGE=1 runs only the large verbs writes instead (1 GiB + 1 B,
#                  single, paged and scatter, verified: tests' TestLargeWrites),
#                  in a VM of VM_MEM MiB (default then 4096; both buffers are
#                  pinned whole); make test-large
#   FERRY_VM_REGFLOOD=1 runs only fabric-debug flood-while-register over
#                  verbs (a flood's throughput while 1 GiB is registered
#                  beside it, base and huge pages, fresh and prefaulted;
#                  registration time on 1, 2, 4 NICs: regflood.sh) in a VM
#                  of VM_MEM MiB (default then 4096: 1 GiB is pinned whole
#                  and 1.1 GiB is reserved as huge pages); make bench-regflood
#   VM_MEM         the VM's memory in MiB (default 2048)
#   ACCEL          kvm | tcg | auto (default auto)
#   VM_TIMEOUT     seconds before the VM is killed (default 900; a normal
#                  run takes well under a minute, a loaded machine 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${FERRY_VM_DIR:-$repo/.vm}
mkdir -p "$work"
# One VM at a time per work directory: concurrent make runs queue here.
exec 9>"$work/lock"
flock 9
t0=$(date +%s.%N)
lap() { awk -v a="$t0" -v b="$(date +%s.%N)" -v s="$1" 'BEGIN { printf "test-verbs: %-34s %6.1fs\n", s, b - a }'; }

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v depmod >/dev/null || need+=(kmod)
[ -x /usr/bin/rdma ] || need+=(iproute2)
ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so >/dev/null 2>&1 || need+=(ibverbs-providers)
command -v ibv_devinfo >/dev/null || need+=(ibverbs-utils)
command -v xz >/dev/null || need+=(xz-utils)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "test-verbs: missing ${need[*]}; run as root (apt-get install) or install them" >&2
		exit 1
	fi
	echo "test-verbs: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	lap "apt-get install"
fi

stage=${FERRY_VM_STAGE:-}
if [ -z "$stage" ]; then
	stage=$work/stage
	rm -rf "$stage"
	mkdir -p "$stage/tests" "$stage/bin" "$stage/run"
	export PATH=/usr/local/go/bin:$PATH
	cd "$repo"
	if [ -n "${FERRY_VM_REGFLOOD:-}" ]; then
		go build -o "$stage/bin/fabric-debug" ./bench/fabric-debug
		cp "$here/regflood.sh" "$stage/run/"
		printf 'export FERRY_VM_RUN_TIMEOUT=2300 FERRY_REGFLOOD_MODES=%s\n' "${FERRY_REGFLOOD_MODES:-beside}" >"$stage/env"
	elif [ -n "${FERRY_VM_LARGE:-}" ]; then
		CGO_ENABLED=1 go test -c -o "$stage/tests/large.test" ./tests
		printf '%s\n' 'export FERRY_TEST_LARGE=1 FERRY_TEST_LARGE_TRANSPORTS=verbs FERRY_VM_TEST_TIMEOUT=1700' >"$stage/env"
	else
	# Every package with verbs tests; add new ones here.
	for pkg in ./internal/ibv ./verbs; do
		name=$(basename "$pkg")
		CGO_ENABLED=1 go test -c -o "$stage/tests/$name.test" "$pkg"
	done
	# The conformance suite of the engine, when it exists.
	if [ -d fabric/conformance ]; then
		CGO_ENABLED=1 go test -c -o "$stage/tests/conformance.test" ./fabric/conformance
	fi
	fi
	if [ -z "${FERRY_VM_LARGE:-}${FERRY_VM_REGFLOOD:-}" ] && [ -d bench/fabric-debug ]; then
		go build -o "$stage/bin/fabric-debug" ./bench/fabric-debug
		cp "$here/fabric-debug.sh" "$stage/run/"
	fi
	lap "go build"
fi
# By default every benchmark also runs once, as a smoke test.
if [ -n "${FERRY_VM_LARGE:-}" ]; then
	printf '%s\n' "${FERRY_VM_TESTARGS:--test.run=^TestLargeWrites\$}" >"$stage/testargs"
else
	printf '%s\n' "${FERRY_VM_TESTARGS:--test.bench=. -test.benchtime=1x}" >"$stage/testargs"
fi

"$here/image.sh" "$work" "$stage"
lap "image"

accel=${ACCEL:-auto}
if [ "$accel" = auto ]; then
	# A PVM host (kvm_pvm) has /dev/kvm but runs only PVM guest kernels.
	accel=tcg
	if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then accel=kvm; fi
fi
case $accel in
kvm) acc=(-accel kvm -cpu host) ;;
*) acc=(-accel tcg,thread=multi -cpu max) ;;
esac
console=$work/console.log
results=$work/results.tar
rm -f "$results"
echo "test-verbs: booting ($accel); console in $console"
set +e
mem=${VM_MEM:-2048}
vmtimeout=${VM_TIMEOUT:-1200}
if [ -n "${FERRY_VM_LARGE:-}" ]; then
	mem=${VM_MEM:-4096}
	vmtimeout=${VM_TIMEOUT:-1800}
fi
if [ -n "${FERRY_VM_REGFLOOD:-}" ]; then
	mem=${VM_MEM:-4096}
	vmtimeout=${VM_TIMEOUT:-2400}
fi
timeout --foreground "$vmtimeout" qemu-system-x86_64 "${acc[@]}" -m "$mem" -smp 2 \
	-machine pc -nodefaults -nographic -no-reboot -display none -net none \
	-serial "file:$console" -serial "file:$results" \
	-device isa-debug-exit,iobase=0xf4,iosize=0x04 \
	-kernel "$work/vmlinuz" -initrd "$work/initramfs.gz" \
	-append "console=ttyS0 panic=-1 loglevel=3" </dev/null
rc=$?
set -e
lap "vm"
rm -rf "$work/results"
mkdir -p "$work/results"
tar -C "$work/results" -xf "$results" 2>/dev/null || true
tr -d '\r' <"$console" | grep -E '^ferry-vm|^(--- |ok |FAIL|PASS|panic)' || true
echo "test-verbs: logs in $work/results"
case $rc in
1) echo "test-verbs: PASS" ;;
3) echo "test-verbs: FAIL"; exit 1 ;;
*) echo "test-verbs: no verdict from the VM (qemu exit $rc)"; tr -d '\r' <"$console" | tail -30; exit 2 ;;
esac
