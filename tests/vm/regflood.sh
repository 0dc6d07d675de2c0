#!/bin/sh
# Runs inside the VM for make bench-regflood (FERRY_VM_REGFLOOD): a verbs
# flood's throughput while 1 GiB of fresh memory is registered beside it on
# the same group, against quiet windows around it, with registration kept
# beside the worker (what verbs allows) and on it (the engine before);
# then registration alone on 1, 2 and 4 NICs. The guest's load and memory
# come first: the figures are only as good as the machine was quiet.
set -e
fd=/ferry/bin/fabric-debug
echo "== guest: $(nproc) cpus, load $(cat /proc/loadavg)"
free -m
# Without KVM (the VM then runs under TCG, emulated) a GiB takes a minute
# to fault and pin: 3 rounds beside the flood, 1 alone per NIC count (the
# VM's rxe devices give 2 NICs a group; 4 cannot open). FERRY_REGFLOOD_MODES
# picks the modes (default both).
$fd flood-while-register --transport verbs --register 1G --rounds 3 --reg-rounds 1 --reg-nics 1,2 \
	--modes "${FERRY_REGFLOOD_MODES:-beside,on-worker}" --timeout 1150s
echo "== guest load after: $(cat /proc/loadavg)"
