#!/usr/bin/env bash
# gpu_check.sh: the one thing to run on a machine with an NVIDIA GPU (`make gpu-check`).
# Builds the CUDA test and the GPU programs, runs the CUDA tests (every GPU kernel, cuDNN's
# fused attention and a whole decode step against the CPU reference), then
# bin/attention_kernels --backend cuda --summary: attention naive vs our flash kernel vs cuDNN's fused SDPA at the seeds' shape (B=4 H=12
# T=2048 D=64 fp16) and T sweeps to 16K, and the cuBLAS matmul rates (fp32, tf32, fp16,
# bf16); then the other experiments' --backend cuda runs in the quick profile: hardware_budget
# (device bandwidth, matmul peaks, our decode's MBU) and, when a trained model exists,
# kv_cache. CSVs and logs go under OUT_DIR; the summary table is printed last. A few minutes.
#
#   scripts/gpu_check.sh [OUT_DIR]        (default out/gpu-check)
#   QUICK=1 scripts/gpu_check.sh ...      shorter sweep (T to 4096), fewer repetitions
#
# Exit status: 0 all ran and passed, 1 a build, test or benchmark failed, 2 no GPU / no nvcc.
set -u
cd "$(dirname "$0")/.."
out=${1:-out/gpu-check}
mkdir -p "$out" || exit 1
jobs=$(nproc 2>/dev/null || echo 4)
quick=${QUICK:-0}

section() { printf '\n== %s\n' "$*"; }

if ! command -v nvcc >/dev/null 2>&1; then
    echo "gpu_check: nvcc not found: the CUDA backend cannot be built here" >&2
    exit 2
fi
section "device"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee "$out/nvidia_smi.txt"
else
    echo "nvidia-smi not found"
fi

section "build (CUDA=1, $jobs jobs; log: $out/build.log)"
if ! make -j"$jobs" CUDA=1 build/tests/test_cuda bin/attention_kernels bin/kv_cache bin/hardware_budget \
        >"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log"
    echo "gpu_check: build failed" >&2
    exit 1
fi
echo "built build/tests/test_cuda, bin/attention_kernels, bin/kv_cache, bin/hardware_budget"

section "CUDA tests (log: $out/test_cuda.log)"
timeout 600 ./build/tests/test_cuda >"$out/test_cuda.log" 2>&1
test_rc=$?
grep -E '^test_cuda:|ERROR|^\[  FAILED  \] test_|^\[  (PASSED|SKIPPED|FAILED) *\] [0-9]+ test' "$out/test_cuda.log"
if grep -q 'no usable CUDA device' "$out/test_cuda.log"; then
    tests="skipped: $(grep -o 'no usable CUDA device.*' "$out/test_cuda.log" | head -n 1)"
elif [ "$test_rc" -eq 0 ]; then
    tests="passed ($(grep -c '^\[       OK \]' "$out/test_cuda.log") tests)"
else
    tests="FAILED (exit $test_rc; see $out/test_cuda.log)"
fi

section "benchmarks (log: $out/attention_kernels.log)"
bench_args=(--backend cuda --summary --out "$out")
[ "$quick" = 1 ] && bench_args+=(--quick)
timeout 900 ./bin/attention_kernels "${bench_args[@]}" >"$out/attention_kernels.txt" 2>"$out/attention_kernels.log"
bench_rc=$?
cat "$out/attention_kernels.log"
case $bench_rc in
    0) bench="ran: the cuda rows of $out/attention_kernels.csv and $out/sgemm_peak.csv" ;;
    2) bench="$(tail -n 1 "$out/attention_kernels.log" | sed 's/^attention_kernels: //')" ;;
    *) bench="FAILED (exit $bench_rc; see $out/attention_kernels.log)" ;;
esac

# The engine on the GPU: an experiment's --backend cuda run, quick profile. Exit 2 is "not run".
experiment() { # name, then its arguments
    local name=$1
    shift
    timeout 900 "./bin/$name" --backend cuda --quick --out "$out" "$@" >"$out/$name.log" 2>&1
    case $? in
        0) echo "$name: ran" ;;
        2) echo "$name: $(tail -n 1 "$out/$name.log" | sed "s/^$name: //")" ;;
        *) echo "$name: FAILED (see $out/$name.log)" ;;
    esac
}
section "experiments on the GPU (logs: $out/<name>.log)"
experiments_failed=0
model=""
for m in out/models/quick/target.gguf out/models/full/target.gguf; do [ -f "$m" ] && { model=$m; break; }; done
experiments=$(
    experiment hardware_budget ${model:+--model "$model"}
    if [ -n "$model" ]; then experiment kv_cache --model "$model"
    else echo "kv_cache: skipped: no trained model (make models PROFILE=quick)"; fi
)
echo "$experiments"
grep -q FAILED <<<"$experiments" && experiments_failed=1

section "summary"
echo "tests:      $tests"
echo "benchmarks: $bench"
echo "$experiments" | sed 's/^/experiment: /'
[ "$bench_rc" -eq 0 ] && sed -n '/^== GPU check summary/,$p' "$out/attention_kernels.txt"
if [ "$test_rc" -ne 0 ] || [ "$experiments_failed" -ne 0 ] || { [ "$bench_rc" -ne 0 ] && [ "$bench_rc" -ne 2 ]; }; then
    exit 1
fi
if [ "$bench_rc" -eq 2 ]; then exit 2; fi
exit 0
