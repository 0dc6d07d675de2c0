#!/bin/busybox sh
# PID 1 of the ferry verbs test VM. Brings up Soft-RoCE (rdma_rxe) on five
# guest-only veth netdevs joined by a bridge, runs every test binary under /ferry/tests and
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
# Every rxe device sits on its own netdev, one end of a veth pair whose
# other end is a port of one bridge, so any device reaches any other
# through the UDP/IP stack, as NICs of two hosts do. rxe alone cannot:
# a packet whose destination MAC is the sending netdev's goes through
# rxe's loopback to the sending device, and a packet the kernel routes
# to a local address goes out on lo, where no rxe device receives it
# (rxe_udp_encap_recv takes the device of the netdev the packet came in
# on). So, for every ordered pair of devices, a policy rule sends
# locally generated traffic from one's address to the other's out of
# the sender's veth (it sits before the local table, whose rule moves
# from pref 0 to 100), the receiving veth accepts a packet from a local
# source (accept_local, no rp_filter), and only the veth that holds an
# address answers ARP for it (arp_ignore=1). A device writing to itself
# keeps rxe's loopback. The rxe UDP socket lives in the initial network
# namespace only (this kernel's rxe has no namespace support), so all
# of this stays in one namespace.
# rxe0-rxe3 (a 4-NIC group) have MTU 9000 (port MTU 4096); rxe4 has
# 1500 (1024): FERRY_VERBS_CROSS pairs rxe0 with it, so a path MTU that
# is not the smaller of the two loses packets (the bridge drops frames
# larger than the egress port's MTU).
NDEV=5
# veth hands each packet to the peer's per-CPU backlog and frees the
# sender's skb at once, so rxe's per-QP limit on packets in flight never
# throttles a sender: a 1 MiB write is 256 packets, and the default
# backlog (1000) drops the tail of a few of them at once (the requester
# then retries; counters in hw_counters.txt, drops in softnet_stat).
echo 262144 >/proc/sys/net/core/netdev_max_backlog
CROSS=rxe0,rxe4
DEVS=""
ipv4conf() { echo "$2" >"/proc/sys/net/ipv4/conf/$1/$3"; }
{
	$IP link add br0 type bridge forward_delay 0 stp_state 0 && $IP link set br0 up &&
		$IP rule del pref 0 && $IP rule add pref 100 lookup local
} || failed "bridge"
for f in all default; do
	ipv4conf $f 0 rp_filter; ipv4conf $f 1 accept_local; ipv4conf $f 1 arp_ignore; ipv4conf $f 2 arp_announce
done
i=0
while [ $i -lt $NDEV ]; do
	mtu=9000
	[ $i = 4 ] && mtu=1500
	{
		$IP link add e$i mtu $mtu type veth peer name p$i mtu $mtu &&
			$IP link set p$i master br0 && $IP link set p$i up &&
			$IP addr add 10.97.0.$((i + 1))/24 dev e$i && $IP link set e$i up &&
			ipv4conf e$i 0 rp_filter && ipv4conf e$i 1 accept_local && ipv4conf e$i 1 arp_ignore &&
			ipv4conf e$i 2 arp_announce &&
			$RDMA link add rxe$i type rxe netdev e$i
	} || failed "rxe$i"
	DEVS="$DEVS rxe$i"
	i=$((i + 1))
done
i=0
while [ $i -lt $NDEV ]; do
	j=0
	while [ $j -lt $NDEV ]; do
		if [ $i != $j ]; then
			$IP rule add pref 10 iif lo from 10.97.0.$((i + 1)) to 10.97.0.$((j + 1)) lookup $((100 + i)) ||
				failed "rule-$i-$j"
		fi
		j=$((j + 1))
	done
	$IP route add 10.97.0.0/24 dev e$i src 10.97.0.$((i + 1)) table $((100 + i)) || failed "route-$i"
	i=$((i + 1))
done
for dev in $DEVS; do
	for k in $(seq 100); do
		[ "$(cat /sys/class/infiniband/$dev/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] && break
		sleep 0.1
	done
	[ "$(cat /sys/class/infiniband/$dev/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] || failed "port-$dev"
done
$IP -br addr show >/tmp/results/net.txt 2>&1
$IP rule show >>/tmp/results/net.txt 2>&1
$RDMA link show
ibv_devinfo -v -d rxe0 >/tmp/results/ibv_devinfo.txt 2>&1
ulimit -l unlimited

# Extra go test flags (-test.run=...) from FERRY_VM_TESTARGS on the host.
ARGS=$(cat /ferry/testargs 2>/dev/null)
# Extra environment (FERRY_VM_LARGE: the large writes and their time).
[ -r /ferry/env ] && . /ferry/env
TT=${FERRY_VM_TEST_TIMEOUT:-600}
# runtest NAME BINARY ARGS...: one run of a test binary, its own timeout;
# ARGS come after FERRY_VM_TESTARGS, so they win.
runtest() {
	name=$1 t=$2
	shift 2
	say "run $name"
	(cd /tmp && FERRY_TEST_REQUIRE=verbs FERRY_VERBS_DEVICES=rxe0,rxe1,rxe2,rxe3 FERRY_VERBS_CROSS=$CROSS \
		timeout $((TT + 20)) "$t" -test.v -test.count=1 -test.timeout "${TT}s" $ARGS "$@") >"/tmp/results/$name.txt" 2>&1
	rc=$?
	grep -E '^(--- |=== RUN|ok|PASS|FAIL|panic)' "/tmp/results/$name.txt" | grep -v '=== RUN' | tail -60
	[ $rc = 0 ] && say "ok $name" || failed "$name (exit $rc)"
}
for t in /ferry/tests/*.test; do
	[ -x "$t" ] || continue
	name=${t##*/}
	# The verbs package's engine conformance suite runs apart from its
	# other tests, each with the whole per-binary time, unless the run
	# was narrowed (FERRY_VM_TESTARGS with -test.run).
	case "$name:$ARGS" in
	*-test.run*) runtest "$name" "$t" ;;
	verbs.test:*)
		runtest "$name" "$t" -test.skip='^TestEngineConformance$'
		runtest "$name-conformance" "$t" -test.run='^TestEngineConformance$' -test.bench='^$'
		;;
	*) runtest "$name" "$t" ;;
	esac
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
# Column 2 of softnet_stat is the packets each CPU's backlog dropped.
{ cat /proc/net/softnet_stat; $IP -s link show; cat /proc/net/snmp /proc/net/stat/arp_cache; } >/tmp/results/netstat.txt 2>&1
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
