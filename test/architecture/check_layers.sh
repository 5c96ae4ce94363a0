#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked against the sources and the build:
#   1. each folder under src/ includes only the folders its floor may see;
#   2. the runtime libraries link no compiler library (no frontend, pass, partitioner or
#      emitter), and no frontend links another frontend or anything above the IR;
#   3. the interpreter (rt::Method and the runtime around it) names no operator: kernels and
#      their load planner (runtime/kernels/load_plan.h) know operators, the interpreter runs
#      what they registered;
#   4. the CUDA delegate's kernels take from the CPU kernels' folder only the shared argument
#      checks (runtime/kernels/op_checks.h), not their private helpers.
# Usage: check_layers.sh SOURCE_DIR LINK_CLOSURE_FILE (written by test/architecture/CMakeLists.txt)
set -uo pipefail
src=$1
closure_file=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# --- 1. includes ---------------------------------------------------------------------------
# folder -> the include roots its files may use. A root is an include's first folder, or for
# frontends/<name>/ the frontend itself; "frontends" alone is what the frontends share
# (frontends/*.h).
declare -A allowed=(
  [support]="support"
  [graph]="support graph"
  [format]="support graph format"
  [frontends]="support graph frontends frontends/json frontends/onnx frontends/torch_export"
  [frontends/json]="support graph consteval frontends frontends/json"
  [frontends/onnx]="support graph consteval frontends frontends/onnx"
  [frontends/torch_export]="support graph consteval frontends frontends/torch_export"
  [consteval]="support graph runtime consteval"
  [passes]="support graph consteval passes"
  [partition]="support graph format passes partition backends/cuda"
  [export]="support graph format consteval frontends passes partition export"
  [runtime]="support graph format runtime"
  [backends]="support graph format runtime backends backends/cuda/runtime"
  [backends/cuda]="support graph format backends/cuda"
  [backends/cuda/runtime]="support graph format runtime backends/cuda/runtime"
  [executorch]="support graph format runtime backends/cuda/runtime executorch"
  # A front end, like apps/etc: the export library, the runtime and the runtimes' selector.
  [python]="support graph format frontends passes partition export runtime backends python"
)
checked=0
before=$failures
while IFS= read -r file; do
  rel=${file#"$src/src/"}
  folder=$(dirname "$rel")
  # The rule of the deepest folder that has one (runtime/kernels follows runtime).
  rule=$folder
  while [[ -z ${allowed[$rule]+x} && $rule == */* ]]; do rule=$(dirname "$rule"); done
  if [[ -z ${allowed[$rule]+x} ]]; then
    fail "src/$rel: folder $folder has no layering rule (add it to docs/architecture.md and here)"
    continue
  fi
  while IFS= read -r inc; do
    if [[ $inc =~ ^frontends/(json|onnx|torch_export)/ ]]; then
      root="frontends/${BASH_REMATCH[1]}"
    elif [[ $inc =~ ^backends/([a-z_]+)/runtime/ ]]; then
      root="backends/${BASH_REMATCH[1]}/runtime"
    elif [[ $inc =~ ^backends/([a-z_]+)/ ]]; then
      root="backends/${BASH_REMATCH[1]}"
    elif [[ $inc == */* ]]; then
      root=${inc%%/*}
    else
      continue  # a generated header next to the file, or a third-party one
    fi
    [[ " ${allowed[$rule]} " == *" $root "* ]] || fail "src/$rel includes \"$inc\": $rule may not see $root"
    checked=$((checked + 1))
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$file")
done < <(find "$src/src" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) | sort)
[[ $checked -gt 300 ]] || fail "only $checked includes checked: the scan is broken"
[[ $failures -eq $before ]] && echo "ok: $checked includes under src/ follow the layering"

# --- 2. link closures ----------------------------------------------------------------------
[[ -s $closure_file ]] || { fail "no link closure file $closure_file"; exit 1; }
closure() { sed -n "s/^$1: //p" "$closure_file"; }
before=$failures
compiler="etc_frontend_util etc_frontend_json etc_onnx etc_onnx_proto etc_torch_export etc_frontends etc_consteval etc_passes etc_partition etc_export etc_cuda_capability"
runtime="etc_runtime_core etc_cpu_kernels etc_runtime etc_cuda_runtime"
# must_not_reach TARGET LIBS...: TARGET's closure holds none of LIBS.
must_not_reach() {
  local target=$1; shift
  grep -q "^$target: " "$closure_file" || { fail "$target is not in the link closure file"; return; }
  local c; c=" $(closure "$target") "
  for lib in "$@"; do
    [[ $c == *" $lib "* ]] && fail "$target links $lib (closure:$c)"
  done
}
for t in etc_runtime_core etc_cpu_kernels etc_runtime etc_backends runtime_only_runner; do
  must_not_reach "$t" $compiler
done
grep -q '^etc_cuda_runtime: ' "$closure_file" && must_not_reach etc_cuda_runtime $compiler
grep -q '^etc_executorch: ' "$closure_file" && must_not_reach etc_executorch $compiler
must_not_reach etc_graph etc_format $compiler $runtime
must_not_reach etc_format $compiler $runtime
# The compiler evaluates constants with the CPU kernels (etc_consteval reaches etc_cpu_kernels
# and etc_runtime_core) and never reaches the interpreter, the loader or a device runtime.
interpreter="etc_runtime etc_cuda_runtime etc_backends"
must_not_reach etc_consteval etc_format $interpreter $(echo $compiler | tr ' ' '\n' | grep -vx etc_consteval)
for f in etc_frontend_json etc_onnx etc_torch_export; do
  others=$(echo etc_frontend_json etc_onnx etc_torch_export | tr ' ' '\n' | grep -vx "$f")
  must_not_reach "$f" $others etc_frontends etc_passes etc_partition etc_export $interpreter
done
must_not_reach etc_passes etc_partition etc_export etc_frontends $interpreter
must_not_reach etc_cuda_capability etc_passes etc_partition etc_export etc_frontends $runtime
must_not_reach etc_export $interpreter
[[ " $(closure etc_passes) " == *" etc_cpu_kernels "* ]] || fail "etc_passes does not reach etc_cpu_kernels (through etc_consteval): the closure is broken"
# The closure must be real: the runtime reaches the format, the export library the frontends.
[[ " $(closure etc_runtime) " == *" etc_format "* ]] || fail "etc_runtime does not reach etc_format: the closure is broken"
[[ " $(closure etc_export) " == *" etc_onnx "* ]] || fail "etc_export does not reach etc_onnx: the closure is broken"
[[ $failures -eq $before ]] && echo "ok: the runtime links no compiler library; no frontend links another"

# --- 3. the interpreter names no operator --------------------------------------------------
before=$failures
interpreter=0
for file in "$src"/src/runtime/*.h "$src"/src/runtime/*.cpp; do
  case $(basename "$file") in
    kernel.h | kernel.cpp | copy_kernels.h | copy_kernels.cpp) continue ;;  # the registry, kernels
  esac
  interpreter=$((interpreter + 1))
  # Code only: comments may name ops as examples.
  hits=$(sed -E 's#//.*$##' "$file" | grep -nE '"(aten|executorch_prim|et_copy|dim_order_ops)(::|\.)|OpKind::' || true)
  [[ -z $hits ]] || fail "src/runtime/$(basename "$file") names operators (move that knowledge to the kernels or their load planner):
$hits"
done
[[ $interpreter -ge 10 ]] || fail "only $interpreter interpreter files checked: the scan is broken"
[[ $failures -eq $before ]] && echo "ok: the interpreter ($interpreter files under src/runtime) names no operator"

# --- 4. the CUDA kernels share the argument checks, nothing else of the CPU kernels --------
before=$failures
cuda_files=0
for file in "$src"/src/backends/cuda/runtime/*; do
  [[ -f $file ]] || continue
  cuda_files=$((cuda_files + 1))
  hits=$(grep -nE '#include "runtime/kernels/' "$file" | grep -v '"runtime/kernels/op_checks.h"' || true)
  [[ -z $hits ]] || fail "src/backends/cuda/runtime/$(basename "$file") includes a CPU kernel header (share what both need through runtime/kernels/op_checks.h):
$hits"
done
[[ $cuda_files -ge 10 ]] || fail "only $cuda_files CUDA runtime files checked: the scan is broken"
[[ $failures -eq $before ]] && echo "ok: the CUDA kernels take only op_checks.h of the CPU kernels ($cuda_files files)"

if [[ $failures -ne 0 ]]; then echo "$failures layering failure(s)"; exit 1; fi
