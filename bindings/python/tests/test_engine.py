"""The package against a real libferry in one process (stdlib only, so
the Go tests can run it with any python3): writes verified by immediates
over the in-process transport and libfabric shm, every kind of write and
completion, callbacks, the side channel, typed errors, and finalisers."""

import array
import gc
import threading
import time
import unittest

import ferry

MIB = 1 << 20


def pattern(n, seed=3):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


class EngineTest(unittest.TestCase):
    def setUp(self):
        gc.collect()
        self.live = ferry.live_handles()

    def tearDown(self):
        gc.collect()
        self.assertEqual(ferry.live_handles(), self.live, "handles leaked")

    def roundtrip(self, transport, nics):
        try:
            target = ferry.Engine(transport, nics=nics)
        except ferry.NotSupportedError as e:
            self.skipTest("%s cannot run here: %s" % (transport, e))
        with target, ferry.Engine(transport, nics=nics) as writer, \
                ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as dst:
            want = pattern(MIB)
            src.view()[:] = want
            region = target.register(dst, remote_write=True)
            text = region.descriptor_hex()
            landed = target.imm_counter(42)
            paged = target.imm_counter(43)
            source = writer.register(src)
            with ferry.Descriptor.from_hex(text) as remote, ferry.Transfer() as t:
                self.assertEqual(remote.nbytes, MIB)
                writer.write(source, remote, imm=42, done=t)
                t.wait()
                landed.wait(writer.nics())
                self.assertEqual(bytes(dst.view()), want)
                # Pages 3 and 1 of 4 KiB land at pages 0 and 2.
                dst.view()[:] = bytes(MIB)
                writer.write_pages(source, remote, [3, 1], [0, 2], 4096, imm=43, done=t)
                t.wait()
                paged.wait(2)
                self.assertEqual(bytes(dst.view()[0:4096]), want[3 * 4096:4 * 4096])
                self.assertEqual(bytes(dst.view()[2 * 4096:3 * 4096]), want[4096:2 * 4096])
                with self.assertRaises(ferry.OutOfBoundsError):
                    writer.write(source, remote, length=16, dst_offset=MIB - 8)
                with self.assertRaises(ValueError):  # OutOfBoundsError is a ValueError
                    writer.write(source, remote, length=16, dst_offset=MIB - 8)
            self.assertEqual(writer.info()["transport"], transport)
            self.assertGreaterEqual(target.stats()["imms"], writer.nics() + 2)
            landed.close()
            paged.close()
            region.close()
            source.close()

    def test_mem(self):
        self.roundtrip("mem", 2)

    def test_shm(self):
        self.roundtrip("shm", 1)

    def test_scatter_barrier_imm_and_completions(self):
        with ferry.Engine("mem", nics=2) as a, ferry.Engine("mem", nics=2) as b:
            src = bytearray(pattern(8192))
            dst1, dst2 = bytearray(4096), array.array("B", bytes(4096))
            s = a.register(src)
            r1, r2 = b.register(dst1, remote_write=True), b.register(dst2, remote_write=True)
            d1 = ferry.Descriptor.from_bytes(r1.descriptor_bytes())
            d2 = ferry.Descriptor.from_hex(r2.descriptor_hex())
            got = b.imm_counter(7)
            counter = ferry.Counter()
            a.scatter(s, [(d1, 1000, 0, 0), (d2, 2000, 4096, 96)], imm=7, done=counter)
            counter.wait(1)
            got.wait(2)
            self.assertEqual(bytes(dst1[:1000]), bytes(src[:1000]))
            self.assertEqual(bytes(dst2[96:2096]), bytes(src[4096:6096]))
            self.assertEqual(counter.read(), (1, 0))
            # Immediate-only writes and a barrier, seen by an expect counter
            # and by the unclaimed-immediate callback.
            fired, unclaimed, ended = [], [], threading.Event()
            b.expect_imm(8, 3, lambda imm: fired.append(imm) or False)
            b.on_imm(unclaimed.append)
            codes = []
            cb = ferry.Callback(lambda code: (codes.append(code), ended.set()))
            a.write_imm(8, d1, done=cb)
            a.barrier(8, [d1, d2], route=("pinned", 1), done=cb)
            a.write_imm(9, d2, route=("pinned", 0))
            deadline = time.monotonic() + 20
            while (not fired or not unclaimed or len(codes) < 2) and time.monotonic() < deadline:
                time.sleep(0.005)
            self.assertEqual(fired, [8])
            self.assertEqual(unclaimed, [9])
            self.assertEqual(codes, [0, 0])
            with self.assertRaises(ValueError):
                a.write_imm(1, d1, route=("diagonal", 0))
            for h in (d1, d2, counter, cb, got):
                h.close()

    def test_send_recv(self):
        with ferry.Engine("mem") as a, ferry.Engine("mem") as b:
            got, done = [], threading.Event()
            b.recv_bouncing(4, 256, lambda m: (got.append(m), done.set()))
            with ferry.Transfer() as t:
                a.send(b.address(), b"hello ferry", done=t)
                t.wait()
            self.assertTrue(done.wait(20))
            self.assertEqual(got, [b"hello ferry"])
            with self.assertRaises(ferry.TooLargeError):
                a.send(b.address(), bytes(1 << 20))
            a.watch_peer(b.address())
            a.peer_status(b.address())  # alive: returns

    def test_connect(self):
        for transport in ("mem", "shm"):
            try:
                a, b, c = ferry.Engine(transport, nics=2), ferry.Engine(transport, nics=2), \
                    ferry.Engine(transport, nics=2)
            except ferry.NotSupportedError as e:
                self.skipTest("%s cannot run here: %s" % (transport, e))
            with a, b, ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as dst:
                a.connect(b.address(), timeout=20)
                a.connect(b.address(), timeout=20)  # again: no change
                a.connect()  # nothing to do
                want = pattern(4096)
                src.view()[:4096] = want
                s, d = a.register(src), b.register(dst, remote_write=True)
                with ferry.Transfer() as t:
                    a.write(s, d.descriptor(), 4096, done=t)
                    t.wait()
                self.assertEqual(bytes(dst.view()[:4096]), want)
                dead = c.address()
                c.close()
                with self.assertRaises(ferry.PeerLostError):
                    a.connect(dead, timeout=10)
                with self.assertRaises(ConnectionError):
                    a.connect(b.address(), dead, timeout=10)
                a.connect(b.address(), timeout=20)
                with self.assertRaises(ValueError):
                    a.connect(b.address(), timeout=-1)
                with self.assertRaises(ferry.BadEncodingError):
                    a.connect(b"\x01", timeout=20)
                s.close()
                d.close()

    def test_buffers_of_every_kind(self):
        with ferry.Engine("mem") as e:
            for obj in (bytearray(64), array.array("d", [1.0] * 8), memoryview(bytearray(32))):
                with e.register(obj, remote_write=True) as r:
                    self.assertEqual(r.nbytes, memoryview(obj).nbytes)
            e.register(b"read-only is fine for a source").close()
            with self.assertRaises(ValueError):
                e.register(b"but not for a target", remote_write=True)
            with self.assertRaises(ValueError):
                e.register(memoryview(bytearray(64))[::2])  # not contiguous
            with self.assertRaises(TypeError):
                e.register(object())
            grow = bytearray(16)
            r = e.register(grow)
            with self.assertRaises(BufferError):
                grow.extend(b"x")  # exported while registered
            r.close()
            grow.extend(b"x")

    def test_unknown_transport(self):
        with self.assertRaises(ferry.UnknownTransportError) as cm:
            ferry.Engine("shmm")
        self.assertIn("tcp;ofi_rxm", cm.exception.message)
        self.assertEqual(cm.exception.name, "FERRY_E_UNKNOWN_PROVIDER")
        self.assertIsInstance(cm.exception, ValueError)

    def test_errors_are_builtins(self):
        self.assertTrue(issubclass(ferry.FerryTimeoutError, TimeoutError))
        self.assertTrue(issubclass(ferry.TimeoutError_, TimeoutError))
        self.assertTrue(issubclass(ferry.PeerLostError, ConnectionError))
        self.assertTrue(issubclass(ferry.InvalidArgumentError, ValueError))
        with ferry.Engine("mem") as e:
            c = e.imm_counter(5)
            t0 = time.monotonic()
            with self.assertRaises(TimeoutError):
                c.wait(1, timeout=0.2)
            self.assertLess(time.monotonic() - t0, 10)
            with self.assertRaises(ValueError):
                c.wait(1, timeout=-1)

    def test_closed_engine(self):
        e = ferry.Engine("mem")
        counter = e.imm_counter(1)
        region = e.register(bytearray(64), remote_write=True)
        e.close()
        e.close()  # idempotent
        self.assertTrue(counter.closed and region.closed)
        with self.assertRaises(ferry.ClosedError):
            counter.wait(1, timeout=0.1)
        with self.assertRaises(ferry.ClosedError):
            e.register(bytearray(8))
        with self.assertRaises(ValueError):  # ClosedError is a ValueError, as for closed files
            e.nics()

    def test_forgotten_engine_is_closed(self):
        e = ferry.Engine("mem")
        e.register(bytearray(64))
        e.imm_counter(3)
        self.assertGreater(ferry.live_handles(), self.live)
        del e
        gc.collect()
        self.assertEqual(ferry.live_handles(), self.live)

    def test_transports_and_version(self):
        t = ferry.transports()
        self.assertEqual(t["verbs"], "verbs")
        self.assertEqual(t["shm"], "libfabric")
        self.assertEqual(t["mem"], "mem")
        self.assertTrue(ferry.version().startswith("1."))


if __name__ == "__main__":
    unittest.main()
