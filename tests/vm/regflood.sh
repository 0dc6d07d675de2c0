#!/bin/sh
# Runs inside the VM for make bench-regflood (FERRY_VM_REGFLOOD): a verbs
# flood's throughput while 1 GiB is registered beside it on the same
# group, against quiet windows around it, for four kinds of memory:
# base pages fresh (the registration also allocates and zeroes every
# page: the costly case), base pages prefaulted (it only pins), huge pages
# prefaulted and huge pages fresh; then registration alone on 1, 2 and 4
# NICs. The guest's load and memory come first: the figures are only as
# good as the machine was quiet. Under TCG (no KVM) faulting and pinning a
# GiB of base pages takes most of a minute, so the fresh variants run 2
# rounds, the prefaulted ones 3. FERRY_REGFLOOD_MODES picks the registration modes
# (default beside; on-worker is the engine before, whose flood stops).
set -e
fd=/ferry/bin/fabric-debug
modes=${FERRY_REGFLOOD_MODES:-beside}
echo "== guest: $(nproc) cpus, load $(cat /proc/loadavg)"
# 2 MiB pages for the huge variants: 1 GiB and a margin, reserved now,
# while the guest's memory is not yet fragmented.
echo 560 >/proc/sys/vm/nr_hugepages
grep -E 'MemTotal|MemFree|HugePages_(Total|Free)|Hugepagesize' /proc/meminfo
run() {
	echo "== flood-while-register $*"
	$fd flood-while-register --transport verbs --register 1G --modes "$modes" --timeout 600s "$@"
	echo "== guest load after: $(cat /proc/loadavg)"
}
# Cheapest first, so a run cut short still has those figures. A
# prefaulted GiB registers in a fraction of a second, less than the
# flood's own 64-deep queue takes to drain here, so its windows are kept
# busy with registrations for 5 s (--window) and the rate is measured over
# that; a fresh GiB takes longer than that by itself.
run --rounds 3 --prefault --huge-pages --window 5s --reg-rounds 1 --reg-nics 1,2,4
run --rounds 3 --prefault --window 5s --reg-nics ''
run --rounds 2 --huge-pages --reg-nics ''
run --rounds 2 --reg-nics ''
