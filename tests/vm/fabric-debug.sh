#!/bin/sh
# Runs inside the VM when bench/fabric-debug exists: the device report must
# list rxe0 and rxe1, and loopback must carry every workload over the verbs
# provider with 1 and 2 NICs, verified. Sizes and iterations are small:
# under TCG, Soft-RoCE moves tens of MB/s, and these are checks, not
# measurements.
set -e
fd=/ferry/bin/fabric-debug
echo "== fabric-debug info"
$fd info >/tmp/info.txt 2>&1 || { cat /tmp/info.txt; exit 1; }
cat /tmp/info.txt
for dev in rxe0 rxe1; do
	grep -q "$dev" /tmp/info.txt || { echo "fabric-debug info does not list $dev"; exit 1; }
done
for nics in 1 2; do
	echo "== fabric-debug loopback --provider verbs --nics $nics"
	$fd loopback --provider verbs --nics $nics --buffer-mib 8 --sizes 4K --pages 32 \
		--iters 5 --warmup 1 --timeout 60s
done
