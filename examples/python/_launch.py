"""What the Python examples share: run this script once per rank (each a
child process joined to the others through ferry's rendezvous), and the
engine options per transport."""

import os
import socket
import subprocess
import sys
import time

import ferry


def transport_options(transport):
    """(engine transport, keyword arguments) for a -provider name."""
    if transport == "tcp":
        return "tcp;ofi_rxm", {"node": "127.0.0.1"}
    return transport, {}


def spawn(world, argv, timeout):
    """Re-runs this script as world child processes (rank 0..world-1) and
    returns the worst exit status (3: a wrong byte, 1: any other failure)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master = "127.0.0.1:%d" % s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, FERRY_RANK=str(r), FERRY_WORLD_SIZE=str(world), FERRY_MASTER=master,
                   FERRY_JOB_TOKEN="example")
        procs.append(subprocess.Popen([sys.executable, sys.argv[0]] + argv + ["--rank-child"], env=env))
    deadline = time.monotonic() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(max(1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            codes.append(1)
    return 3 if 3 in codes else max(codes)


def join(timeout):
    """This child's group (the FERRY_* variables spawn set)."""
    return ferry.Group(timeout=timeout)
