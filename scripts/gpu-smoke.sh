#!/usr/bin/env bash
# The short GPU check: at most 5 minutes on one H200, the build included
# (a total deadline of 290 s; every step has its own limit too). It builds
# (Release, -j16, only the programs it runs) and prints, each with a label:
# `jx info`; the driver, NVRTC and a cubin loaded (test_cuda_runtime, whose
# last tests copy, launch a kernel and run a GEMM where a GPU exists); an MLP
# train loop on the GPU against the CPU jit (test_cuda_resident --real);
# fused attention forward and backward and a 1-layer GPT train step's
# gradients against the CPU, within the tests' stated tolerances
# (test_cuda_fuse_grad --real); the bf16 GEMM in TFLOP/s next to cuBLASLt
# called directly (bench_cuda_gemm); the attention kernels alone, forward
# and backward (bench_cuda_attention); GPT-2 124M tokens/s and MFU over 3
# steps (bench_cuda_gpt); the all-reduce of 8 local ranks on the machine's
# cores (bench_allreduce). A failing step prints the tail of its log and the
# run goes on. scripts/gpu-check.sh is the long form (the CUDA suite, JAX's
# GPT step). Logs: <build-dir>/gpu-smoke-logs/<step>.log. Exit status 0
# when every step passed.
#
# --tiny: the same steps as a dry run on a machine without a GPU: the tests
# on tests/cuda_fake's driver (kernels in the CPU emulator), a 1-layer tiny
# GPT on the CPU, one all-reduce repetition; the GEMM bench says it skipped.
# --no-build: run the programs already in build-dir (built on another machine
# of the same architecture, say, where this one has no compiler toolchain or
# libraries for building; the libraries they load must be on the loader's path).
# Usage: scripts/gpu-smoke.sh [--tiny] [--no-build] [build-dir]   (default: build-gpu)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tiny=0
build_it=1
while [[ ${1:-} == --* ]]; do
  case $1 in
  --tiny) tiny=1 ;;
  --no-build) build_it=0 ;;
  *)
    echo "gpu-smoke.sh: unknown option $1 (options: --tiny, --no-build)" >&2
    exit 2
    ;;
  esac
  shift
done
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
((jobs > 16)) && jobs=16
peak=${GPU_PEAK_TFLOPS:-989}
start=$(date +%s)
deadline=$((start + 290))
logs=$build/gpu-smoke-logs
declare -a summary
# shellcheck source=scripts/gpu-lib.sh
source "$root/scripts/gpu-lib.sh"
STEP_FAIL_SHOW=25

mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null

# an existing build folder keeps its configuration (no rebuild of everything
# for a change of flags); a fresh one is a Release build without examples
if ((build_it)) && [[ ! -f $build/CMakeCache.txt ]]; then
  STEP_SHOW=2 step configure 40 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DJX_BUILD_EXAMPLES=OFF
fi
((build_it)) && STEP_SHOW=2 step build 150 cmake --build "$build" -j "$jobs" --target jx_cli \
  test_cuda_runtime test_cuda_resident test_cuda_fuse_grad bench_cuda_gemm bench_cuda_attention \
  bench_cuda_gpt bench_allreduce

real=--real
((tiny)) && real= # the tests' default: the fake driver
cache="$build/kernels-gpu-smoke"
STEP_SHOW=3 step "jx info" 15 "$build/jx" info
STEP_SHOW=8 step "driver, NVRTC and a cubin (test_cuda_runtime)" 40 env JX_CACHE_DIR="$cache" \
  "$build/tests/test_cuda_runtime"
STEP_SHOW=4 step "MLP train loop vs the CPU (test_cuda_resident${real:+ $real})" 50 \
  env JX_CACHE_DIR="$cache" "$build/tests/test_cuda_resident" $real
# its worst errors against the CPU, each next to the bound it asserts
STEP_SHOW=0 step "attention and 1-layer GPT grads vs the CPU (test_cuda_fuse_grad${real:+ $real})" 90 \
  env JX_CACHE_DIR="$cache" "$build/tests/test_cuda_fuse_grad" $real
grep -E 'worst|error|bound|PASSED|FAILED' "$logs"/attention_and_1-layer*.log 2>/dev/null | tail -n 12
gemm_log=$logs/bench_cuda_gemm.log
step "bench_cuda_gemm" 40 "$build/bench/bench_cuda_gemm"
attn_log=$logs/bench_cuda_attention.log
step "bench_cuda_attention" 40 "$build/bench/bench_cuda_attention"
gpt_log=$logs/bench_cuda_gpt.log
if ((tiny)); then
  step "bench_cuda_gpt" 60 env JX_PLATFORM=cpu JX_CACHE_DIR="$cache" "$build/bench/bench_cuda_gpt" \
    --tiny --layers 1 --steps 2 --warmup 0
else
  step "bench_cuda_gpt" 120 env JX_CACHE_DIR="$cache" "$build/bench/bench_cuda_gpt" \
    --steps 3 --warmup 1 --peak-tflops "$peak" --max-seconds 90
fi
ar_log=$logs/bench_allreduce.log
STEP_SHOW=0 step "bench_allreduce" 40 "$build/bench/bench_allreduce" "$((tiny ? 1 : 3))"

echo
echo "=== summary ($(($(date +%s) - start))s of 290; logs in $logs)"
printf '  %s\n' "${summary[@]}"
[[ -x $build/jx ]] && "$build/jx" info 2>/dev/null | grep -E '^CUDA' | sed 's/^/  /'
gemm_line "$gemm_log"
# the attention kernels alone: each pass's time and TFLOP/s by implementation
sed -n 's/.*"bench":"cuda_attention_\(fwd\|bwd\)","impl":"\([^"]*\)".*"median_ms":\([0-9.]*\),"tflop_per_s":\([0-9.]*\).*/  attention \1 (\2): \3 ms, \4 TFLOP\/s/p' \
  "$attn_log" 2>/dev/null
gpt_line "$gpt_log" jx jx
jx_mfu=$(field "$gpt_log" jx mfu)
((!tiny)) && [[ -n $jx_mfu ]] && echo "  GPT step MFU target >= 45 %: $(awk -v m="$jx_mfu" \
  'BEGIN { print (m >= 0.45 ? "met" : "NOT met") }')"
# the all-reduce: each size's algorithm bandwidth and its share of one memcpy's
sed -n 's/.*"bench":"allreduce_f32_8x_\([^"]*\)".*"median_ns":\([0-9.]*\).*"algbw_gb_per_s":\([0-9.]*\).*"of_memcpy":\([0-9.]*\).*/  all-reduce 8 ranks \1: \2 ns, \3 GB\/s, \4 x memcpy/p' \
  "$ar_log" 2>/dev/null
summary_status
