"""Two processes move a torch tensor with immediates over shm, tcp;ofi_rxm
(127.0.0.1) and ipc, bytes checked; a killed writer is declared lost to a
target that watches it, as a ConnectionError, within the deadline."""

import os
import subprocess
import sys

import pytest

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peer.py")


def spawn(role, transport, env):
    return subprocess.Popen([sys.executable, PEER, role, transport], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def line(p):
    s = p.stdout.readline()
    if not s:
        raise AssertionError("peer exited: %s" % p.stderr.read())
    return s.strip()


@pytest.mark.parametrize("transport", ["shm", "tcp;ofi_rxm", "ipc"])
def test_tensor_with_immediates(transport, helpers):
    target, writer = spawn("target", transport, helpers.env()), spawn("writer", transport, helpers.env())
    try:
        desc = line(target)
        writer.stdin.write(desc + "\n")
        writer.stdin.flush()
        target.stdin.write(line(writer) + "\n")       # the writer's address
        target.stdin.write(line(writer) + "\n")       # how many immediates to wait for
        target.stdin.flush()
        assert line(target) == "ok"
        writer.stdin.write("done\n")
        writer.stdin.flush()
        assert target.wait(60) == 0, target.stderr.read()
        assert writer.wait(60) == 0, writer.stderr.read()
    finally:
        for p in (target, writer):
            p.kill()
            p.wait()


@pytest.mark.parametrize("transport", ["tcp;ofi_rxm", "shm"])
def test_killed_writer_is_lost(transport, helpers):
    if transport == "shm" and not helpers.full:
        pytest.skip("make test-python-full runs the shm case (make test runs tcp;ofi_rxm)")
    target, writer = spawn("watch", transport, helpers.env()), spawn("writer", transport, helpers.env())
    try:
        writer.stdin.write(line(target) + "\n")
        writer.stdin.flush()
        target.stdin.write(line(writer) + "\n")
        target.stdin.flush()
        assert line(target) == "watching"
        line(writer)  # its write is done
        writer.stdin.write("hang\n")
        writer.stdin.flush()
        writer.kill()
        writer.wait()
        target.stdin.write("killed\n")
        target.stdin.flush()
        kind, seconds, callback, typed = line(target).split()[1:]
        # A killed ipc/shm/tcp target is gone for good: the PeerLostError
        # subclass for a stale peer.
        assert kind in ("PeerLostError", "StaleDescriptorError") and typed == "True", (kind, typed)
        assert float(seconds) < 30
        assert callback == "True"
        assert target.wait(60) == 0, target.stderr.read()
    finally:
        for p in (target, writer):
            p.kill()
            p.wait()
