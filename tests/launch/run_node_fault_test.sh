#!/usr/bin/env bash
# A node's launcher lost, with two launchers of 2 processes each on this machine (jx launch
# --nnodes 2, one --coordinator; registered by tests/CMakeLists.txt as launch.node_*):
#   run_node_fault_test.sh JX WORKER node0   node 0's launcher (the rendezvous; its process 0
#       serves the job's store) gets SIGKILL mid-run
#   run_node_fault_test.sh JX WORKER node1   node 1's launcher gets SIGKILL mid-run
#   run_node_fault_test.sh JX WORKER node0_hang   node 0's launcher and processes get SIGSTOP
#       (its host hangs or is cut off: no connection closes)
#   run_node_fault_test.sh JX WORKER node1_hang   node 1's launcher and processes get SIGSTOP
# Oracle: within JX_HEARTBEAT_TIMEOUT = 5 s (plus 3 s for a loaded machine) the other node's
# launcher exits non-zero naming the lost node (node1_hang: its processes name a process of
# node 1, whose heartbeats stopped, and their launcher ends the job), and no process of the job
# is left (the lost launcher's die with it, the other node's are stopped; *_hang: the other
# node's); the collectives' deadline is 120 s.
set -u
jx=$1 worker=$2 mode=$3
timeout=5 slack=3
export JX_NUM_CPU_DEVICES=1 JX_HEARTBEAT_TIMEOUT=$timeout JX_COLLECTIVE_TIMEOUT=120
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/../mpi/run_gloo_test.lsan.supp"
unset JX_COORDINATOR_ADDRESS JX_NUM_PROCESSES JX_PROCESS_ID
case $mode in
node0 | node0_hang) victim=0 survivor=1 ;;
node1 | node1_hang) victim=1 survivor=0 ;;
*) echo "unknown mode $mode" && exit 2 ;;
esac
# a port nobody listens on, and the one after it (the job's)
while :; do
  port=$((20000 + RANDOM % 30000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null || break
done
dir=$(mktemp -d)
launcher=()
cleanup() {
  kill -9 "${launcher[@]}" $(cat "$dir"/pid.* 2>/dev/null) 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
# each process writes its pid, then becomes the worker
script='echo $$ >"$0/pid.$JX_PROCESS_ID"; exec "$@"'
for r in 1 0; do
  "$jx" launch --nproc 2 --nnodes 2 --node-rank $r --coordinator 127.0.0.1:$port --stop-grace 2 \
    -- sh -c "$script" "$dir" "$worker" >"$dir/node.$r.log" 2>&1 &
  launcher[$r]=$!
done
fail() {
  for r in 0 1; do sed "s/^/  [node $r] /" "$dir/node.$r.log" | grep -v "\] step [0-9]*$" | tail -8; done
  echo "FAIL: $*"
  exit 1
}
# every process past step 3: the job runs
for ((i = 0; i < 600; i++)); do
  ready=0
  for p in 0 1 2 3; do grep -q "^\[p$p\] step 3$" "$dir"/node.*.log 2>/dev/null && ready=$((ready + 1)); done
  [ $ready -eq 4 ] && break
  sleep 0.1
done
[ $ready -eq 4 ] || fail "the job did not start within 60 s"
now() { date +%s.%N; }
if [ "$mode" = node${victim}_hang ]; then
  kill -STOP "${launcher[$victim]}" "$(cat "$dir/pid.$((2 * victim))")" "$(cat "$dir/pid.$((2 * victim + 1))")"
else
  kill -9 "${launcher[$victim]}"
fi
start=$(now)
# a watchdog: the survivor's launcher does not outlive 60 s (a hang then shows as status 137)
# (without the cleanup: a subshell ended by a signal runs the EXIT trap it inherited)
(trap - EXIT && sleep 60 && kill -9 "${launcher[$survivor]}") >/dev/null 2>&1 &
watchdog=$!
wait "${launcher[$survivor]}"
status=$?
kill "$watchdog" 2>/dev/null
took=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
[ "$status" -ne 0 ] && [ "$status" -ne 137 ] || fail "node $survivor's launcher exited $status (want non-zero, no hang)"
if [ "$mode" = node1_hang ]; then
  says=$(grep -m1 "^\[p[01]\] .*process [23] was lost" "$dir/node.0.log") ||
    fail "node 0's processes did not name a process of node 1"
else
  says=$(grep -m1 "jx launch: the job failed: .*node $victim" "$dir/node.$survivor.log") ||
    fail "node $survivor's launcher did not name node $victim"
fi
echo "node $survivor's launcher ended after $took s: $says"
# no process of the job is left (a process killed by its launcher's death may take a moment)
for ((i = 0; i < 20; i++)); do
  left=""
  for p in 0 1 2 3; do
    [ "$mode" = node${victim}_hang ] && [ $((p / 2)) = "$victim" ] && continue # stopped, not gone
    pid=$(cat "$dir/pid.$p")
    kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] && left="$left $p"
  done
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "processes$left are still running"
took=$(awk -v a="$(now)" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
awk -v w="$took" -v t=$((timeout + slack)) 'BEGIN { exit !(w <= t) }' ||
  fail "the job took ${took} s to end (want <= $timeout s + $slack s)"
echo "PASS: node $victim lost ($mode): the job ended within $took s, naming it"
