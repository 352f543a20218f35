#!/usr/bin/env bash
# The checks of the CUDA backend that need a GPU, in one run of under 9
# minutes (the steps' limits add up to 530 s): a Release build of what they
# use, `jx info`, the CUDA tests (ctest -R cuda), the CUDA executor's test
# against the real driver and NVRTC (test_cuda_exec --real: jitted programs
# on the GPU equal the CPU jit's) and the GEMM benchmark, then a summary. On a machine without a GPU every step still runs and says why
# the GPU parts were skipped. Usage: scripts/gpu-check.sh [build-dir]   (default: build-gpu)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
start=$(date +%s)
declare -a summary
step() { # step NAME SECONDS COMMAND...: runs with a time limit, records the outcome
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== $name"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  local took=$(($(date +%s) - t0))
  if ((rc == 0)); then
    summary+=("ok      $name (${took}s)")
  elif ((rc == 124 || rc == 137)); then
    summary+=("TIMEOUT $name (over ${limit}s)")
  else
    summary+=("FAILED  $name (exit $rc, ${took}s)")
  fi
  return $rc
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null

mkdir -p "$build"
step configure 60 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DJX_BUILD_EXAMPLES=OFF >"$build/configure.log" 2>&1 || tail -20 "$build/configure.log"

# the programs the CUDA tests run (ctest -R cuda: unit.test_<target>, ...), jx and the bench
targets="jx_cli bench_cuda_gemm"
other_tests=0
while read -r name; do
  case $name in
  unit.*) # unit.test_x or unit.test_x.variant: the program test_x
    name=${name#unit.}
    targets="$targets ${name%%.*}"
    ;;
  *) other_tests=1 ;;
  esac
done < <(cd "$build" && ctest -N -R cuda 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p')
((other_tests)) && targets=all # tests of other kinds: build everything rather than guess
echo "building: $targets"
# shellcheck disable=SC2086 # one word per target
step build 180 cmake --build "$build" -j "$jobs" --target $targets

step "jx info" 20 "$build/jx" info
step "ctest -R cuda" 150 ctest --test-dir "$build" -R cuda --output-on-failure -j 4
# the executor on the GPU: fused kernels through NVRTC, GEMMs through cuBLASLt
step "test_cuda_exec --real" 60 env JX_CACHE_DIR="$build/kernels-gpu-check" \
  "$build/tests/test_cuda_exec" --real
bench_out=$build/bench_cuda_gemm.json
step "bench_cuda_gemm" 60 bash -o pipefail -c "'$build/bench/bench_cuda_gemm' | tee '$bench_out'"

echo
echo "=== summary ($(($(date +%s) - start))s)"
printf '  %s\n' "${summary[@]}"
[[ -x $build/jx ]] && "$build/jx" info 2>/dev/null | grep -E '^CUDA' | sed 's/^/  /'
[[ -s $bench_out ]] && sed 's/^/  /' "$bench_out"
for line in "${summary[@]}"; do
  [[ $line == ok* ]] || exit 1
done
exit 0
