#!/usr/bin/env bash
# The Python package as a user gets it: the wheel built from this tree (pyproject.toml,
# scikit-build-core), installed into a fresh virtual environment with nothing but its one
# dependency (NumPy), imported and used there without torch, its console script run, and
# then test/python/ run against the installed package (torch and pytest made visible from
# etc's reference environment).
#
#   wheel_test.sh SOURCE_DIR TORCH_FIXTURES DECODER_FIXTURES
set -euo pipefail
src=$(cd "$1" && pwd)
torch_fixtures=$(cd "$2" && pwd)
decoder_fixtures=$(cd "$3" && pwd)
py=$("$src/scripts/python-env.sh")  # etc's reference environment: scikit-build-core, nanobind, pytest, torch
work=$(mktemp -d "${TMPDIR:-/tmp}/etc-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== building the wheel (pip wheel, scikit-build-core; build dir build-wheel/)"
start=$SECONDS
"$py" -m pip wheel "$src" --no-build-isolation --no-deps --quiet --disable-pip-version-check -w "$work/dist"
wheel=$(ls "$work"/dist/etc_compiler-*.whl)
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in $((SECONDS - start)) s"
"$py" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for want in ["etc/__init__.py", "etc/_errors.py", "etc/_convert.py", "etc/_cli.py", "etc/py.typed",
             "etc/_etc.pyi", "etc/_bin/etc"]:
    assert want in names, f"{want} is not in the wheel: {names}"
assert any(n.startswith("etc/_etc.") and n.endswith(".so") for n in names), names
assert any(n.endswith("entry_points.txt") for n in names)
print("the wheel holds the package, its native module, its stubs and the CLI")
PY

echo "== a fresh virtual environment with only the wheel"
base=$("$py" -c 'import sys; print(sys._base_executable)')
"$base" -m venv "$work/venv"
venv_py="$work/venv/bin/python"
"$venv_py" -m pip install --quiet --disable-pip-version-check -c "$src/scripts/python/constraints.txt" "$wheel"
cd "$work"  # never import etc from the source tree
"$venv_py" - "$src" <<'PY'
import importlib.util, sys
assert importlib.util.find_spec("torch") is None, "torch must not be in the fresh environment"
import numpy as np
import etc
assert etc.__file__.startswith(sys.prefix), etc.__file__
src = sys.argv[1]
prog = etc.export(f"{src}/examples/mlp.json", target="cpu")
m = etc.load(prog, device="cpu")
x = np.linspace(-1, 1, int(np.prod(m.inputs[0].shape)), dtype=np.float32).reshape(m.inputs[0].shape)
out = m.run(x)
assert isinstance(out[0], np.ndarray) and np.isfinite(out[0]).all()
print(f"import etc without torch: exported and ran mlp.json ({m.outputs[0].dtype}{list(out[0].shape)})")
PY
"$work/venv/bin/etc" --version | head -1
code=0
"$work/venv/bin/etc" run "$work/missing.pte" >/dev/null 2>&1 || code=$?
[[ $code -eq 1 ]] || { echo "FAIL: the console script's exit code for a missing file is $code, not 1"; exit 1; }
echo "the console script 'etc' runs the packaged CLI (exit codes kept)"

echo "== test/python against the installed wheel"
site=$("$venv_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ref_site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$ref_site" > "$site/zz-etc-test-references.pth"  # after the venv's own packages
ETC_TEST_SOURCE="$src" ETC_TEST_TORCH_FIXTURES="$torch_fixtures" \
ETC_TEST_DECODER_FIXTURES="$decoder_fixtures" ETC_TEST_CLI="$work/venv/bin/etc" \
ETC_TEST_PACKAGE_PREFIX="$work/venv" \
  "$venv_py" -m pytest -q -p no:cacheprovider "$src/test/python"
