#!/usr/bin/env bash
# Runs tests/mpi/test_mpi.c under mpirun (registered by tests/CMakeLists.txt).
#   run_mpi_test.sh MPIRUN NP TEST_EXE PLUGIN ok   every check passes on every process
#   run_mpi_test.sh MPIRUN NP TEST_EXE PLUGIN die  process 1 exits before a collective: process 0
#       must fail with the deadline error naming process 1 within JX_COLLECTIVE_TIMEOUT (3 s),
#       and mpirun must exit non-zero
set -u
mpirun=$1 np=$2 exe=$3 plugin=$4 mode=$5
export JX_NUM_CPU_DEVICES=2 JX_MPI_PLUGIN=$plugin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
# Open MPI keeps allocations of its own (and of components it unloads) until
# exit, which LeakSanitizer reports as leaks that are not jx's: under the
# sanitized build the MPI runs check memory errors but not leaks (every other
# test checks jx's leaks)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
args=(-np "$np" --oversubscribe --bind-to none)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if [ "$mode" = ok ]; then
  export JX_COLLECTIVE_TIMEOUT=120
  timeout 600 "$mpirun" "${args[@]}" "$exe" >"$out" 2>&1
  rc=$?
  cat "$out"
  passed=$(grep -c "all checks passed" "$out")
  if [ $rc -ne 0 ] || [ "$passed" -ne "$np" ]; then
    echo "FAIL: mpirun exited $rc; $passed of $np processes passed"
    exit 1
  fi
  echo "PASS: $np processes"
  exit 0
fi
# die: mpirun's default is to kill every process as soon as one exits without MPI_Finalize;
# orte_enable_recovery keeps the survivors running, so they meet their deadline. In that mode
# Open MPI 4.1's mpirun itself exits 0 whatever the processes do, so each process's exit
# status is recorded by a shell around it and checked here.
export JX_COLLECTIVE_TIMEOUT=3
start=$(date +%s)
timeout 120 "$mpirun" "${args[@]}" --mca orte_enable_recovery 1 \
  sh -c '"$0" die; echo "exit status of process $OMPI_COMM_WORLD_RANK: $?"' "$exe" >"$out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
cat "$out"
if [ $rc -eq 124 ]; then
  echo "FAIL: mpirun hung (killed after 120 s)"
  exit 1
fi
if ! grep -q "process 0: the collective failed: status .*process 1 did not arrive within 3 s" "$out"; then
  echo "FAIL: process 0 did not report the deadline error naming process 1"
  exit 1
fi
st=$(sed -n 's/^exit status of process 0: //p' "$out")
if [ -z "$st" ] || [ "$st" -eq 0 ]; then
  echo "FAIL: process 0 exited with status '${st}' (want non-zero)"
  exit 1
fi
if [ "$elapsed" -gt 60 ]; then
  echo "FAIL: took ${elapsed} s"
  exit 1
fi
echo "PASS: process 0 failed within the deadline naming process 1 and exited $st; ${elapsed} s"
