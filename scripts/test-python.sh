#!/usr/bin/env bash
# The Python package's tests against the wheel, as a user gets it: a fresh
# venv from /usr/bin/python3 (system site packages, for Debian's torch,
# numpy and pytest), the wheel installed with pip --no-index, no
# FERRY_LIBRARY, and pytest run so that only the installed package is
# importable (-P, importlib mode). mypy checks the package's types first.
#
#   scripts/test-python.sh OUTDIR fast|full
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out=$(cd "${1:?usage: $0 OUTDIR fast|full}" && pwd)
mode=${2:-fast}
py=/usr/bin/python3
whl=$(ls "$root"/dist/ferry_rdma-*.whl 2>/dev/null | head -1)
[ -n "$whl" ] || { echo "test-python.sh: no wheel in dist/: make wheel" >&2; exit 1; }

echo "== mypy bindings/python/ferry"
(cd "$root/bindings/python" && "$py" -m mypy --no-incremental --cache-dir=/dev/null ferry)

venv="$out/pyvenv"
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$whl"
(cd / && env -u FERRY_LIBRARY "$venv/bin/python" -c "import ferry; print('== wheel', ferry.version(), ferry.library_path())")

export FERRY_TEST_WHEEL="$venv" FERRY_TEST_MODE="$mode" FERRY_REPO="$root"
unset FERRY_LIBRARY
cd "$out"
exec "$venv/bin/python" -P -m pytest -p no:cacheprovider --import-mode=importlib -q -rs \
	"$root/bindings/python/tests"
