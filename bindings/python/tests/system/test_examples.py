"""The Python worked programs (examples/python) run small, and the
package's loopback example (bindings/examples/loopback.py)."""

import os

import pytest


@pytest.mark.parametrize("provider", ["shm", "ipc"])
def test_kv_stream(provider, helpers):
    if provider == "shm" and not helpers.full:
        pytest.skip("make test-python-full runs kv_stream over shm (make test: ipc)")
    args = ["--provider", provider, "--layers", "3", "--tokens", "64", "--requests", "2"]
    r = helpers.run([os.path.join(helpers.repo, "examples", "python", "kv_stream.py")] + args, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every page of 2 requests checked" in r.stdout, r.stdout


@pytest.mark.parametrize("provider", ["tcp", "shm"])
def test_pipeline_ring(provider, helpers):
    if provider == "tcp" and not helpers.full:
        pytest.skip("make test-python-full runs pipeline_ring over tcp (make test: shm)")
    args = ["--provider", provider, "--world-size", "3", "--micro-batches", "6", "--hidden", "64"]
    r = helpers.run([os.path.join(helpers.repo, "examples", "python", "pipeline_ring.py")] + args, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1].split()
    assert last[:2] == ["6", "3"] and last[-1] == "0", r.stdout  # 6 micro-batches, 3 stages, 0 wrong


def test_loopback_example(helpers):
    r = helpers.run([os.path.join(helpers.repo, "bindings", "examples", "loopback.py"), "shm"], timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "loopback.py shm: ok" in r.stdout
