#!/usr/bin/env bash
# gpu_check.sh: the one thing to run on a machine with an NVIDIA GPU (`make gpu-check`).
# Builds the CUDA test and benchmark, runs the CUDA tests (every GPU kernel and a whole
# decode step against the CPU reference), then bin/cuda_bench: attention naive vs our flash
# kernel at the seeds' shape (B=4 H=12 T=2048 D=64 fp16) and a causal T sweep to 16K, and
# the cuBLAS matmul rates (fp32, tf32, fp16, bf16). CSVs and logs go under OUT_DIR; the
# summary table is printed last. A few minutes in all.
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
if ! make -j"$jobs" CUDA=1 build/tests/test_cuda bin/cuda_bench >"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log"
    echo "gpu_check: build failed" >&2
    exit 1
fi
echo "built build/tests/test_cuda and bin/cuda_bench"

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

section "benchmarks (log: $out/cuda_bench.log)"
bench_args=(--out "$out")
[ "$quick" = 1 ] && bench_args+=(--quick)
timeout 900 ./bin/cuda_bench "${bench_args[@]}" >"$out/cuda_bench.txt" 2>"$out/cuda_bench.log"
bench_rc=$?
cat "$out/cuda_bench.log"
case $bench_rc in
    0) bench="ran: $out/cuda_attention.csv, $out/cuda_gemm.csv" ;;
    2) bench="$(tail -n 1 "$out/cuda_bench.log" | sed 's/^cuda_bench: //')" ;;
    *) bench="FAILED (exit $bench_rc; see $out/cuda_bench.log)" ;;
esac

section "summary"
echo "tests:      $tests"
echo "benchmarks: $bench"
[ "$bench_rc" -eq 0 ] && sed -n '/^== GPU check summary/,$p' "$out/cuda_bench.txt"
if [ "$test_rc" -ne 0 ] || { [ "$bench_rc" -ne 0 ] && [ "$bench_rc" -ne 2 ]; }; then exit 1; fi
if [ "$bench_rc" -eq 2 ]; then exit 2; fi
exit 0
