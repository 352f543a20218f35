#!/usr/bin/env bash
# Runs an MPI test program without mpirun: NP plain background processes that
# meet at an explicit coordinator (the Gloo plugin), as a user of
# jax.distributed.initialize(coordinator_address, num_processes, process_id)
# would start them (registered by tests/CMakeLists.txt).
#   run_gloo_test.sh NP TEST_EXE ok   every check passes on every process
#   run_gloo_test.sh NP TEST_EXE die  process 1 exits before a collective: process 0 must fail
#       with the deadline error naming process 1 within JX_COLLECTIVE_TIMEOUT (3 s) and exit
#       non-zero
#   run_gloo_test.sh NP TEST_EXE ok HOSTS  as ok, the processes split into HOSTS simulated hosts
#       (JX_HOST_ID: processes 0..NP/HOSTS-1 on the first, ...): shared memory within each, Gloo
#       between them
set -u
np=$1 exe=$2 mode=$3 hosts=${4:-1}
export JX_NUM_CPU_DEVICES=2 JX_NUM_PROCESSES=$np
# the sanitized build checks leaks here (no MPI library in the process), except the device
# table that device.c keeps on purpose
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/run_gloo_test.lsan.supp"
# a port nobody listens on (a connection to it is refused)
while :; do
  port=$((20000 + RANDOM % 30000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
export JX_COORDINATOR_ADDRESS=127.0.0.1:$port
if [ "$mode" = ok ]; then
  export JX_COLLECTIVE_TIMEOUT=120
  limit=300
else
  export JX_COLLECTIVE_TIMEOUT=3
  limit=60
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
pids=()
# process 0 starts last: the others wait for the coordinator
for ((p = np - 1; p >= 0; p--)); do
  host_id=()
  [ "$hosts" -gt 1 ] && host_id=(JX_HOST_ID=host$((p * hosts / np)))
  env "${host_id[@]}" JX_PROCESS_ID=$p timeout "$limit" "$exe" $([ "$mode" = die ] && echo die) \
    >"$dir/out.$p" 2>&1 &
  pids[$p]=$!
done
declare -a status
for ((p = 0; p < np; p++)); do
  wait "${pids[$p]}"
  status[$p]=$?
done
elapsed=$(($(date +%s) - start))
for ((p = 0; p < np; p++)); do
  sed "s/^/[$p] /" "$dir/out.$p"
  echo "exit status of process $p: ${status[$p]}"
done
if [ "$mode" = ok ]; then
  passed=$(cat "$dir"/out.* | grep -c "all checks passed")
  for ((p = 0; p < np; p++)); do
    if [ "${status[$p]}" -ne 0 ]; then
      echo "FAIL: process $p exited ${status[$p]}; $passed of $np processes passed"
      exit 1
    fi
  done
  if [ "$passed" -ne "$np" ]; then
    echo "FAIL: $passed of $np processes passed"
    exit 1
  fi
  echo "PASS: $np processes on $hosts host(s); ${elapsed} s"
  exit 0
fi
if ! grep -q "process 0: the collective failed: status .*process 1 did not arrive within 3 s" \
  "$dir/out.0"; then
  echo "FAIL: process 0 did not report the deadline error naming process 1"
  exit 1
fi
if [ "${status[0]}" -eq 0 ] || [ "${status[0]}" -eq 124 ]; then
  echo "FAIL: process 0 exited with status ${status[0]} (want non-zero, not a hang)"
  exit 1
fi
if [ "$elapsed" -gt 30 ]; then
  echo "FAIL: took ${elapsed} s"
  exit 1
fi
echo "PASS: process 0 failed within the deadline naming process 1 and exited ${status[0]}; ${elapsed} s"
