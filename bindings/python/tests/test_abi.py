"""The ctypes declarations agree with ferry.h: every constant with its
#define, every struct's size and field offsets with what a C compiler
computes from the header."""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

from ferry import _abi

HEADER = os.environ.get("FERRY_HEADER") or os.path.join(os.path.dirname(__file__), "..", "..", "ferry.h")


class ConstantsTest(unittest.TestCase):
    def test_constants_match_header(self):
        with open(HEADER) as f:
            text = f.read()
        defines = {}
        for m in re.finditer(r"^#define FERRY_(\w+) \(?(-?\d+)\)?", text, re.M):
            defines[m.group(1)] = int(m.group(2))
        checked = 0
        for name, value in vars(_abi).items():
            if name.isupper() and isinstance(value, int) and name in defines:
                self.assertEqual(value, defines[name], "FERRY_%s" % name)
                checked += 1
        # Every error code ferry.h defines has a Python constant.
        for name in defines:
            if name.startswith("E_"):
                self.assertIn(name, vars(_abi), "FERRY_%s has no Python constant" % name)
        self.assertGreater(checked, 25)
        self.assertEqual(_abi.VERSION_MAJOR, defines["VERSION_MAJOR"])


class PrototypesTest(unittest.TestCase):
    def test_every_function_declared_and_wrapped(self):
        """Every function of ferry.h has a ctypes prototype, and the package
        calls each one somewhere (the ABI is wrapped whole)."""
        with open(HEADER) as f:
            text = f.read()
        funcs = set(re.findall(r"^[a-z].*?\b(ferry_\w+)\(", text, re.M))
        self.assertGreater(len(funcs), 60)
        missing = sorted(funcs - set(_abi.PROTOTYPES))
        self.assertEqual(missing, [], "ferry.h functions without a prototype")
        pkg = os.path.dirname(os.path.abspath(_abi.__file__))
        source = ""
        for name in os.listdir(pkg):
            if name.endswith(".py") and name != "_abi.py":
                with open(os.path.join(pkg, name)) as f:
                    source += f.read()
        # ferry_config_init is the 1.0 entry point, kept for old programs;
        # the package calls ferry_config_init_size.
        unused = sorted(f for f in funcs if '"%s"' % f not in source and "lib().%s(" % f not in source
                        and f != "ferry_config_init")
        self.assertEqual(unused, [], "ferry.h functions the package never calls")


class LayoutTest(unittest.TestCase):
    def test_structs_match_header(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler: the layout check compiles a program against ferry.h")
        lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "ferry.h"', "int main(void) {"]
        for s in _abi.STRUCTS:
            lines.append('printf("%s size %%zu\\n", sizeof(%s));' % (s._c_name_, s._c_name_))
            for field, _ in s._fields_:
                lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (s._c_name_, field, s._c_name_, field))
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as d:
            src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines))
            subprocess.run([cc, "-I", os.path.dirname(os.path.abspath(HEADER)), "-o", exe, src], check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        want = {}
        for line in out.splitlines():
            key, *rest = line.split()
            want[key] = int(rest[-1])
        for s in _abi.STRUCTS:
            self.assertEqual(_abi.C.sizeof(s), want[s._c_name_], "sizeof(%s)" % s._c_name_)
            for field, _ in s._fields_:
                self.assertEqual(getattr(s, field).offset, want["%s.%s" % (s._c_name_, field)],
                                 "offsetof(%s, %s)" % (s._c_name_, field))


class ConfigInitTest(unittest.TestCase):
    """ferry_config grows by appending fields: the library must never write
    past the size the caller's own header gave it."""

    def test_old_programs_keep_their_size(self):
        from ferry._lib_handle import lib as load

        lib = load()
        v10 = 48  # the 1.0 ferry_config: struct_size .. log_level
        buf = (_abi.C.c_ubyte * 128)(*([0xAB] * 128))
        lib.ferry_config_init(buf)  # the 1.0 entry point
        self.assertEqual(int.from_bytes(bytes(buf[0:4]), "little"), v10)
        self.assertEqual(bytes(buf[4:v10]), bytes(v10 - 4))
        self.assertEqual(bytes(buf[v10:]), bytes([0xAB] * (128 - v10)), "1.0 init wrote past the 1.0 fields")
        buf = (_abi.C.c_ubyte * 128)(*([0xAB] * 128))
        lib.ferry_config_init_size(_abi.C.cast(buf, _abi.C.POINTER(_abi.Config)), 40)
        self.assertEqual(int.from_bytes(bytes(buf[0:4]), "little"), 40)
        self.assertEqual(bytes(buf[40:]), bytes([0xAB] * 88), "init_size wrote past the size given")
        cfg = _abi.Config()
        lib.ferry_config_init_size(_abi.C.byref(cfg), 4096)  # a future, larger struct
        self.assertEqual(cfg.struct_size, _abi.C.sizeof(_abi.Config))


if __name__ == "__main__":
    unittest.main()


class StaleDescriptorErrorTest(unittest.TestCase):
    def test_stale_is_a_lost_peer(self):
        """FERRY_E_STALE_DESCRIPTOR raises StaleDescriptorError, which
        callers that catch PeerLostError (or ConnectionError) still catch."""
        from ferry import errors
        cls = errors.error_for(_abi.E_STALE_DESCRIPTOR)
        self.assertIs(cls, errors.StaleDescriptorError)
        self.assertTrue(issubclass(cls, errors.PeerLostError))
        self.assertTrue(issubclass(cls, ConnectionError))
