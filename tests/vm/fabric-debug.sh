#!/bin/sh
# Runs inside the VM when bench/fabric-debug exists: the device report and
# a loopback benchmark on the verbs provider (rxe0 and rxe1 are up). It
# fails loudly when fabric-debug cannot run verbs, since that is a bug.
set -e
fd=/ferry/bin/fabric-debug
echo "== fabric-debug info"
$fd info
if ! $fd info 2>&1 | grep -q rxe0; then
	echo "fabric-debug info does not list rxe0 (is the verbs provider imported?)"
	exit 1
fi
echo "== fabric-debug loopback --provider verbs"
$fd loopback --provider verbs
