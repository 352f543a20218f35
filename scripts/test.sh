#!/usr/bin/env bash
# The whole test suite: installs dependencies, checks formatting, builds with
# gcc, checks the layers and runs every test, runs the threaded tests under ThreadSanitizer,
# then builds with clang under AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the suite again, then fuzzes the
# loaders for 30 s each in that build (tests/fuzz). Warnings are errors in
# every build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

CC=gcc cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJX_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
# each src/ folder uses only the layers below it (docs/architecture.md)
bash scripts/check-layers.sh build
# NVRTC's images of the library's CUDA sources, compiled once for both
# passes (tests/unit/nvrtc_test_cache.h): the same sources, the same NVRTC
export NVRTC_TEST_CACHE_DIR="$PWD/build/tests/nvrtc_cache"
ctest --test-dir build --output-on-failure -j"$jobs"

# ThreadSanitizer: only the tests whose point is threads (the library and
# these few targets, ~2 min). OpenBLAS keeps to one thread: its own threads
# are not instrumented, so TSan would not see them synchronize.
tsan_tests=(test_threads test_async_dispatch test_checkpoint test_data test_recursion)
CC=clang cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJX_TSAN=ON -DJX_WERROR=ON \
  -DJX_BUILD_BENCH=OFF -DJX_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan -j"$jobs" --target "${tsan_tests[@]}"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 OPENBLAS_NUM_THREADS=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
  -R "^unit\.($(IFS='|'; echo "${tsan_tests[*]}"))\$"

CC=clang cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DJX_SANITIZE=ON -DJX_WERROR=ON \
  -DJX_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j"$jobs"
# The cuda.* entries rerun the jit suite on the fake CUDA driver (~200 s of
# emulated kernels under the sanitizers), and test_cuda_kernels walks every
# conformance case's kernels through the emulator (~100 s here); the gcc
# build runs them, and the renderer's and executor's own tests
# (unit.test_render_cuda, unit.test_cuda_exec, ...) run here.
# Kernels compile at -O1 here (the same bits as -O3, which the gcc pass runs):
# most of this pass's time is the jit's compiles, and the sanitizers check
# the library, not the generated code's speed. The CUDA emulator's compiled
# modules are the gcc pass's where the sources are the same (its cache is
# keyed by source; the emulated kernels are not built with the sanitizers).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  JX_KERNEL_OPT=1 CUDA_EMU_CACHE_DIR="$PWD/build/tests/cuda_emu_cache" ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^cuda\.|^unit\.test_cuda_kernels$'

# The loaders' libFuzzer harnesses (tests/fuzz), 30 s each from the seed
# corpus, in the sanitized build (JX_FUZZ adds coverage to the loaders'
# sources only). New inputs go to build-asan/fuzz/, never the seeds; a
# crash is saved there too and fails the suite.
CC=clang cmake -S . -B build-asan -DJX_FUZZ=ON >/dev/null
cmake --build build-asan -j"$jobs" --target fuzz_npy fuzz_safetensors fuzz_manifest \
  fuzz_checkpoint_dir
# As many at once as there are cores: each still has a core for its 30 s.
fuzz() {
  local name=$1
  mkdir -p "build-asan/fuzz/$name"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-asan/tests/fuzz/fuzz_$name" -max_total_time=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="build-asan/fuzz/$name-" "build-asan/fuzz/$name" \
    "tests/fuzz/corpus/$name" >"build-asan/fuzz/$name.log" 2>&1
}
fuzzers=(npy safetensors manifest checkpoint_dir)
for ((first = 0; first < ${#fuzzers[@]}; first += jobs)); do
  names=("${fuzzers[@]:first:jobs}")
  pids=()
  for name in "${names[@]}"; do
    fuzz "$name" &
    pids+=($!)
  done
  for k in "${!names[@]}"; do
    name=${names[k]}
    log="build-asan/fuzz/$name.log"
    if ! wait "${pids[k]}"; then
      wait
      tail -n 80 "$log"
      echo "fuzz_$name failed: the input is in build-asan/fuzz/" >&2
      exit 1
    fi
    echo "fuzz_$name: $(grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$log" |
      tr '\n' ' ')$(ls "build-asan/fuzz/$name" | wc -l) inputs in the corpus"
  done
done
