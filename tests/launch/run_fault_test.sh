#!/usr/bin/env bash
# Fault tests of a job of 4 processes meeting at a coordinator, each a fault_worker stepping in
# lock-step (registered by tests/CMakeLists.txt as launch.fault_*):
#   run_fault_test.sh WORKER kill     process 2 gets SIGKILL mid-run
#   run_fault_test.sh WORKER stop     process 2 gets SIGSTOP (a hang: its connections stay open)
#   run_fault_test.sh WORKER absent   process 3 never starts
# Oracle: every survivor exits non-zero, naming process 2 (3), within JX_HEARTBEAT_TIMEOUT = 5 s
# (plus 3 s for a loaded machine) of the fault, its collective in flight failing with that name; the collectives' own deadline is 120 s, so only
# the heartbeats (or a closed connection) can explain an exit that quick. A process that never
# starts is named by the rendezvous, whose deadline (JX_COLLECTIVE_TIMEOUT) is 5 s here.
set -u
worker=$1 mode=$2
np=4 victim=2 timeout=5 slack=3
export JX_NUM_CPU_DEVICES=1 JX_NUM_PROCESSES=$np JX_HEARTBEAT_TIMEOUT=$timeout
export JX_COLLECTIVE_TIMEOUT=120
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/../mpi/run_gloo_test.lsan.supp"
[ "$mode" = absent ] && victim=3 && export JX_COLLECTIVE_TIMEOUT=$timeout
while :; do
  port=$((20000 + RANDOM % 30000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
export JX_COORDINATOR_ADDRESS=127.0.0.1:$port
dir=$(mktemp -d)
pids=()
cleanup() {
  kill -9 "${pids[@]}" "$watchdog" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
for ((p = np - 1; p >= 0; p--)); do
  [ "$mode" = absent ] && [ $p -eq $victim ] && continue
  JX_PROCESS_ID=$p "$worker" >"$dir/out.$p" 2>&1 &
  pids[$p]=$!
done
# a watchdog: no process outlives 90 s (a hang then shows as status 137)
(sleep 90 && kill -9 "${pids[@]}") >/dev/null 2>&1 &
watchdog=$!
fail() {
  for ((p = 0; p < np; p++)); do [ -f "$dir/out.$p" ] && tail -5 "$dir/out.$p" | sed "s/^/[p$p] /"; done
  echo "FAIL: $*"
  exit 1
}
if [ "$mode" != absent ]; then
  # every process past step 3: the job runs
  for ((i = 0; i < 600; i++)); do
    ready=0
    for ((p = 0; p < np; p++)); do grep -q "^step 3$" "$dir/out.$p" 2>/dev/null && ready=$((ready + 1)); done
    [ $ready -eq $np ] && break
    sleep 0.1
  done
  [ $ready -eq $np ] || fail "the job did not start within 60 s"
  if [ "$mode" = kill ]; then kill -9 "${pids[$victim]}"; else kill -STOP "${pids[$victim]}"; fi
fi
now() { date +%s.%N; }
start=$(now)
worst=0
for ((p = 0; p < np; p++)); do
  [ $p -eq $victim ] && continue
  wait "${pids[$p]}"
  status=$?
  took=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
  worst=$took
  [ "$status" -ne 0 ] && [ "$status" -ne 137 ] || fail "process $p exited $status (want non-zero, no hang)"
  grep -q "process $victim" "$dir/out.$p" || fail "process $p did not name process $victim"
  # the collective in flight failed at once, naming it (not at its 120 s deadline)
  [ "$mode" = absent ] || grep -q "^fault_worker (process $p): step .*process $victim" "$dir/out.$p" ||
    fail "process $p's collective did not fail naming process $victim"
  echo "process $p ended after ${took} s: $(grep -m1 "process $victim" "$dir/out.$p")"
done
awk -v w="$worst" -v t=$((timeout + slack)) 'BEGIN { exit !(w <= t) }' ||
  fail "the survivors took ${worst} s (want <= $timeout s + $slack s)"
echo "PASS: every survivor named process $victim within ${worst} s ($mode)"
