#!/usr/bin/env bash
# What the Python package needs to build its wheel and run its tests, all
# from Debian (PyPI is not used): python3-build, -setuptools and -wheel
# build the wheel offline; -venv makes the test venv; -pytest, -mypy,
# -numpy and -torch (a CPU build) run the tests. They belong to
# /usr/bin/python3.
set -euo pipefail
py=/usr/bin/python3
pkgs=()
have() { [ -x "$py" ] && "$py" -c "import $1" >/dev/null 2>&1; }
[ -x "$py" ] || pkgs+=(python3)
have build || pkgs+=(python3-build)
have setuptools || pkgs+=(python3-setuptools)
have wheel || pkgs+=(python3-wheel)
have ensurepip || pkgs+=(python3-venv)
have pytest || pkgs+=(python3-pytest)
have mypy || pkgs+=(python3-mypy)
have numpy || pkgs+=(python3-numpy)
have torch || pkgs+=(python3-torch)
if [ ${#pkgs[@]} -eq 0 ]; then
	exit 0
fi
echo "deps-python: installing ${pkgs[*]}"
command -v apt-get >/dev/null 2>&1 || { echo "deps-python: no apt-get: install ${pkgs[*]} for $py by hand" >&2; exit 1; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "deps-python: not root and no sudo: apt-get install -y ${pkgs[*]}" >&2; exit 1; }
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "deps-python: apt-get update failed" >&2; exit 1; }
$SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
