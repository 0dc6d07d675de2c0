"""The README's Python example, extracted and run as a user would."""

import os

import pytest

MARKER = "<!-- example: python (bindings/python/tests/system/test_readme.py extracts and runs this block) -->"


@pytest.mark.parametrize("transport", ["shm", "tcp;ofi_rxm"])
def test_readme_example(transport, helpers, tmp_path):
    if transport != "shm" and not helpers.full:
        pytest.skip("make test-python-full runs the README example over tcp;ofi_rxm (make test: shm)")
    with open(os.path.join(helpers.repo, "README.md")) as f:
        text = f.read()
    assert MARKER in text, "README.md lost its Python example marker"
    code = text.split(MARKER + "\n```python\n", 1)[1].split("\n```", 1)[0]
    if transport.startswith("tcp"):
        code = code.replace("ferry.Engine(TRANSPORT)", 'ferry.Engine(TRANSPORT, node="127.0.0.1")')
    path = tmp_path / "example.py"
    path.write_text(code)
    r = helpers.run([str(path), transport], timeout=180, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "target: checked" in r.stdout
