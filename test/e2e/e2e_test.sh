#!/usr/bin/env bash
# End to end on the CPU: every example is exported (for CUDA and CPU-only), run with
# `etc run --device cpu` on seeded random inputs, and compared with an independent NumPy
# evaluation of the same model (test/e2e/numpy_reference.py). Also runs ExecuTorch's own
# fixtures and checks the outputs their README gives.
# Usage: e2e_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
py=/usr/bin/python3  # Debian's python3 with python3-numpy (scripts/install-deps.sh)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for model in mlp cnn transformer_block; do
  for target in cuda:0 cpu; do
    name="$model-${target/:/}"
    "$etc" export "$src/examples/$model.json" -o "$tmp/$name.pte" --target "$target" >/dev/null 2>"$tmp/$name.export.err" ||
      { fail "$name: export failed"; cat "$tmp/$name.export.err"; continue; }
    # Deterministic inputs: etc's --seed generator writes them (via --output-dir of a run we
    # do not need), so create them with NumPy instead and pass them by name.
    "$py" - "$src/examples/$model.json" "$tmp/$name.in" <<'PY'
import json, os, sys
import numpy as np
g = json.load(open(sys.argv[1]))
os.makedirs(sys.argv[2], exist_ok=True)
rng = np.random.default_rng(1234)
for i, inp in enumerate(g["inputs"]):
    np.save(os.path.join(sys.argv[2], "input_%d.npy" % i), rng.uniform(-1, 1, inp["shape"]).astype(np.float32))
PY
    inputs=()
    for f in "$tmp/$name.in"/input_*.npy; do i=${f##*input_}; i=${i%.npy}; inputs+=(--input "$i=$f"); done
    if ! "$etc" run "$tmp/$name.pte" --device cpu "${inputs[@]}" --output-dir "$tmp/$name.etc" --verify >"$tmp/$name.run" 2>&1; then
      fail "$name: etc run failed"; cat "$tmp/$name.run"; continue
    fi
    "$py" "$src/test/e2e/numpy_reference.py" "$src/examples/$model.json" "$tmp/$name.ref" "$tmp/$name.in"/input_*.npy ||
      { fail "$name: the NumPy reference failed"; continue; }
    if "$py" - "$tmp/$name.etc" "$tmp/$name.ref" <<'PY'
import glob, os, sys
import numpy as np
worst = 0.0
for ref in sorted(glob.glob(os.path.join(sys.argv[2], "output_*.npy"))):
    got = np.load(os.path.join(sys.argv[1], os.path.basename(ref)))
    want = np.load(ref)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    tol = 1e-4 + 1e-4 * np.abs(want)
    worst = max(worst, float(err.max()) if err.size else 0.0)
    if not (err <= tol).all():
        print("max abs error %.3g exceeds the tolerance" % err.max())
        sys.exit(1)
print("max abs error %.3g" % worst)
PY
    then echo "ok: $name matches the NumPy reference"; else fail "$name differs from the NumPy reference"; fi
  done
done

# ExecuTorch-written programs (test/executorch/fixtures.sh; made with ExecuTorch from PyPI,
# cached) give the outputs of 3x+2 and a+b on all-ones inputs.
if fx=$("$src/test/executorch/fixtures.sh" 2>"$tmp/fx.err"); then
  "$py" -c "import numpy as np; np.save('$tmp/ones22.npy', np.ones([2, 2], np.float32))"
  "$etc" run "$fx/add.pte" --device cpu --input 0="$tmp/ones22.npy" --input 1="$tmp/ones22.npy" --output-dir "$tmp/add" >/dev/null 2>&1 &&
    "$py" -c "import numpy as np; assert np.load('$tmp/add/output_0.npy').tolist() == [[2.0, 2.0], [2.0, 2.0]]" &&
    echo "ok: ExecuTorch's add program gives 1 + 1" || fail "ExecuTorch's add.pte"
  "$etc" run "$fx/inline_constants.pte" --device cpu --input 0="$tmp/ones22.npy" --output-dir "$tmp/lin" >/dev/null 2>&1 &&
    "$py" -c "import numpy as np; assert np.load('$tmp/lin/output_0.npy').tolist() == [[5.0, 5.0], [5.0, 5.0]]" &&
    echo "ok: ExecuTorch's inline-constant program gives 3x+2" || fail "ExecuTorch's inline_constants.pte"
else
  fail "ExecuTorch's programs could not be made: $(tail -3 "$tmp/fx.err")"
fi

exit $((failures > 0))
