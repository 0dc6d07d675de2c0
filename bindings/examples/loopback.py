#!/usr/bin/env python3
"""loopback.py: ferry's C ABI from Python with ctypes, no compiler needed.

Two engines in one process: A writes 1 MiB into memory registered with B,
B counts the write's immediates with a credit counter and an
expected-count callback, and the bytes are checked.

    python3 loopback.py /path/to/libferry.so [transport] [node]

transport defaults to "mem" (in-process); "shm" and "tcp;ofi_rxm" with
node 127.0.0.1 run over libfabric. Exits 77 when the transport cannot run
on this machine.
"""

import ctypes as C
import sys
import time

FERRY_OK = 0
FERRY_E_OUT_OF_BOUNDS = -4
FERRY_E_NOT_SUPPORTED = -5
FERRY_ACCESS_LOCAL = 0
FERRY_ACCESS_REMOTE_WRITE = 1
TIMEOUT_MS = 20000
MIB = 1 << 20


class Config(C.Structure):
    """ferry_config: set struct_size through ferry_config_init."""

    _fields_ = [
        ("struct_size", C.c_uint32),
        ("nics", C.c_int32),
        ("transport", C.c_char_p),
        ("node", C.c_char_p),
        ("poll", C.c_int32),
        ("queue_depth", C.c_int32),
        ("send_buffers", C.c_int32),
        ("send_buffer_size", C.c_int32),
        ("handshake_timeout_ms", C.c_int32),
        ("log_level", C.c_int32),
    ]


class Route(C.Structure):
    _fields_ = [("kind", C.c_int32), ("value", C.c_int32)]


class SingleWrite(C.Structure):
    _fields_ = [
        ("src", C.c_uint64),
        ("src_offset", C.c_uint64),
        ("length", C.c_uint64),
        ("dst", C.c_uint64),
        ("dst_offset", C.c_uint64),
        ("imm", C.c_uint32),
        ("has_imm", C.c_int32),
        ("route", Route),
    ]


# int (*ferry_expect_fn)(void *user_data, uint32_t imm): runs on the
# engine's dispatcher thread; ctypes takes the GIL for it.
EXPECT_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32)


class Ferry:
    """Thin wrapper: every call checks its code and raises with the text
    of ferry_last_error."""

    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.ferry_strerror.restype = C.c_char_p
        self.lib.ferry_version.restype = C.c_uint32
        self.lib.ferry_last_error.restype = C.c_size_t
        self.lib.ferry_last_error.argtypes = [C.c_char_p, C.c_size_t]
        u64, pu64 = C.c_uint64, C.POINTER(C.c_uint64)
        self.lib.ferry_engine_open.argtypes = [C.POINTER(Config), C.c_int64, pu64]
        self.lib.ferry_engine_close.argtypes = [u64, C.c_int64]
        self.lib.ferry_host_alloc.argtypes = [C.c_size_t, C.POINTER(C.c_void_p)]
        self.lib.ferry_host_free.argtypes = [C.c_void_p]
        self.lib.ferry_register.argtypes = [u64, C.c_void_p, u64, C.c_int32, pu64]
        self.lib.ferry_unregister.argtypes = [u64]
        self.lib.ferry_region_descriptor.argtypes = [u64, pu64]
        self.lib.ferry_descriptor_to_hex.argtypes = [u64, C.c_char_p, C.c_size_t, C.POINTER(C.c_size_t)]
        self.lib.ferry_descriptor_from_hex.argtypes = [C.c_char_p, pu64]
        self.lib.ferry_descriptor_free.argtypes = [u64]
        self.lib.ferry_transfer_new.argtypes = [pu64]
        self.lib.ferry_transfer_wait.argtypes = [u64, C.c_int64]
        self.lib.ferry_transfer_free.argtypes = [u64]
        self.lib.ferry_submit_single.argtypes = [u64, C.POINTER(SingleWrite), u64]
        self.lib.ferry_imm_counter_new.argtypes = [u64, C.c_uint32, pu64]
        self.lib.ferry_imm_counter_wait.argtypes = [u64, C.c_int64, C.c_int64]
        self.lib.ferry_imm_counter_free.argtypes = [u64]
        self.lib.ferry_expect_imm.argtypes = [u64, C.c_uint32, C.c_uint32, EXPECT_FN, C.c_void_p,
                                              C.POINTER(C.c_int64)]

    def error(self):
        buf = C.create_string_buffer(512)
        self.lib.ferry_last_error(buf, len(buf))
        return buf.value.decode()

    def call(self, name, *args, want=FERRY_OK):
        rc = getattr(self.lib, name)(*args)
        if rc != want:
            raise RuntimeError("%s = %s, want %s: %s" % (
                name, self.lib.ferry_strerror(rc).decode(), self.lib.ferry_strerror(want).decode(),
                self.error()))
        return rc


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    f = Ferry(sys.argv[1])
    transport = sys.argv[2] if len(sys.argv) > 2 else "mem"
    node = sys.argv[3].encode() if len(sys.argv) > 3 else None
    assert f.lib.ferry_version() >> 16 == 1, "libferry major version"

    cfg = Config()
    f.lib.ferry_config_init(C.byref(cfg))
    cfg.transport, cfg.node, cfg.log_level = transport.encode(), node, 4
    a, b = C.c_uint64(), C.c_uint64()
    rc = f.lib.ferry_engine_open(C.byref(cfg), TIMEOUT_MS, C.byref(a))
    if rc == FERRY_E_NOT_SUPPORTED:
        print("loopback.py %s: not supported here: %s" % (transport, f.error()), file=sys.stderr)
        return 77
    f.call("ferry_engine_open", C.byref(cfg), TIMEOUT_MS, C.byref(a), want=rc)
    f.call("ferry_engine_open", C.byref(cfg), TIMEOUT_MS, C.byref(b))

    src, dst = C.c_void_p(), C.c_void_p()
    f.call("ferry_host_alloc", MIB, C.byref(src))
    f.call("ferry_host_alloc", MIB, C.byref(dst))
    pattern = bytes((i * 7 + 3) & 0xFF for i in range(MIB))
    C.memmove(src, pattern, MIB)
    src_reg, dst_reg = C.c_uint64(), C.c_uint64()
    f.call("ferry_register", a, src, MIB, FERRY_ACCESS_LOCAL, C.byref(src_reg))
    f.call("ferry_register", b, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, C.byref(dst_reg))

    # B's descriptor travels as hex text, as it would over any socket.
    own, desc = C.c_uint64(), C.c_uint64()
    f.call("ferry_region_descriptor", dst_reg, C.byref(own))
    text = C.create_string_buffer(1100)
    f.call("ferry_descriptor_to_hex", own, text, len(text), None)
    f.call("ferry_descriptor_from_hex", text.value, C.byref(desc))

    fired = []
    # Keep the callback object alive for as long as the engine may call it.
    on_expected = EXPECT_FN(lambda ud, imm: fired.append(imm) or 0)
    f.call("ferry_expect_imm", b, 0x51, 1, on_expected, None, None)
    credits = C.c_uint64()
    f.call("ferry_imm_counter_new", b, 0x52, C.byref(credits))

    t = C.c_uint64()
    f.call("ferry_transfer_new", C.byref(t))
    w = SingleWrite(src=src_reg.value, length=MIB, dst=desc.value, imm=0x51, has_imm=1)
    f.call("ferry_submit_single", a, C.byref(w), t)
    f.call("ferry_transfer_wait", t, TIMEOUT_MS)
    w.imm, w.length = 0x52, 4096
    f.call("ferry_submit_single", a, C.byref(w), t)
    f.call("ferry_transfer_wait", t, TIMEOUT_MS)
    # The bytes have landed when their immediates have: both writes'.
    f.call("ferry_imm_counter_wait", credits, 1, TIMEOUT_MS)
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not fired and time.monotonic() < deadline:
        time.sleep(0.001)
    assert fired == [0x51], fired
    assert C.string_at(dst, MIB) == pattern, "bytes differ"
    w.dst_offset = MIB - 1
    f.call("ferry_submit_single", a, C.byref(w), 0, want=FERRY_E_OUT_OF_BOUNDS)

    f.call("ferry_imm_counter_free", credits)
    f.call("ferry_transfer_free", t)
    f.call("ferry_descriptor_free", own)
    f.call("ferry_descriptor_free", desc)
    f.call("ferry_engine_close", a, TIMEOUT_MS)
    f.call("ferry_engine_close", b, TIMEOUT_MS)  # no callback runs after this
    assert fired == [0x51], fired
    f.call("ferry_host_free", src)
    f.call("ferry_host_free", dst)
    print("loopback.py %s: ok" % transport)
    return 0


if __name__ == "__main__":
    sys.exit(main())
