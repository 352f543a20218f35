#!/usr/bin/env bash
# The checks of the CUDA backend that need a GPU, in one run of at most 8
# minutes (every step has its own limit, and none may run past the run's
# deadline): a Release build of what they use, `jx info`, the CUDA
# executor's test against the real driver and NVRTC (test_cuda_exec --real:
# jitted programs on the GPU equal the CPU jit's), the CUDA tests (ctest -R
# cuda), the bf16 GEMM benchmark (jx vs cuBLASLt called directly), the
# GPT-2 124M train step in jx (bench_cuda_gpt) and in JAX on the same GPU
# (bench/jax_gpt_gpu.py, where jax with CUDA is installed), then a summary
# with the targets: GEMM >= 0.85 x cuBLASLt, GPT step MFU >= 45 % of the
# peak (989 TFLOP/s dense bf16, an H200's; GPU_PEAK_TFLOPS overrides).
# On a machine without a GPU every step still runs and says why the GPU
# parts were skipped. Each step's whole output goes to
# <build-dir>/gpu-check-logs/<step>.log; the terminal gets its last lines
# (more when it fails). Exit status 0 when every step passed.
# Usage: scripts/gpu-check.sh [build-dir]   (default: build-gpu)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
peak=${GPU_PEAK_TFLOPS:-989}
start=$(date +%s)
deadline=$((start + 450)) # 8 minutes less the kill grace and the summary
logs=$build/gpu-check-logs
declare -a summary

# shellcheck source=scripts/gpu-lib.sh
source "$root/scripts/gpu-lib.sh"

mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null

STEP_SHOW=2 step configure 60 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DJX_BUILD_EXAMPLES=OFF -DJX_CUDA_SUITE_FULL=ON

# the programs the CUDA tests run (ctest -R cuda: unit.test_<target>[.variant],
# bench.<target>[.variant], and the suite on CUDA: cuda.unit.<target>, cuda.mesh.<target>,
# cuda.conformance.<family>.jit), jx and the benches
targets="jx_cli bench_cuda_gemm bench_cuda_gpt"
other_tests=0
while read -r name; do
  case $name in
  cuda.conformance.*) targets="$targets jx_conformance jx_cuda_fake" ;;
  cuda.unit.*)
    name=${name#cuda.unit.}
    targets="$targets ${name%%.*} jx_cuda_fake"
    ;;
  cuda.mesh.*)
    name=${name#cuda.mesh.}
    targets="$targets ${name%%.*} jx_nccl_fake_emu"
    ;;
  unit.* | bench.*)
    name=${name#*.}
    targets="$targets ${name%%.*}"
    ;;
  *) other_tests=1 ;;
  esac
done < <(cd "$build" && ctest -N -R cuda 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p')
((other_tests)) && targets=all # tests of other kinds: build everything rather than guess
echo "building: $targets"
# shellcheck disable=SC2086 # one word per target
STEP_SHOW=2 step build 200 cmake --build "$build" -j "$jobs" --target $targets

STEP_SHOW=20 step "jx info" 20 "$build/jx" info
# the executor on the GPU: fused kernels through NVRTC, GEMMs through cuBLASLt
# unfused, as CTest runs it: the cases compare the executor's own kernels with the CPU jit's
STEP_SHOW=12 step "test_cuda_exec --real" 60 env JX_CACHE_DIR="$build/kernels-gpu-check" \
  JX_CUDA_NO_FUSE=1 "$build/tests/test_cuda_exec" --real
# device-resident arrays, donation and asynchronous calls on the real driver
STEP_SHOW=12 step "test_cuda_resident --real" 60 env JX_CACHE_DIR="$build/kernels-gpu-check" \
  "$build/tests/test_cuda_resident" --real
# the suite on CUDA (cuda.* entries) runs on this machine's GPU where jx sees
# one (JX_TEST_CUDA_DRIVER=real), else on the fake driver as in CI
suite_driver=fake
"$build/jx" info 2>/dev/null | grep -Eq '^CUDA [0-9.]+, [1-9][0-9]* device' && suite_driver=real
echo "the suite's cuda.* entries run on the $suite_driver driver"
STEP_SHOW=12 step "ctest -R cuda" 200 env JX_TEST_CUDA_DRIVER=$suite_driver \
  ctest --test-dir "$build" -R cuda --output-on-failure -j "$((jobs > 8 ? 8 : jobs))"
gemm_log=$logs/bench_cuda_gemm.log
step "bench_cuda_gemm" 60 "$build/bench/bench_cuda_gemm"
# the GPT-2 124M step: few steps (the first call traces and compiles); each
# bench stops timing on its own before its limit, to print what it measured
gpt_log=$logs/bench_cuda_gpt.log
step "bench_cuda_gpt" 180 env JX_CACHE_DIR="$build/kernels-gpu-check" \
  "$build/bench/bench_cuda_gpt" --steps 5 --warmup 1 --peak-tflops "$peak" --max-seconds 140
jax_log=$logs/jax_gpt_gpu.log
if command -v python3 >/dev/null; then
  step "jax_gpt_gpu" 120 python3 "$root/bench/jax_gpt_gpu.py" --steps 10 --warmup 2 \
    --peak-tflops "$peak" --max-seconds 90
else
  echo '{"bench": "cuda_gpt_step", "impl": "jax", "skipped": "no python3"}' >"$jax_log"
  summary+=("ok      jax_gpt_gpu (skipped: no python3)")
fi

echo
echo "=== summary ($(($(date +%s) - start))s; logs in $logs)"
printf '  %s\n' "${summary[@]}"
[[ -x $build/jx ]] && "$build/jx" info 2>/dev/null | grep -E '^CUDA' | sed 's/^/  /'

gemm_line "$gemm_log"
gpt_line "$gpt_log" jx jx
gpt_line "$jax_log" jax JAX
jx_mfu=$(field "$gpt_log" jx mfu)
if [[ -n $jx_mfu ]]; then
  echo "  GPT step MFU target >= 45 %: $(awk -v m="$jx_mfu" \
    'BEGIN { print (m >= 0.45 ? "met" : "NOT met") }')"
fi
jx_tps=$(field "$gpt_log" jx tokens_per_s)
jax_tps=$(field "$jax_log" jax tokens_per_s)
if [[ -n $jx_tps && -n $jax_tps && $(field "$gpt_log" jx params) != $(field "$jax_log" jax params) ]]; then
  echo "  GPT step tokens/s jx/JAX: not compared (the two ran models of different sizes)"
elif [[ -n $jx_tps && -n $jax_tps ]]; then
  echo "  GPT step tokens/s jx/JAX: $(awk -v a="$jx_tps" -v b="$jax_tps" \
    'BEGIN { printf "%.3f (target >= 1: %s)", a / b, (a >= b ? "met" : "NOT met") }')"
fi

summary_status
