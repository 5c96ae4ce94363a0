#!/usr/bin/env bash
# Rehearses scripts/device-check.sh end to end on a machine without a GPU, with stand-in
# binaries: an `etc` that reports an H200 and runs `--device cuda` programs on the CPU
# reference, a cuda_runtime_test and a cuda_kernels that print what the real ones would.
# Three runs:
#  1. --quick with one op case made to fail (an "illegal address" that the stand-in names only
#     under CUDA_LAUNCH_BLOCKING=1): exit 1, the failure in results.md, the triage rerun of
#     that case alone with its own log;
#  2. a driver too old for the CUDA 13 runtime: exit 77 and "not run: driver too old", never
#     a pass;
#  3. the full check, all passing: exit 0.
# Prints each run's wall time (the device check's time boxes: --quick about 2 minutes, full
# about 6, on the GPU machine's 16 cores; this machine is slower).
# Usage: device_check_rehearsal.sh ETC SOURCE_DIR
set -u
etc=$(realpath "$1") src=$2
tmp=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$tmp"' EXIT
failures=0 passes=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

bin="$tmp/build-device/bin"
mkdir -p "$bin"
echo "commit: rehearsal (stand-in binaries)" >"$tmp/build-device/BUILD_INFO"
cat >"$bin/etc" <<EOF
#!/usr/bin/env bash
# Stand-in etc: a visible H200 (or, with STANDIN_MODE=old-driver, a driver for CUDA 12.8);
# '--device cuda[:N]' runs on the CPU reference; the op case named by STANDIN_FAIL_CASE fails
# like an asynchronous kernel fault.
real="$etc"
if [[ "\${1:-}" == --version ]]; then
  echo "etc 0.1.0 (stand-in)"
  echo "CUDA support: built in (CUDA runtime 13.0, architectures 80,90)"
  if [[ "\${STANDIN_MODE:-}" == old-driver ]]; then
    echo "CUDA driver: 12.8 (too old: this etc's CUDA 13.0 runtime needs a driver for CUDA 13.0 or newer)"
    echo "CUDA devices: none usable (cudaGetDeviceCount failed: cudaErrorInsufficientDriver)"
  else
    echo "CUDA driver: 13.0"
    echo "CUDA device 0: NVIDIA H200 (sm_90, 143771 MiB)"
  fi
  exit 0
fi
args=()
cuda=0 graphs=0 json=0 calls=0
for a in "\$@"; do
  case "\$a" in
    cuda|cuda:*) if [[ "\${prev:-}" == --device ]]; then a=cpu; cuda=1; fi ;;
    --cuda-graphs) graphs=1; continue ;;
    --json) json=1 ;;
  esac
  [[ "\${prev:-}" == --warmup || "\${prev:-}" == --iterations ]] && calls=\$((calls + a))
  args+=("\$a")
  prev=\$a
done
if [[ \$cuda == 1 && -n "\${STANDIN_FAIL_CASE:-}" && "\$*" == *"/\${STANDIN_FAIL_CASE}.pte"* ]]; then
  if [[ "\${CUDA_LAUNCH_BLOCKING:-0}" == 1 ]]; then
    echo "etc: internal error: kernel relu_float launch at cuda_ops.cpp:88 failed: cudaErrorIllegalAddress (stand-in, blocking)" >&2
  else
    echo "etc: internal error: cudaStreamSynchronize failed: cudaErrorIllegalAddress (stand-in)" >&2
  fi
  exit 70
fi
if [[ \$graphs == 1 && \$json == 1 ]]; then
  # What the real run --json reports with --cuda-graphs: one delegate, a plain run, a
  # capture, then a replay per further call.
  out=\$("\$real" "\${args[@]}") || exit \$?
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); n = int(sys.argv[2]); j["cuda_graphs"] = {"captures": 1, "replays": max(n - 2, 0), "plain_runs": 1, "failed_captures": 0}; print(json.dumps(j, indent=2))' "\$out" "\$calls"
  exit 0
fi
exec "\$real" "\${args[@]}"
EOF
cat >"$bin/cuda_runtime_test" <<'EOF'
#!/usr/bin/env bash
echo "stand-in cuda_runtime_test $*: All tests passed (0 assertions in 0 test cases)"
EOF
cat >"$bin/cuda_kernels" <<'EOF'
#!/usr/bin/env bash
printf '| kernel | GB/s | %% of peak |\n|---|---|---|\n| copy (stand-in) | 0 | 0 |\n'
EOF
chmod +x "$bin"/*

run_check() {  # LABEL ARGS...: runs the device check with the stand-ins, sets rc and secs
  local label=$1
  shift
  local t0=$SECONDS
  # The stand-in runs "cuda" cases on the CPU: the big ones (~24 GB each) stay out here.
  OUT="$tmp/out-$label" JOBS=2 ETC_OP_CASES_BIG=0 bash "$src/scripts/device-check.sh" --bin "$bin" "$@" \
    >"$tmp/$label.stdout" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  echo "device-check ($label): exit $rc in $secs s"
}

# 1. A failing case, triaged.
STANDIN_FAIL_CASE=relu_float32 run_check failing --quick
out="$tmp/out-failing"
((rc == 1)) && pass "a failed case fails the check (exit 1)" || { fail "exit $rc, expected 1"; tail -20 "$tmp/failing.stdout"; }
grep -q '| every capability op vs the CPU reference | FAILED' "$out/results.md" &&
  pass "results.md records the failed check" || fail "results.md lacks the failed check"
blocking=$(ls "$out"/steps/*capability-op*.blocking.log 2>/dev/null | head -1)
if [[ -n $blocking ]] && grep -q 'case relu_float32' "$blocking" && grep -q 'stand-in, blocking' "$blocking"; then
  pass "the failed case was rerun alone with CUDA_LAUNCH_BLOCKING=1 ($(tail -1 "$blocking"))"
else
  fail "no triage log with the blocking rerun of relu_float32"; ls "$out/steps" 2>/dev/null
fi
steplog=$(ls "$out"/steps/*capability-op*.log 2>/dev/null | grep -v blocking | head -1)
[[ -n $steplog ]] && grep -q 'FAIL: relu_float32' "$steplog" && pass "the first run's log is kept" ||
  fail "the failing step's own log is missing"
grep -q 'rerun with CUDA_LAUNCH_BLOCKING=1' "$out/results.md" && pass "results.md points at the rerun" ||
  fail "results.md does not mention the rerun"

# 2. A driver too old: not run, never passed.
STANDIN_MODE=old-driver run_check old-driver --quick
((rc == 77)) && pass "a driver too old is exit 77" || fail "driver too old gave exit $rc"
grep -q 'not run\*\*: driver too old: the driver supports CUDA 12.8' "$tmp/out-old-driver/results.md" &&
  pass "results.md says: not run, driver too old" || { fail "results.md: $(cat "$tmp/out-old-driver/results.md")"; }
grep -q 'passed' "$tmp/out-old-driver/results.md" && fail "an old driver reported something as passed"

# 3. The full check, all passing.
run_check full
((rc == 0)) && pass "the full check passes with working stand-ins ($secs s)" ||
  { fail "full check exit $rc"; grep -E 'FAIL|FAILED' "$tmp/out-full/device-check.log" | head; }

echo "$passes passed, $failures failed"
exit $((failures > 0))
