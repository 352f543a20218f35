#!/usr/bin/env bash
# Runs tests/mpi/test_mpi_io.c (registered by tests/CMakeLists.txt as mpi.io_np2):
#   run_mpi_io_test.sh MPIRUN TEST_EXE PLUGIN
# saves and restores a checkpoint with 2 processes of 2 CPU devices each, then
# restores the same checkpoint in 1 process of 2 devices; every process must
# print "all checks passed".
set -u
mpirun=$1 exe=$2 plugin=$3
export JX_NUM_CPU_DEVICES=2 JX_MPI_PLUGIN=$plugin JX_COLLECTIVE_TIMEOUT=120
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI's own allocations are reported as leaks (see run_mpi_test.sh)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
dir=$(mktemp -d "${TMPDIR:-/tmp}/jx-mpi-io-XXXXXX")
out=$(mktemp)
trap 'rm -rf "$dir" "$out"' EXIT
run() { # np mode
  timeout 300 "$mpirun" -np "$1" --oversubscribe --bind-to none "$exe" "$2" "$dir/ckpt" >"$out" 2>&1
  local rc=$?
  cat "$out"
  local passed
  passed=$(grep -c "all checks passed" "$out")
  if [ $rc -ne 0 ] || [ "$passed" -ne "$1" ]; then
    echo "FAIL ($2 with $1 processes): mpirun exited $rc; $passed of $1 processes passed"
    exit 1
  fi
}
run 2 save
run 1 load
echo "PASS: saved by 2 processes, restored by 2 and by 1"
