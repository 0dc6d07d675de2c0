"""Reads (library 1.5) from Python: Engine.read, read_pages and
scatter_read verified byte for byte over the in-process transport and
libfabric shm, a region registered without remote_read refused with
NotReadableError (a PermissionError) where the transport checks, bad input
refused, and expected_imms against what a write really delivers between
groups of unequal NIC counts."""

import gc
import unittest

import ferry

MIB = 1 << 20


def pattern(n, seed=5):
    return bytes((i * 31 + (i >> 9) + seed) & 0xFF for i in range(n))


class ReadTest(unittest.TestCase):
    def setUp(self):
        gc.collect()
        self.live = ferry.live_handles()
        if ferry.abi_version() < (1, 5, 0):
            self.skipTest("libferry %s has no reads" % ferry.version())

    def tearDown(self):
        gc.collect()
        self.assertEqual(ferry.live_handles(), self.live, "handles leaked")

    def reads(self, transport, nics):
        try:
            peer = ferry.Engine(transport, nics=nics)
        except ferry.NotSupportedError as e:
            self.skipTest("%s cannot run here: %s" % (transport, e))
        with peer, ferry.Engine(transport, nics=nics) as reader, ferry.Engine(transport, nics=nics) as third, \
                ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as src2, ferry.HostBuffer(MIB) as dst:
            want, want2 = pattern(MIB), pattern(MIB, seed=9)
            src.view()[:] = want
            src2.view()[:] = want2
            readable = peer.register(src, remote_read=True)
            readable2 = third.register(src2, remote_read=True)
            local = reader.register(dst)
            with ferry.Descriptor.from_hex(readable.descriptor_hex()) as remote, \
                    readable2.descriptor() as remote2, ferry.Transfer() as t:
                # The whole region, then odd ranges pinned and sharded.
                reader.read(local, remote, done=t)
                t.wait()
                self.assertEqual(bytes(dst.view()), want)
                for n, so, do, route in [(1, 0, 0, ("pinned", 0)), (4097, 4093, 17, None),
                                         (65537, 3, 5, ("sharded", nics)), (7, 11, 1, ("pinned", nics - 1))]:
                    dst.view()[:] = bytes(MIB)
                    reader.read(local, remote, n, src_offset=so, dst_offset=do, route=route, done=t)
                    t.wait()
                    self.assertEqual(bytes(dst.view()[do:do + n]), want[so:so + n], (n, so, do))
                    self.assertEqual(dst.view()[do + n], 0, "byte after the range")
                # Pages 3 and 1 of 4 KiB land at pages 0 and 2.
                dst.view()[:] = bytes(MIB)
                reader.read_pages(local, remote, [0, 2], [3, 1], 4096, done=t)
                t.wait()
                self.assertEqual(bytes(dst.view()[0:4096]), want[3 * 4096:4 * 4096])
                self.assertEqual(bytes(dst.view()[2 * 4096:3 * 4096]), want[4096:2 * 4096])
                self.assertEqual(bytes(dst.view()[4096:2 * 4096]), bytes(4096))
                # Scatter reads from two peers, every routing.
                sources = [(remote, 100, 11, 0), (remote2, 70001, 3, 200), (remote, 0, 0, 80000),
                           (remote2, 300000, 999, 90001)]
                for route in [None, ("shard_bytes", 0), ("pinned", nics - 1)]:
                    dst.view()[:] = bytes(MIB)
                    reader.scatter_read(local, sources, route=route, done=t)
                    t.wait()
                    self.assertEqual(bytes(dst.view()[0:100]), want[11:111], route)
                    self.assertEqual(bytes(dst.view()[200:70201]), want2[3:70004], route)
                    self.assertEqual(bytes(dst.view()[90001:390001]), want2[999:300999], route)
                    self.assertEqual(dst.view()[70201], 0, route)
                # Bad input, refused at submit.
                with self.assertRaises(ferry.OutOfBoundsError):
                    reader.read(local, remote, 16, src_offset=MIB - 8)
                with self.assertRaises(ferry.OutOfBoundsError):
                    reader.read(local, remote, 16, dst_offset=MIB - 8)
                with self.assertRaises(ferry.InvalidArgumentError):
                    reader.scatter_read(local, [])
                with self.assertRaises(ValueError):
                    reader.read_pages(local, remote, [0], [0, 1], 16)
                # A write-only region: refused where the target checks.
                if transport in ("mem", "ipc"):
                    wonly = peer.register(src, remote_write=True)
                    with wonly.descriptor() as wd:
                        dst.view()[:4096] = bytes(4096)
                        reader.read(local, wd, 4096, route=("pinned", 0), done=t)
                        with self.assertRaises(ferry.NotReadableError) as cm:
                            t.wait()
                        self.assertIsInstance(cm.exception, PermissionError)
                        self.assertEqual(bytes(dst.view()[:4096]), bytes(4096), "a refused read moved bytes")
                    wonly.close()
            local.close()
            readable.close()
            readable2.close()

    def test_mem(self):
        self.reads("mem", 2)

    def test_shm(self):
        self.reads("shm", 1)

    def test_expected_imms(self):
        self.assertEqual(ferry.expected_imms("single", 1, 4), 4)
        self.assertEqual(ferry.expected_imms("single", 2, 2, route=("pinned", 1)), 1)
        self.assertEqual(ferry.expected_imms("single", 2, 1, route=("sharded", 3)), 0)
        self.assertEqual(ferry.expected_imms("paged", 4, 1, count=37), 37)
        self.assertEqual(ferry.expected_imms("scatter", 4, 2, count=5), 5)
        self.assertEqual(ferry.expected_imms("scatter", 4, 2, count=5, route=("shard_bytes", 0)), 20)
        self.assertEqual(ferry.expected_imms("imm", 1, 1), 1)
        self.assertEqual(ferry.expected_imms("barrier", 2, 4, count=3), 3)
        with self.assertRaises(ValueError):
            ferry.expected_imms("bogus", 1, 1)
        with self.assertRaises(ferry.InvalidArgumentError):
            ferry.expected_imms("single", 0, 1)
        with self.assertRaises(ferry.InvalidArgumentError):
            ferry.expected_imms("paged", 1, 5, count=1)
        with self.assertRaises(ferry.InvalidArgumentError):
            ferry.expected_imms("paged", 1, 1, count=-1)

    def test_expected_imms_delivered(self):
        """A sharded write from a 1-NIC engine into a 4-NIC engine's region
        (and back) delivers exactly what expected_imms says."""
        for wn, tn in [(1, 4), (4, 1), (2, 4)]:
            with ferry.Engine("mem", nics=tn) as target, ferry.Engine("mem", nics=wn) as writer, \
                    ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as dst:
                src.view()[:] = pattern(MIB)
                region = target.register(dst, remote_write=True)
                source = writer.register(src)
                with region.descriptor() as d, ferry.Transfer() as t:
                    n = ferry.expected_imms("single", writer.nics(), d.info()[2])
                    self.assertEqual(n, max(wn, tn))
                    landed = target.imm_counter(77)
                    writer.write(source, d, imm=77, done=t)
                    t.wait()
                    landed.wait(n)
                    self.assertEqual(landed.count(), 0, "more immediates than expected")
                    self.assertEqual(bytes(dst.view()), pattern(MIB))
                    landed.close()
                source.close()
                region.close()


if __name__ == "__main__":
    unittest.main()
