"""Library 1.6 through the package: notifications attached to writes,
paged writes and scatters (each target finds every byte of its request in
place when its notification arrives), mailboxes that queue MAILBOX_DEPTH
notifications in order, a second sender's notification reported lost,
registration stats and huge-page host buffers."""

import mmap
import unittest

import ferry
from ferry import _abi


def pattern(n, seed=7):
    return bytes((i * 131 + seed + (i >> 12)) % 251 for i in range(n))


def needs_16(test):
    if ferry.abi_version() < (1, 6, 0):
        test.skipTest("libferry %s predates 1.6" % ferry.version())


class NotifiedTest(unittest.TestCase):
    def setUp(self):
        needs_16(self)

    def engines(self, transport, nics, n=2):
        try:
            es = [ferry.Engine(transport, nics=nics, node="127.0.0.1" if transport.startswith("tcp") else None)
                  for _ in range(n)]
        except ferry.NotSupportedError as e:
            self.skipTest("%s cannot open here: %s" % (transport, e))
        for e in es:
            self.addCleanup(e.close)
        return es

    def check_write_and_paged(self, transport, nics):
        a, b = self.engines(transport, nics)
        size = 3 << 20
        src = ferry.HostBuffer(size)
        src.view()[:] = pattern(size)
        dst = ferry.HostBuffer(size)
        s = a.register(src)
        r = b.register(dst, remote_write=True)
        d = ferry.Descriptor.from_bytes(r.descriptor_bytes())
        with b.lease_imms(1) as lease:
            box = lease.mailbox()
            t = ferry.Transfer()
            a.write(s, d, size - 9, src_offset=5, dst_offset=9, route=("sharded", 0), notify=(box, b"single"), done=t)
            payload, _ = lease.wait_notification()
            # Every byte is in place the moment the notification is.
            self.assertEqual(bytes(dst.view()[9:]), bytes(src.view()[5:size - 4]))
            self.assertEqual(payload, b"single")
            t.wait()
            dst.view()[:] = bytes(size)
            pages = list(range(40))
            a.write_pages(s, d, pages[::-1], pages, 65536, dst_offset=3, notify=(box, bytearray(b"paged")), done=t)
            payload, _ = lease.wait_notification()
            for i in pages:
                j = 39 - i
                self.assertEqual(bytes(dst.view()[3 + i * 65536:3 + (i + 1) * 65536]),
                                 bytes(src.view()[j * 65536:(j + 1) * 65536]), "page %d" % i)
            self.assertEqual(payload, b"paged")
            t.wait()
            with self.assertRaises(ferry.NotifyTooLargeError):
                a.write(s, d, 16, notify=(box, b"x" * (_abi.MAX_NOTIFY_PAYLOAD + 1)))
            with self.assertRaises(ferry.BadEncodingError):
                a.write(s, d, 16, notify=(b"\x09" * 8, b""))
        r.close()
        s.close()
        d.close()

    def test_write_and_paged_mem(self):
        self.check_write_and_paged("mem", 2)

    def test_write_and_paged_tcp(self):
        self.check_write_and_paged("tcp;ofi_rxm", 2)

    def test_scatter_one_notification_per_peer(self):
        a, b, c = self.engines("mem", 2, n=3)
        src = bytearray(pattern(4 << 20))
        s = a.register(src)
        dsts = [bytearray(2 << 20), bytearray(2 << 20)]
        regs = [b.register(dsts[0], remote_write=True), c.register(dsts[1], remote_write=True)]
        descs = [ferry.Descriptor.from_bytes(x.descriptor_bytes()) for x in regs]
        leases = [b.lease_imms(1), c.lease_imms(1)]
        for route in (("sharded", 0), ("shard_bytes", 0)):
            for x in dsts:
                x[:] = bytes(len(x))
            targets = [(descs[0], 1 << 20, 0, 1), (descs[1], 700001, 3, 0), (descs[0], 4096, 3 << 20, (1 << 20) + 8)]
            t = ferry.Transfer()
            a.scatter(s, targets, route=route, notify=[(leases[0].mailbox(), b"b"), (leases[1].mailbox(), b"c")],
                      done=t)
            self.assertEqual(leases[0].wait_notification()[0], b"b")
            self.assertEqual(bytes(dsts[0][1:1 + (1 << 20)]), bytes(src[:1 << 20]))
            self.assertEqual(bytes(dsts[0][(1 << 20) + 8:(1 << 20) + 4104]), bytes(src[3 << 20:(3 << 20) + 4096]))
            self.assertEqual(leases[1].wait_notification()[0], b"c")
            self.assertEqual(bytes(dsts[1][:700001]), bytes(src[3:700004]))
            t.wait()
        for x in leases + regs + descs + [s]:
            x.close()

    def test_mailbox_queues_and_reports_losses(self):
        a, b, c = self.engines("mem", 1, n=3)
        src = bytearray(4096)
        s, sc = a.register(src), c.register(bytearray(4096))
        dst = bytearray(1 << 16)
        r = b.register(dst, remote_write=True)
        d = ferry.Descriptor.from_bytes(r.descriptor_bytes())
        with b.lease_imms(1) as lease:
            box = lease.mailbox()
            t = ferry.Transfer()
            for i in range(_abi.MAILBOX_DEPTH):
                a.write(s, d, 64, notify=(box, b"n%d" % i), done=t)
                t.wait()
            for i in range(_abi.MAILBOX_DEPTH):
                self.assertEqual(lease.wait_notification()[0], b"n%d" % i)
            # A second sender's notification collides: reported, not dropped.
            c.write(sc, d, 64, notify=(box, b"from c"), done=t)
            t.wait()
            with self.assertRaises(ferry.NotificationsLostError) as cm:
                lease.wait_notification()
            self.assertIn("1 lost", str(cm.exception))
            self.assertEqual(b.drops()["notifications_dropped"], 1)
            a.write(s, d, 64, notify=(box, b"after"), done=t)
            self.assertEqual(lease.wait_notification()[0], b"after")
            t.wait()
        for x in (r, d, s, sc):
            x.close()

    def test_registration_stats(self):
        (a,) = self.engines("mem", 1, n=1)
        buf = ferry.HostBuffer(1 << 20)
        r = a.register(buf)
        before = a.registration_stats()
        self.assertGreaterEqual(before["handles"], 1)
        self.assertEqual(len(before["modes"]), 1)
        self.assertIn(before["modes"][0], ("on_worker", "nics_in_parallel", "beside"))
        inner = a.register(buf.view()[4096:8192])
        after = a.registration_stats()
        self.assertEqual(after["handles"], before["handles"] + 1)
        self.assertEqual(after["registrations"], before["registrations"])
        self.assertEqual(after["hits"], before["hits"] + 1)
        inner.close()
        r.close()
        buf.close()

    def test_huge_page_host_buffers(self):
        b = ferry.HostBuffer(4 << 20, huge_pages="never")
        self.assertEqual(b.page_size, mmap.PAGESIZE)
        b.view()[:4] = b"abcd"
        b.close()
        b = ferry.HostBuffer(4 << 20, huge_pages="auto")
        self.assertGreaterEqual(b.page_size, mmap.PAGESIZE)
        self.assertEqual(b.addr % b.page_size, 0)
        b.close()
        try:
            b = ferry.HostBuffer(4 << 20, huge_pages="required")
        except (ferry.NotSupportedError, ferry.NoMemoryError):
            pass  # no huge pages configured here: refused with its reason
        else:
            self.assertGreater(b.page_size, mmap.PAGESIZE)
            b.close()
        with self.assertRaises(ValueError):
            ferry.HostBuffer(4096, huge_pages="sometimes")
        self.assertEqual(ferry.HostBuffer(4096).page_size, mmap.PAGESIZE)


if __name__ == "__main__":
    unittest.main()
