"""Leases and notifications (ABI 1.5) through the package: a retired
lease's late immediates are dropped and counted, a notification arrives
after the writes it follows, and an oversized payload is refused."""

import time
import unittest

import ferry
from ferry import _abi


def pattern(n, seed=5):
    return bytes((i * 131 + seed) % 251 for i in range(n))


def wait_for(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


class LeaseTest(unittest.TestCase):
    def test_retired_lease_drops_late_immediates(self):
        with ferry.Engine("mem") as a, ferry.Engine("mem") as b:
            dst = bytearray(4096)
            r = b.register(dst, remote_write=True)  # kept: a dropped Region unregisters
            d = ferry.Descriptor.from_bytes(r.descriptor_bytes())
            lease = b.lease_imms(2)
            self.assertGreaterEqual(lease.first, _abi.LEASE_BASE)
            self.assertEqual(lease.value(1), lease.first + 1)
            # Arrived before the counter: held for the live lease.
            a.write_imm(lease.value(0), d)
            a.write_imm(lease.value(0), d)
            got = b.imm_counter(lease.value(0))
            got.wait(2)
            got.close()
            lease.retire()
            for _ in range(3):
                a.write_imm(lease.value(1), d)
            self.assertTrue(wait_for(lambda: b.drops()["imms_dropped"] == 3), b.drops())
            with self.assertRaises(ferry.NotLeasedError):
                b.imm_counter(lease.value(0))
            with self.assertRaises(ferry.NotLeasedError):
                b.imm_counter(_abi.LEASE_BASE + 12345)
            with self.assertRaises(IndexError):
                lease.value(2)
            d.close()

    def test_notification_after_writes(self):
        with ferry.Engine("mem", nics=2) as a, ferry.Engine("mem", nics=2) as b:
            src = bytearray(pattern(1 << 20))
            dst = bytearray(1 << 20)
            s = a.register(src)
            r = b.register(dst, remote_write=True)  # kept: a dropped Region unregisters
            d = ferry.Descriptor.from_bytes(r.descriptor_bytes())
            with b.lease_imms(1) as lease:
                box = lease.mailbox()
                self.assertEqual(box, lease.mailbox())
                t = ferry.Transfer()
                a.write(s, d, done=t)
                t.wait()
                a.notify(box, b"request 7 done")
                payload, seq = lease.wait_notification()
                # Every byte of the write is there when the notification is.
                self.assertEqual(bytes(dst), bytes(src))
                self.assertEqual(payload, b"request 7 done")
                self.assertEqual(seq, 1)
                a.notify(box, b"x" * _abi.MAX_NOTIFY_PAYLOAD)
                payload, seq = lease.wait_notification()
                self.assertEqual(payload, b"x" * _abi.MAX_NOTIFY_PAYLOAD)
                self.assertEqual(seq, 2)
                with self.assertRaises(ferry.NotifyTooLargeError):
                    a.notify(box, b"x" * (_abi.MAX_NOTIFY_PAYLOAD + 1))
                with self.assertRaises(ferry.FerryTimeoutError):
                    lease.wait_notification(timeout=0.05)
            with self.assertRaises(ferry.ClosedError):
                lease.mailbox()
            # A notification to the retired lease is dropped at the target.
            a.notify(box, b"late")
            self.assertTrue(wait_for(lambda: b.drops()["imms_dropped"] == 1), b.drops())
            with self.assertRaises(ferry.BadEncodingError):
                a.notify(b"\x01\x02", b"")
            d.close()


if __name__ == "__main__":
    unittest.main()
