#!/usr/bin/env bash
# etc's CPU kernels as ExecuTorch's kernel library, on whole programs ExecuTorch exported
# itself: etc_et_runner_etc_kernels (ExecuTorch's Program::load and Method from the wheel's
# libexecutorch.so, no kernel library of the wheel linked, etc's kernels registered through
# register_kernels_with_executorch) runs ExecuTorch's fixture programs and its exports of the
# PyTorch fixtures; every output must match PyTorch eager's.
# With SHARED_LIBRARY (libetc_executorch.so, a position-independent build), also checks that
# it exports the registration calls of etc_executorch.h and nothing else.
# Usage: kernel_library_test.sh RUNNER SOURCE_DIR TORCH_FIXTURES_DIR ET_FIXTURES_DIR [SHARED_LIBRARY]
set -uo pipefail
runner=$1
src=$2
fixtures=$3
et_fixtures=$4
shared=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
py=$("$src/scripts/python-env.sh") || { echo "FAIL: no Python environment"; exit 1; }

# The runner links none of the wheel's kernel libraries: every kernel it runs is etc's.
if readelf -d "$runner" | grep NEEDED | grep -q "kernels_"; then
  fail "$(basename "$runner") links a kernel library of the wheel: $(readelf -d "$runner" | grep -o 'libexecutorch_kernels[^]]*')"
fi

if [[ -n $shared ]]; then
  exported=$(nm -DC --defined-only "$shared" | awk '{$1 = ""; $2 = ""; print substr($0, 3)}' | sort)
  want=$(printf '%s\n' "etc::executorch_plugin::register_kernels_with_executorch(unsigned long*)" \
                        "etc::executorch_plugin::constant_tracking_loader(executorch::runtime::DataLoader&)" \
                        "etc::executorch_plugin::register_with_executorch()" \
                        "etc::executorch_plugin::registered_mode()" | sort)
  if [[ $exported != "$want" ]]; then
    fail "$(basename "$shared") exports more or less than etc_executorch.h: $(echo "$exported" | head -5 | tr '\n' ';')"
  else
    echo "ok: $(basename "$shared") exports the four calls of etc_executorch.h and nothing else"
  fi
fi

# run_case NAME PROGRAM EXPECTED_PATTERN INPUTS...: outputs against PyTorch eager's files.
run_case() {
  local name=$1 program=$2 expected=$3
  shift 3
  local d="$tmp/$name"
  mkdir -p "$d"
  if ! "$runner" "$program" "$d" "$@" 2> "$d.err"; then
    fail "$name: $(grep -v ' I ' "$d.err" | tail -3)"; return
  fi
  grep -q "etc's CPU kernels registered" "$d.err" || { fail "$name: etc's kernels were not registered"; return; }
  if "$py" - "$d" "$expected" <<'PY'
import glob, sys
import numpy as np
got_dir, pattern = sys.argv[1], sys.argv[2]
wants = sorted(glob.glob(pattern))
if not wants:
    sys.exit(f"no expected outputs at {pattern}")
for i, want in enumerate(wants):
    g, w = np.load(f"{got_dir}/output_{i}.npy"), np.load(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        sys.exit(f"output {i}: {g.dtype}{list(g.shape)}, PyTorch {w.dtype}{list(w.shape)}")
    exact = not np.issubdtype(w.dtype, np.floating)
    if (exact and not (g == w).all()) or (not exact and not np.allclose(g, w, rtol=1e-3, atol=1e-4)):
        sys.exit(f"output {i}: max |diff| {np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))}")
PY
  then
    echo "ok: $name: ExecuTorch's runtime on etc's kernels matches PyTorch eager"
  else
    fail "$name: outputs differ from PyTorch eager"
  fi
}

# ExecuTorch's fixture programs (test/executorch/et_ref.py). inline_constants uses the
# deprecated constant_buffer path, which the wheel's runtime no longer loads.
while read -r c; do
  [[ -z $c || $c == inline_constants ]] && continue
  mapfile -t ins < <(ls "$et_fixtures/$c".in*.npy 2>/dev/null | sort -V)
  run_case "et-$c" "$et_fixtures/$c.pte" "$et_fixtures/$c.out*.npy" "${ins[@]}"
done < "$et_fixtures/cases.txt"

# ExecuTorch's exports of the PyTorch fixtures (to_edge -> to_executorch, no delegate).
for m in resnet18 mobilenet_v2 mobilenet_v3_small minilm llama_block; do
  if [[ ! -f $fixtures/$m/model.et.pte ]]; then fail "$m: fixture missing at $fixtures/$m"; continue; fi
  mapfile -t ins < <(ls "$fixtures/$m"/input_*.npy | sort -V)
  run_case "$m" "$fixtures/$m/model.et.pte" "$fixtures/$m/expected_*.npy" "${ins[@]}"
done

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
