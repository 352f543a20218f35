#!/usr/bin/env bash
# The whole test suite: installs dependencies, checks formatting, builds with
# gcc and runs every test, then builds with clang under AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the suite again. Warnings are errors in
# both builds. Ends with CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror

CC=gcc cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJX_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
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
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E '^cuda\.|^unit\.test_cuda_kernels$'
