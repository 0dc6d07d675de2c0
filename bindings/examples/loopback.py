#!/usr/bin/env python3
"""loopback.py: ferry from Python through the `ferry` package.

Two engines in one process: A writes 1 MiB into memory registered with B,
B counts the write's immediates with a credit counter and an
expected-count callback, and the bytes are checked.

    python3 loopback.py [/path/to/libferry.so] [transport] [node]

The library argument is optional (the installed package finds its own);
transport defaults to "mem" (in-process); "shm" and "tcp;ofi_rxm" with
node 127.0.0.1 run over libfabric. Exits 77 when the transport cannot run
on this machine. Runs from a checkout too: the package beside it is used
when none is installed.
"""

import os
import sys
import time

TIMEOUT = 20.0
MIB = 1 << 20


def main():
    args = sys.argv[1:]
    if args and (args[0].endswith(".so") or ".so." in args[0]):
        os.environ["FERRY_LIBRARY"] = args.pop(0)  # read when the package loads the library
    try:
        import ferry
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import ferry
    transport = args[0] if args else "mem"
    node = args[1] if len(args) > 1 else None
    assert ferry.abi_version()[0] == 1, "libferry major version"

    try:
        a = ferry.Engine(transport, node=node, log_level="error", timeout=TIMEOUT)
    except ferry.NotSupportedError as e:
        print("loopback.py %s: not supported here: %s" % (transport, e), file=sys.stderr)
        return 77
    with a, ferry.Engine(transport, node=node, log_level="error", timeout=TIMEOUT) as b, \
            ferry.HostBuffer(MIB) as src, ferry.HostBuffer(MIB) as dst:
        pattern = bytes((i * 7 + 3) & 0xFF for i in range(MIB))
        src.view()[:] = pattern
        src_reg = a.register(src)
        dst_reg = b.register(dst, remote_write=True)
        # B's descriptor travels as hex text, as it would over any socket.
        desc = ferry.Descriptor.from_hex(dst_reg.descriptor_hex())

        fired = []
        b.expect_imm(0x51, a.nics(), lambda imm: fired.append(imm) and False)
        credits = b.imm_counter(0x52)
        with ferry.Transfer() as t:
            a.write(src_reg, desc, imm=0x51, done=t)
            t.wait(TIMEOUT)
            a.write(src_reg, desc, 4096, imm=0x52, done=t)
            t.wait(TIMEOUT)
        # The bytes have landed when their immediates have: both writes'.
        credits.wait(a.nics(), TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while not fired and time.monotonic() < deadline:
            time.sleep(0.001)
        assert fired == [0x51], fired
        assert bytes(dst.view()) == pattern, "bytes differ"
        try:
            a.write(src_reg, desc, 4096, dst_offset=MIB - 1, imm=0x52)
            raise AssertionError("a write past the region was accepted")
        except ferry.OutOfBoundsError:
            pass
        credits.close()
        desc.close()
        src_reg.close()
        dst_reg.close()
    # Both engines closed: no callback runs after this.
    assert fired == [0x51], fired
    assert ferry.live_handles() == 0, "handles left"
    print("loopback.py %s: ok" % transport)
    return 0


if __name__ == "__main__":
    sys.exit(main())
