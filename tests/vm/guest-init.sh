#!/bin/busybox sh
# PID 1 of the ferry verbs test VM. Brings up Soft-RoCE (rdma_rxe) on two
# guest-only dummy netdevs and on a guest-only veth pair, runs every test binary under /ferry/tests and
# the programs under /ferry/run, ships the logs out over the second serial
# port as a tar stream, reports the verdict through isa-debug-exit and
# powers off. Nothing here touches the host: the VM has no NIC.
/bin/busybox --install -s 2>/dev/null
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
# Debian's static busybox prefers its own applets, and its ip cannot create
# dummy links: call iproute2 by full path.
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /tmp/results
KV=$(uname -r)
say() { echo "ferry-vm [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
FAILED=""
failed() { say "FAIL: $*"; FAILED="$FAILED $1"; }

say "kernel $KV"
while read -r mod args; do
	[ -n "$mod" ] && { insmod "/lib/modules/$KV/$mod" $args || failed "insmod-$mod"; }
done </etc/ferry-modules

$IP link set lo up
n=0
for dev in rxe0 rxe1; do
	$IP link add d$n type dummy && $IP link set d$n up && $IP addr add 10.99.$n.1/24 dev d$n ||
		failed "netdev-d$n"
	# rxe derives the port's active MTU from the netdev's; 9000 gives 4096.
	$IP link set d$n mtu 9000
	$RDMA link add $dev type rxe netdev d$n || failed "rdma-link-$dev"
	n=$((n + 1))
done
# rxe2 and rxe3 sit on the two ends of a veth pair, with policy routing so
# that traffic between their addresses really crosses it (RoCE v2 through
# the UDP/IP stack) instead of short-cutting through lo or rxe's internal
# loopback. Their MTUs differ (9000 -> active 4096, 1500 -> 1024), so a
# path MTU that is not the smaller of the two loses packets.
CROSS=rxe2,rxe3
{
	$IP link add v0 type veth peer name v1 &&
		$IP addr add 10.98.0.1/24 dev v0 && $IP addr add 10.98.0.2/24 dev v1 &&
		$IP link set v0 mtu 9000 && $IP link set v0 up && $IP link set v1 up &&
		$IP rule add pref 10 iif lo lookup 100 &&
		$IP route add 10.98.0.2 dev v0 src 10.98.0.1 table 100 &&
		$IP route add 10.98.0.1 dev v1 src 10.98.0.2 table 100 &&
		$IP rule del pref 0 && $IP rule add pref 100 lookup local &&
		for f in all default v0 v1; do
			echo 1 >/proc/sys/net/ipv4/conf/$f/accept_local
			echo 0 >/proc/sys/net/ipv4/conf/$f/rp_filter
		done &&
		$RDMA link add rxe2 type rxe netdev v0 && $RDMA link add rxe3 type rxe netdev v1
} || { failed "veth-rxe"; CROSS=""; }
for i in $(seq 50); do
	[ "$(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] &&
		[ "$(cat /sys/class/infiniband/rxe3/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] && break
	sleep 0.1
done
$RDMA link show
ibv_devinfo -v -d rxe0 >/tmp/results/ibv_devinfo.txt 2>&1
ulimit -l unlimited

# Extra go test flags (-test.run=...) from FERRY_VM_TESTARGS on the host.
ARGS=$(cat /ferry/testargs 2>/dev/null)
# Extra environment (FERRY_VM_LARGE: the large writes and their time).
[ -r /ferry/env ] && . /ferry/env
TT=${FERRY_VM_TEST_TIMEOUT:-600}
for t in /ferry/tests/*.test; do
	[ -x "$t" ] || continue
	name=${t##*/}
	say "run $name"
	(cd /tmp && FERRY_TEST_REQUIRE=verbs FERRY_VERBS_DEVICES=rxe0,rxe1 FERRY_VERBS_CROSS=$CROSS \
		timeout $((TT + 20)) "$t" -test.v -test.count=1 -test.timeout "${TT}s" $ARGS) >"/tmp/results/$name.txt" 2>&1
	rc=$?
	grep -E '^(--- |=== RUN|ok|PASS|FAIL|panic)' "/tmp/results/$name.txt" | grep -v '=== RUN' | tail -60
	[ $rc = 0 ] && say "ok $name" || failed "$name (exit $rc)"
done
for r in /ferry/run/*.sh; do
	[ -e "$r" ] || continue
	name=${r##*/}
	say "run $name"
	(cd /tmp && timeout "${FERRY_VM_RUN_TIMEOUT:-120}" /bin/sh "$r") >"/tmp/results/$name.txt" 2>&1
	rc=$?
	tail -20 "/tmp/results/$name.txt"
	[ $rc = 0 ] && say "ok $name" || failed "$name (exit $rc)"
done

for c in /sys/class/infiniband/rxe*/ports/1/hw_counters/*; do
	[ -e "$c" ] && echo "$c $(cat "$c")"
done >/tmp/results/hw_counters.txt 2>/dev/null
dmesg >/tmp/results/dmesg.txt 2>/dev/null
if [ -z "$FAILED" ]; then
	say "RESULT PASS"
	code=0
else
	say "RESULT FAIL:$FAILED"
	code=1
fi
if [ -e /dev/ttyS1 ]; then
	stty -F /dev/ttyS1 raw -echo 2>/dev/null
	tar -C /tmp/results -cf - . >/dev/ttyS1
fi
# qemu exits with (code << 1) | 1 when the guest writes code to port 0xf4.
printf "\\$(printf %03o $code)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
