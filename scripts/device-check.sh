#!/usr/bin/env bash
# The GPU check, run ON a GPU machine (an H200 with the CUDA toolkit, CMake and PyTorch, but
# none of etc's Debian build dependencies) from the repository root, with binaries built
# elsewhere by scripts/build-for-device.sh and carried in build-device/:
#   1. nvidia-smi and the binaries' build info;
#   2. the `cuda` tests: cuda_runtime_test [gpu]/[nogpu] (with issue 38's checks: state
#      without an initial value zeroed at load and reset, a cuda:1 buffer refused by a cuda:0
#      delegate when two GPUs are visible), every capability op against the CPU reference
#      (test/cuda/cuda_ops_test.sh; among them reductions of 2^22 elements to one, two and
#      three outputs, which take the two-step kernels), the examples with --verify and with
#      --cuda-graphs, where run --json must show each graph captured once and replayed, and
#      (not with --quick) compute-sanitizer memcheck over one case per kernel family;
#   3. the GPU kernel benchmark (bench/cuda_kernels) against the measured peaks;
#   4. end-to-end latency of the examples (etc run --json: h2d, compute, d2h), with host and
#      device IO, and the copies per inference the exports report;
#   5. the same models in PyTorch eager (bench/torch_eager.py) when torch imports, as ratios;
#   6. the carried decoders: generation with the KV cache on the GPU against PyTorch eager on
#      the same GPU (bench/decoder_gpu.sh);
#   7. (among the checks of 2) ExecuTorch's runtime running the examples' cuda:0 exports on
#      the GPU through etc's plugin (test/executorch/plugin_gpu_test.sh), when the runner was
#      carried.
# Writes OUT/device-check.log (everything), OUT/results.md (tables for docs/benchmarks.md) and
# OUT/steps/ (each check's own log). A failed check is rerun once with CUDA_LAUNCH_BLOCKING=1
# (only its failing cases, for the op cases), so that the failing launch names itself; both
# logs are kept (OUT/steps/*.blocking.log), within TRIAGE_SECONDS (default 180) in all.
# The driver and runtime versions come first: a driver too old for etc's CUDA 13 runtime, a
# missing driver or a GPU below the built architectures is reported as "not run", never as a
# pass.
# Exit: 0 all checks passed; 1 a check failed; 2 usage or missing binaries; 77 not run (no
# usable GPU: none visible, no driver, driver too old, GPU too old).
#
# Usage: scripts/device-check.sh [--bin DIR] [--out DIR] [--quick]
#   --bin DIR  the carried binaries (default build-device/bin)
#   --out DIR  where the log and results go (default $OUT, else device-check-out)
#   --quick    fewer iterations and smaller benchmark sizes (about 2 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=build-device/bin out=${OUT:-device-check-out} quick=0
while (($#)); do
  case $1 in
    --bin) bin=${2:?--bin needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --quick) quick=1; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "device-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out" || exit 2
log="$out/device-check.log" results="$out/results.md"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
etc="$bin/etc"
for b in etc cuda_runtime_test cuda_kernels; do
  if [[ ! -x "$bin/$b" ]]; then
    say "device-check: $bin/$b is missing: build it with scripts/build-for-device.sh and carry build-device"
    exit 2
  fi
done
# cuBLAS is loaded at run time: look in the toolkit and in PyTorch's nvidia-cublas wheel.
extra=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
pylib=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
[[ -n $pylib ]] && extra+=":$pylib"
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib; do [[ -d $d ]] && extra+=":$d"; done
export LD_LIBRARY_PATH="$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
iters=100 warmup=20
((quick)) && iters=30 warmup=5
# --quick leaves out the op cases above the grid cap and 2^31 bytes (tens of seconds each).
((quick)) && export ETC_OP_CASES_BIG=${ETC_OP_CASES_BIG:-0}
start=$(date +%s)

say "# etc device check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "$(cat "$bin/../BUILD_INFO" 2>/dev/null || echo "build info: none")"
say "tree: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
version=$("$etc" --version 2>&1)
say "$version"
smi=$(nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader 2>&1 ||
      echo "nvidia-smi: not available")
say "nvidia-smi: $smi"
{ command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"; } >>"$log" 2>&1
{
  echo "# Device check results"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- binaries: $(head -1 "$bin/../BUILD_INFO" 2>/dev/null || echo unknown)"
  echo "- GPU: $(grep '^CUDA device 0: ' <<<"$version" | sed 's/^CUDA device 0: //' || true)"
} >"$results"
not_run() {  # REASON: nothing can be checked on this machine; say why, exit 77
  say "device-check: not run: $1"
  {
    echo "- CUDA: $(grep -E '^CUDA (support|driver)' <<<"$version" | tr '\n' ';' | sed 's/;$//')"
    echo "- **not run**: $1"
  } >>"$results"
  exit 77
}
driver=$(grep '^CUDA driver: ' <<<"$version" | sed 's/^CUDA driver: //')
if [[ $driver == *"too old"* ]]; then
  not_run "driver too old: the driver supports CUDA ${driver%% *}; ${driver#*too old: } (nvidia-smi: $smi)"
elif [[ $driver == none* ]]; then
  not_run "no NVIDIA driver ($driver; nvidia-smi: $smi)"
elif ! grep -q '^CUDA device 0: ' <<<"$version"; then
  not_run "no GPU visible: $(grep 'CUDA devices' <<<"$version")"
elif grep -q '^CUDA device 0: .*not usable' <<<"$version"; then
  not_run "GPU not supported by this build: $(grep '^CUDA device 0: ' <<<"$version" | sed 's/.*not usable: //')"
fi

status=0
triage_left=${TRIAGE_SECONDS:-180}
mkdir -p "$out/steps"
nstep=0
step() {  # NAME CMD...: runs CMD, logs its output, records pass/fail; a failure is triaged
  local name=$1 rc t0=$SECONDS
  shift
  nstep=$((nstep + 1))
  local slug
  slug=$(printf '%02d-%s' "$nstep" "$(tr -c 'A-Za-z0-9' '-' <<<"$name" | tr -s '-' | cut -c1-48)")
  local steplog="$out/steps/$slug.log"
  say ""
  say "## $name"
  "$@" >"$steplog" 2>&1
  rc=$?
  cat "$steplog" >>"$log"
  local verdict=passed
  ((rc == 77)) && verdict=skipped
  ((rc != 0 && rc != 77)) && { verdict="FAILED (exit $rc)"; status=1; }
  say "$name: $verdict ($((SECONDS - t0)) s)"
  if ((rc != 0 && rc != 77)); then
    triage "$steplog" "$out/steps/$slug.blocking.log" "$@"
    verdict+="; rerun with CUDA_LAUNCH_BLOCKING=1: $(tail -1 "$out/steps/$slug.blocking.log" 2>/dev/null)"
  fi
  echo "| $name | $verdict | $((SECONDS - t0)) s |" >>"$results.checks"
}
# triage STEPLOG OUTLOG CMD...: reruns the failed check once with CUDA_LAUNCH_BLOCKING=1 (the
# op cases: each failing case alone, at most 4) within what is left of TRIAGE_SECONDS; the
# last line of OUTLOG says what the rerun gave.
triage() {
  local steplog=$1 outlog=$2
  shift 2
  if ((triage_left <= 10)); then
    echo "triage: no time left (TRIAGE_SECONDS used up)" >"$outlog"; return
  fi
  local t0=$SECONDS budget=$((triage_left < 120 ? triage_left : 120))
  say "triage: rerunning with CUDA_LAUNCH_BLOCKING=1 (at most $budget s) -> $outlog"
  {
    echo "# rerun of: $*"
    echo "# CUDA_LAUNCH_BLOCKING=1: every launch completes before the next, so an illegal"
    echo "# address is reported by the launch that made it"
    if [[ "$*" == *cuda_ops_test.sh* ]]; then
      local cases c n=0 ok=0
      cases=$(grep -Eo '^FAIL: [^ :]+' "$steplog" | awk '{print $2}' | sort -u | head -4)
      for c in $cases; do
        echo "## case $c"
        n=$((n + 1))
        if CUDA_LAUNCH_BLOCKING=1 timeout $((budget / 4 + 5)) "$@" "$c" 2>&1; then ok=$((ok + 1)); fi
      done
      echo "triage: reran $n failing case(s) alone, $ok passed"
    else
      CUDA_LAUNCH_BLOCKING=1 timeout "$budget" "$@" 2>&1
      echo "triage: exit $? with CUDA_LAUNCH_BLOCKING=1"
    fi
  } >"$outlog" 2>&1
  triage_left=$((triage_left - (SECONDS - t0)))
  cat "$outlog" >>"$log"
  say "$(tail -1 "$outlog")"
}
: >"$results.checks"
step "runtime plumbing without GPU errors ([nogpu])" "$bin/cuda_runtime_test" "[nogpu]"
step "allocator, host-pointer rule, cuda:0/cuda:1 delegates, zeroed state ([gpu])" "$bin/cuda_runtime_test" "[gpu]"
step "every capability op vs the CPU reference" bash test/cuda/cuda_ops_test.sh "$etc" "$root" cuda
step "examples on CUDA with --verify, CUDA graphs replayed" bash test/cuda/cuda_examples_test.sh "$etc" "$root"
# PyTorch archives: the committed ones, and the cached fixtures when carried along.
step "PyTorch programs on CUDA with --verify" bash test/torch/cuda_models_test.sh "$etc" "$root" "${TORCH_FIXTURES:-}"
if compgen -G "$bin/../onnx/*.pte" >/dev/null; then
  step "ONNX models (PyPI) on CUDA with --verify" bash test/onnx/cuda_models_test.sh "$etc" "$bin/../onnx"
fi
if compgen -G "$bin/../decoders/*.pte" >/dev/null; then
  step "decoders on CUDA: KV cache on the GPU, PyTorch's ids, --verify" \
    bash test/torch/cuda_decoders_test.sh "$etc" "$bin/../decoders"
fi
# etc inside ExecuTorch's runtime (the wheel's libexecutorch.so carried in ../lib).
step "ExecuTorch's runtime on the GPU through etc's plugin" \
  env LD_LIBRARY_PATH="$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  bash test/executorch/plugin_gpu_test.sh "$etc" "$bin/etc_et_runner_etc_kernels" "$root"
((quick)) || step "compute-sanitizer memcheck, one case per kernel family" \
  timeout 150 bash test/cuda/memcheck.sh "$etc" "$root"
ops_summary=$(grep -E 'op cases pass on cuda' "$log" | tail -1)
{
  echo
  echo "## Checks"
  echo
  echo "| check | result | time |"
  echo "|---|---|---|"
  cat "$results.checks"
  [[ -n $ops_summary ]] && echo && echo "Op cases: $ops_summary."
  grep -E '^FAIL' "$log" | head -20 | sed 's/^/    /'
} >>"$results"
rm -f "$results.checks"

say ""
say "## GPU kernels (bench/cuda_kernels)"
kargs=()
((quick)) && kargs=(--quick)
if timeout 180 "$bin/cuda_kernels" "${kargs[@]}" >"$out/kernels.md" 2>>"$log"; then
  cat "$out/kernels.md" >>"$log"
  { echo; echo "## GPU kernels against the measured peaks"; echo; cat "$out/kernels.md"; } >>"$results"
else
  say "cuda_kernels failed (exit $?)"; status=1
  cat "$out/kernels.md" >>"$log"
fi
rm -f "$out/kernels.md"

say ""
say "## End-to-end latency (etc run --json, warmup $warmup, iterations $iters)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo
  echo "## End-to-end latency, ms (median of $iters; etc run --device cuda --json)"
  echo
  echo "| model | IO | copies/inference | h2d | compute | d2h | total |"
  echo "|---|---|---|---|---|---|---|"
} >>"$results"
for model in mlp cnn transformer_block; do
  for io in host device host+graphs; do
    pte="$tmp/$model-$io.pte"
    run_flags=()
    [[ $io == host+graphs ]] && run_flags=(--cuda-graphs)
    if ! "$etc" export "examples/$model.json" -o "$pte" --io-device "${io%+graphs}" >"$tmp/export.out" 2>&1; then
      say "export $model ($io) failed"; cat "$tmp/export.out" >>"$log"; status=1; continue
    fi
    copies=$(grep -Eo 'copies per inference: [^,]+, [^,]+' "$tmp/export.out" | sed 's/copies per inference: //')
    if ! "$etc" run "$pte" --device cuda --warmup "$warmup" --iterations "$iters" --json "${run_flags[@]}" \
        >"$tmp/run.json" 2>>"$log"; then
      say "run $model ($io) failed"; status=1; continue
    fi
    python3 - "$tmp/run.json" "$model" "$io" "$copies" >>"$results" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timing_ms"]
h, c, d = t["h2d_median"], t["compute_median"], t["d2h_median"]
print("| %s | %s | %s | %.3f | %.3f | %.3f | %.3f |" % (sys.argv[2], sys.argv[3], sys.argv[4], h, c, d, h + c + d))
PY
    cp "$tmp/run.json" "$tmp/etc-$model-$io.json"
  done
done
tail -11 "$results" >>"$log"

say ""
say "## PyTorch eager (bench/torch_eager.py)"
if WARMUP=$warmup ITERATIONS=$iters timeout 240 python3 bench/torch_eager.py examples >"$tmp/torch.jsonl" 2>>"$log"; then
  cat "$tmp/torch.jsonl" >>"$log"
  python3 - "$tmp" >>"$results" <<'PY'
import json, os, sys
tmp = sys.argv[1]
print()
print("## etc (CUDA) against PyTorch eager on the same GPU, ms")
print()
print("| model | torch compute | etc compute (host IO) | etc compute (device IO) | etc compute (host IO, --cuda-graphs) | torch total | etc total (host IO) | etc/torch compute | etc/torch total |")
print("|---|---|---|---|---|---|---|---|---|")
for line in open(os.path.join(tmp, "torch.jsonl")):
    r = json.loads(line)
    m = r["model"]
    def etc(io):
        t = json.load(open(os.path.join(tmp, "etc-%s-%s.json" % (m, io))))["timing_ms"]
        return t["h2d_median"], t["compute_median"], t["d2h_median"]
    try:
        eh, ec, ed = etc("host")
        _, dc, _ = etc("device")
        _, gc, _ = etc("host+graphs")
    except OSError:
        continue
    tt = r["h2d_ms"] + r["compute_ms"] + r["d2h_ms"]
    et = eh + ec + ed
    print("| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f |" % (
        m, r["compute_ms"], ec, dc, gc, tt, et, ec / r["compute_ms"], et / tt))
print()
print("PyTorch %s; a ratio below 1 means etc is faster." % r.get("torch", "?"))
PY
else
  rc=$?
  say "torch_eager: not run or failed (exit $rc)"
  echo -e "\nPyTorch eager: not run (exit $rc; see the log)." >>"$results"
fi

if compgen -G "$bin/../decoders/*.pte" >/dev/null; then
  say ""
  say "## Decoders on the GPU (bench/decoder_gpu.sh)"
  dsteps=100
  ((quick)) && dsteps=30
  if STEPS=$dsteps timeout 240 bash bench/decoder_gpu.sh "$etc" "$bin/../decoders" >"$tmp/decoders.md" 2>>"$log"; then
    :
  else
    say "decoder_gpu: failed (exit $?)"; status=1
  fi
  cat "$tmp/decoders.md" >>"$log"
  {
    echo
    echo "## Decoders: generation on the GPU against PyTorch eager on the same GPU ($dsteps steps)"
    echo
    cat "$tmp/decoders.md"
  } >>"$results"
fi

say ""
say "device-check: done in $(($(date +%s) - start)) s, status $status"
echo -e "\nDevice check finished in $(($(date +%s) - start)) s with status $status." >>"$results"
exit $status
