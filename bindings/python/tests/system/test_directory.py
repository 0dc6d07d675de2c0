"""The directory from Python (ABI 1.3): publish, lookup, select, wait,
regions, watch events, lose-on-leave and errors, on the in-process
directory and on a real etcd server started on loopback (Debian's
etcd-server, as the Go tests start it). Without etcd the etcd cases skip,
or fail where FERRY_TEST_REQUIRE lists etcd."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

import pytest

import ferry


def _required(feature):
    wanted = [f.strip() for f in os.environ.get("FERRY_TEST_REQUIRE", "").split(",")]
    return feature in wanted or "all" in wanted


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def etcd_server():
    """host:port of a one-member etcd on loopback, with its data in a
    temporary directory; killed after the module."""
    binary = shutil.which("etcd")
    if not binary:
        msg = "no etcd binary on PATH (apt-get install etcd-server, or make deps)"
        if _required("etcd"):
            pytest.fail("FERRY_TEST_REQUIRE=%s requires etcd, but: %s" % (os.environ["FERRY_TEST_REQUIRE"], msg))
        pytest.skip(msg)
    d = tempfile.mkdtemp(prefix="ferry-etcd-")
    client, peer = "127.0.0.1:%d" % _free_port(), "127.0.0.1:%d" % _free_port()
    log = open(os.path.join(d, "etcd.log"), "w")
    proc = subprocess.Popen([binary, "--name", "ferry-test", "--data-dir", os.path.join(d, "data"),
                             "--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
                             "--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
                             "--initial-cluster", "ferry-test=http://" + peer, "--initial-cluster-state", "new",
                             "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"],
                            stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://%s/health" % client, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(d, "etcd.log")) as f:
                    pytest.fail("etcd did not start: %s" % f.read()[-2000:])
            time.sleep(0.05)
        yield client
    finally:
        proc.kill()
        proc.wait()
        log.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=["mem", "etcd"])
def url(request):
    name = request.node.name.replace("[", "_").replace("]", "")
    if request.param == "mem":
        return "mem://" + name
    return "etcd://%s/ferry-py/%s" % (request.getfixturevalue("etcd_server"), name)


def test_publish_lookup_watch(url):
    transport = "mem"
    with ferry.Directory(url, ttl=2) as d, ferry.Directory(url, ttl=2) as other, \
            ferry.Engine(transport, liveness_interval=60) as writer, ferry.Engine(transport) as target:
        buf = bytearray(1 << 16)
        region = target.register(buf, remote_write=True)
        src = bytearray(b"\x5a" * 4096)
        source = writer.register(src)
        with d.watch() as w:
            wp = d.publish(writer, "w", {"role": "prefill", "model": "m1"})
            tp = d.publish(target, "t", {"role": "decode", "model": "m1"})
            with pytest.raises(ferry.ExistsError):
                d.publish(target, "w")
            with region.descriptor() as desc:
                tp.add_region("kv", desc, {"layer": "3"})
            ev = w.until(ferry.directory.JOINED, "t", timeout=30)
            assert ev.entry is not None and ev.entry.labels["role"] == "decode"

            e = other.lookup("t")
            assert e.name == "t" and e.nics == target.nics() and e.address == target.address()
            assert e.labels == {"role": "decode", "model": "m1"}
            with pytest.raises(ferry.NotFoundError) as ei:
                other.lookup("nobody")
            assert isinstance(ei.value, LookupError)
            with pytest.raises(ferry.InvalidArgumentError, match="name"):
                other.lookup("a/b")
            assert [x.name for x in other.select("role=decode")] == ["t"]
            assert [x.name for x in other.select("model=m1")] == ["t", "w"]
            assert other.select("role=none") == []
            assert [x.name for x in other.wait_for("model", 2, timeout=30)] == ["t", "w"]
            with pytest.raises(ferry.FerryTimeoutError):
                other.wait_for("model", 3, timeout=0.3)

            desc, meta = other.region("t", "kv")
            with desc, ferry.Transfer() as t:
                assert meta == {"layer": "3"}
                writer.write(source, desc, 4096, done=t)
                t.wait()
            assert bytes(buf[:4096]) == bytes(src)
            with pytest.raises(ferry.NotFoundError):
                other.region("t", "nothing")

            wp.set_labels({"role": "prefill", "load": "7"})
            assert w.until(ferry.directory.UPDATED, "w", timeout=30).entry.labels["load"] == "7"

            # Dropped with its publication open: lost; the writer's peer
            # liveness follows the directory.
            d.lose_on_leave(writer)
            extra = ferry.Directory(url, ttl=2)
            extra.publish(target, "t-again")
            w.until(ferry.directory.JOINED, "t-again", timeout=30)
            extra.close()
            w.until(ferry.directory.LOST, "t-again", timeout=30)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    writer.peer_status(target.address())
                except ferry.PeerLostError:
                    break
                time.sleep(0.01)
            with pytest.raises(ferry.PeerLostError):
                writer.peer_status(target.address())

            wp.close()
            assert w.until(ferry.directory.CLOSED, "w", timeout=30).kind == "closed"
            tp.close()
            w.until(ferry.directory.CLOSED, "t", timeout=30)
            assert list(w.events(idle=0.2)) == []
        source.close()
        region.close()


def test_bad_input():
    with pytest.raises(ferry.InvalidArgumentError, match="url"):
        ferry.Directory("redis://x")
    with pytest.raises(ferry.InvalidArgumentError, match="ttl"):
        ferry.Directory("etcd://127.0.0.1:1/x", ttl=0.5)
    with pytest.raises(ValueError, match="timeout"):
        ferry.Directory("mem://x", timeout=-1)
    with ferry.Directory("mem://bad-input") as d, ferry.Engine("mem") as e:
        with pytest.raises(ferry.InvalidArgumentError, match="name"):
            d.publish(e, "a b")
        with pytest.raises(TypeError):
            d.publish(e, "a", {"k": 1})  # type: ignore[dict-item]
        with pytest.raises(ferry.InvalidArgumentError, match="selector"):
            d.select("a/b")
        with d.watch() as w:
            with pytest.raises(ferry.FerryTimeoutError):
                w.next(0)
        w2 = d.watch()
    with pytest.raises(ferry.ClosedError):
        w2.next(0)
    with pytest.raises(ferry.BadEncodingError):
        ferry.address_from_hex("zz")


def test_address_from_hex():
    with ferry.Engine("mem") as e:
        assert ferry.address_from_hex(e.address_hex()) == e.address()


def test_unreachable(etcd_server):
    t0 = time.monotonic()
    with pytest.raises(ferry.UnavailableError) as ei:
        ferry.Directory("etcd://127.0.0.1:%d/x" % _free_port(), timeout=0.5)
    assert isinstance(ei.value, ConnectionError)
    assert time.monotonic() - t0 < 10


CHILD = textwrap.dedent("""
    import sys, time, ferry
    d = ferry.Directory(sys.argv[1], ttl=2)
    e = ferry.Engine("ipc")
    d.publish(e, "victim", {"role": "prefill"})
    print("ready", flush=True)
    time.sleep(120)
""")


def test_killed_process_is_lost(etcd_server, helpers):
    """A process killed with SIGKILL disappears within the lease TTL, and
    watchers see it lost, not closed."""
    url = "etcd://%s/ferry-py/killed" % etcd_server
    with ferry.Directory(url) as d, d.watch() as w:
        child = subprocess.Popen([sys.executable, "-c", CHILD, url], env=helpers.env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        try:
            line = child.stdout.readline()
            assert line.strip() == "ready", child.stderr.read()
            w.until(ferry.directory.JOINED, "victim", timeout=30)
            assert [e.name for e in d.select("role=prefill")] == ["victim"]
            t0 = time.monotonic()
            child.send_signal(signal.SIGKILL)
            ev = w.until(ferry.directory.LOST, "victim", timeout=60)
            lost = time.monotonic() - t0
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
            child.stderr.close()
        assert ev.kind == "lost"
        print("killed publisher seen lost after %.2f s (lease TTL 2 s)" % lost)
        assert d.select("role=prefill") == []
