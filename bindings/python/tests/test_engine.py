"""The package against a real libferry: writes verified by immediates over
the in-process transport and over libfabric shm, and typed errors."""

import os
import unittest

import ferry

MIB = 1 << 20


class EngineTest(unittest.TestCase):
    def roundtrip(self, transport, nics):
        try:
            target = ferry.Engine(transport, nics=nics)
        except ferry.NotSupportedError as e:
            self.skipTest("%s cannot run here: %s" % (transport, e))
        with target, ferry.Engine(transport, nics=nics) as writer, \
                ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as dst:
            pattern = bytes((i * 7 + 3) & 0xFF for i in range(MIB))
            src.view()[:] = pattern
            region = target.register(dst, remote_write=True)
            text = region.descriptor_hex()
            landed = target.imm_counter(42)
            paged = target.imm_counter(43)
            source = writer.register(src)
            with ferry.Descriptor.from_hex(text) as remote, ferry.Transfer() as t:
                writer.write(source, remote, length=MIB, imm=42, transfer=t)
                t.wait()
                landed.wait(writer.nics())
                self.assertEqual(bytes(dst.view()), pattern)
                # Pages 3 and 1 of 4 KiB land at pages 0 and 2.
                dst.view()[:] = bytes(MIB)
                writer.write_pages(source, remote, [3, 1], [0, 2], 4096, imm=43, transfer=t)
                t.wait()
                paged.wait(2)
                self.assertEqual(bytes(dst.view()[0:4096]), pattern[3 * 4096:4 * 4096])
                self.assertEqual(bytes(dst.view()[2 * 4096:3 * 4096]), pattern[4096:2 * 4096])
                with self.assertRaises(ferry.OutOfBoundsError):
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

    def test_unknown_transport(self):
        with self.assertRaises(ferry.UnknownTransportError) as cm:
            ferry.Engine("shmm")
        self.assertIn("tcp;ofi_rxm", cm.exception.message)
        self.assertEqual(cm.exception.name, "FERRY_E_UNKNOWN_PROVIDER")

    def test_closed_engine(self):
        e = ferry.Engine("mem")
        counter = e.imm_counter(1)
        e.close()
        with self.assertRaises(ferry.FerryError):
            counter.wait(1, timeout_ms=100)

    def test_transports_and_version(self):
        t = ferry.transports()
        self.assertEqual(t["verbs"], "verbs")
        self.assertEqual(t["shm"], "libfabric")
        self.assertEqual(t["mem"], "mem")
        self.assertTrue(ferry.version().startswith("1."))


if __name__ == "__main__":
    unittest.main()
