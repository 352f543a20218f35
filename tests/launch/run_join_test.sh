#!/usr/bin/env bash
# A job of many small processes on one host through jx launch (registered by
# tests/CMakeLists.txt as launch.join_64): NP fault_workers join at the
# coordinator, meet in shared memory, step 3 times in lock-step and leave.
# Oracle: the launcher exits 0 and every process printed its third step.
#   run_join_test.sh JX_CLI WORKER NP
set -u
cli=$1 worker=$2 np=$3
export JX_NUM_CPU_DEVICES=1 JX_COLLECTIVE_TIMEOUT=120
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/../mpi/run_gloo_test.lsan.supp"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 300 "$cli" launch --nproc "$np" -- "$worker" 3 >"$out" 2>&1
status=$?
elapsed=$(($(date +%s) - start))
stepped=$(grep -c "^\[p[0-9]*\] step 3$" "$out")
if [ "$status" -ne 0 ] || [ "$stepped" -ne "$np" ]; then
  cat "$out"
  echo "FAIL: jx launch exited $status; $stepped of $np processes made their third step"
  exit 1
fi
echo "PASS: $np processes joined, stepped 3 times and left in ${elapsed} s"
