#!/bin/sh
# Runs inside the VM when bench/fabric-debug exists: the device report must
# list rxe0 and rxe1, loopback must carry every workload over the verbs
# provider with 1 and 2 NICs and from 1 NIC to 4 and 4 to 1, verified, and so must a server and a client
# in two processes. Sizes and iterations are small:
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
# Equal groups, then the widest unequal ones (every writer NIC reaches
# every target NIC through the bridge guest-init.sh sets up).
for nm in "1 1" "2 2" "1 4" "4 1"; do
	set -- $nm
	echo "== fabric-debug loopback --provider verbs --nics $1 --target-nics $2"
	$fd loopback --provider verbs --nics "$1" --target-nics "$2" --buffer-mib 8 --sizes 4K --pages 32 \
		--iters 5 --warmup 1 --timeout 60s
done

echo "== fabric-debug serve / client --provider verbs (two processes)"
$fd serve --provider verbs --buffer-mib 8 >/tmp/serve.txt 2>&1 &
srv=$!
addr=""
for i in $(seq 100); do
	addr=$(sed -n 's/.*Main Address: *\([0-9a-f]*\).*/\1/p' /tmp/serve.txt | head -1)
	[ -n "$addr" ] && break
	sleep 0.1
done
[ -n "$addr" ] || { cat /tmp/serve.txt; kill $srv; exit 1; }
rc=0
$fd client "$addr" --provider verbs --buffer-mib 8 --sizes 4K --pages 32 --iters 5 --warmup 1 --timeout 60s || rc=$?
kill $srv 2>/dev/null
wait $srv 2>/dev/null
echo "-- server:"
cat /tmp/serve.txt
exit $rc
