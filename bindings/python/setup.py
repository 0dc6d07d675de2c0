"""The wheel's two facts that pyproject.toml cannot state: its version is
the C ABI's (FERRY_VERSION in ferry.h) and it is platform-specific, since
it carries libferry.so.1 (x86-64 Linux machine code); the Python code
itself is version-neutral ctypes, hence py3-none-<platform>."""

import os
import re
import sysconfig

from setuptools import Distribution, setup

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # wheel not installed: sdists still build
    bdist_wheel = None

HERE = os.path.dirname(os.path.abspath(__file__))


def abi_version():
    for path in (os.path.join(HERE, "ferry.h"), os.path.join(HERE, "..", "ferry.h")):
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            parts = [re.search(r"#define FERRY_VERSION_%s (\d+)" % k, text).group(1)
                     for k in ("MAJOR", "MINOR", "PATCH")]
            return ".".join(parts)
    raise SystemExit("setup.py: ferry.h not found beside the package or in bindings/")


cmdclass = {}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def get_tag(self):
            return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")

    cmdclass["bdist_wheel"] = PlatformWheel

class BinaryDistribution(Distribution):
    """Says the package holds machine code, so it installs into platlib."""

    def has_ext_modules(self):
        return True


setup(version=abi_version(), cmdclass=cmdclass, distclass=BinaryDistribution)
