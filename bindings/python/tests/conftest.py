"""pytest setup for the package's tests. Under make test-python the wheel
is installed in a fresh venv (FERRY_TEST_WHEEL) and these tests run its
package, never the source tree; run by hand, they use the source tree
with FERRY_LIBRARY. Child processes get the same view."""

import gc
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
REPO = os.environ.get("FERRY_REPO") or os.path.abspath(os.path.join(PKG, "..", ".."))
FULL = os.environ.get("FERRY_TEST_MODE") == "full"


def child_env(**extra):
    env = dict(os.environ)
    if not os.environ.get("FERRY_TEST_WHEEL"):
        env["PYTHONPATH"] = PKG + os.pathsep + env.get("PYTHONPATH", "")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(args, timeout, **kw):
    """Runs python args (the interpreter running the tests); returns the
    CompletedProcess, output as text."""
    return subprocess.run([sys.executable] + list(args), env=child_env(), capture_output=True, text=True,
                          timeout=timeout, **kw)


@pytest.fixture(scope="session")
def helpers():
    """Paths and process helpers for the tests (importlib mode: tests cannot
    import this module)."""
    import types
    return types.SimpleNamespace(here=HERE, pkg=PKG, repo=REPO, full=FULL, env=child_env, run=run_python)


@pytest.fixture(scope="session", autouse=True)
def no_handles_left():
    import ferry
    if os.environ.get("FERRY_TEST_WHEEL"):
        # The package under test is the installed wheel, with its own library.
        assert os.path.realpath(ferry.__file__).startswith(os.path.realpath(os.environ["FERRY_TEST_WHEEL"])), \
            ferry.__file__
        assert "FERRY_LIBRARY" not in os.environ
        assert "/_lib/" in ferry.library_path(), ferry.library_path()
    yield
    gc.collect()
    assert ferry.live_handles() == 0, "handles left at exit"
