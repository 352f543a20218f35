#!/usr/bin/env bash
# `jx train` started by `jx launch` and by a simulated srun (registered by tests/CMakeLists.txt):
#   run_launch_train.sh JX CORPUS equivalence   1 process x 4 devices (the oracle) = 2 x 2 through
#       jx launch = 4 x 1 through jx launch = 2 x 2 started with srun's variables (no MPI, no
#       jx launch): the same losses, bit for bit (as printed); jx info under jx launch lists
#       both processes
#   run_launch_train.sh JX CORPUS restart       jx launch --max-restarts 1: attempt 0 stops at step
#       3 (checkpoint) and then process 1 is killed; the restart resumes and steps 4..6 give the
#       oracle's losses; --keep 1 leaves the last step only, and a crashed save's leftover
#       directory is gone after the next save
#   run_launch_train.sh JX CORPUS elastic       4 launchers (--nnodes 3:4); after step 3 node 3's
#       launcher is killed (its host gone): the job goes on with 3 processes from the checkpoint
#       (re-sharded) and finishes
#   run_launch_train.sh JX CORPUS hosts         2 hosts made of network namespaces joined by a
#       veth pair (each with its own address, host name and /dev/shm: jx sees two hosts), a
#       launcher of 2 processes x 1 device in each (--nnodes 2, --coordinator at host 0's
#       address): the oracle's losses bit for bit, and jx info there lists the processes on
#       both hosts. Needs root and ip(8) (iproute2); exits 77 (CTest's SKIP) saying why where
#       namespaces cannot be made
set -u
jx=$1 corpus=$2 mode=$3
export JX_COLLECTIVE_TIMEOUT=120 JX_HEARTBEAT_TIMEOUT=10
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(dirname "$0")/../mpi/run_gloo_test.lsan.supp"
unset JX_NUM_CPU_DEVICES JX_COORDINATOR_ADDRESS JX_NUM_PROCESSES JX_PROCESS_ID
steps=6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=(--layers 1 --width 32 --heads 2 --context 16 --steps "$steps" --data "$corpus" --sample 0)
flags=("${model[@]}" --batch 8 --mesh data=2,model=2)
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}
# a port nobody listens on, from lo .. lo+span-1
free_port() {
  while :; do
    port=$(($1 + RANDOM % $2))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
  done
  echo "$port"
}
# losses A B: the last line of every step 1..$steps in B (a restart writes steps again) has A's loss
same_losses() {
  awk -v steps="$steps" -F'[:,]' '
    FNR == 1 { file++ }
    { loss[file, $2 + 0] = $4 }
    END {
      bad = 0
      for (s = 1; s <= steps; s++) {
        printf "step %d: %s vs %s\n", s, loss[1, s], loss[2, s]
        if (loss[1, s] == "" || loss[1, s] != loss[2, s]) { print "  differ"; bad = 1 }
      }
      exit bad
    }' "$1" "$2"
}
run() { # run LOG CMD...: the command (at most 240 s), its output kept in LOG and shown
  timeout 240 "${@:2}" >"$dir/$1" 2>&1
  local rc=$?
  sed "s/^/  /" "$dir/$1"
  return $rc
}

skip() {
  echo "SKIP: $*"
  exit 77
}
if [ "$mode" = hosts ]; then # before the oracle: a skip costs nothing
  [ "$(id -u)" = 0 ] || skip "making network namespaces needs root"
  command -v ip >/dev/null || skip "ip(8) is not installed (iproute2: scripts/install-deps.sh)"
  command -v unshare >/dev/null || skip "unshare(1) is not installed (util-linux)"
  ns=(jxh0.$$ jxh1.$$) veth=(jxv0.$$ jxv1.$$) addr=(10.231.0.1 10.231.0.2)
  trap 'ip netns del "${ns[0]}" 2>/dev/null; ip netns del "${ns[1]}" 2>/dev/null; rm -rf "$dir"' EXIT
  why=$(ip netns add "${ns[0]}" 2>&1 && ip netns add "${ns[1]}" 2>&1) ||
    skip "cannot make a network namespace: $why"
  # the pair's ends, one in each namespace (deleting a namespace deletes its end and the pair)
  why=$(ip link add "${veth[0]}" type veth peer name "${veth[1]}" 2>&1) ||
    skip "cannot make a veth pair: $why"
  for h in 0 1; do
    ip link set "${veth[$h]}" netns "${ns[$h]}" &&
      ip -n "${ns[$h]}" addr add "${addr[$h]}/24" dev "${veth[$h]}" &&
      ip -n "${ns[$h]}" link set "${veth[$h]}" up && ip -n "${ns[$h]}" link set lo up ||
      skip "cannot set up host $h's network"
  done
  # host H: its namespace, with a host name and a /dev/shm of its own
  on_host() {
    local h=$1
    shift
    ip netns exec "${ns[$h]}" unshare --uts --mount sh -c \
      'hostname "$0" && mount -t tmpfs jxshm /dev/shm && exec "$@"' "host$h" "$@"
  }
  on_host 0 true || skip "cannot give a namespace its own host name and /dev/shm"
fi

"$jx" train --devices 4 "${flags[@]}" --metrics "$dir/one.jsonl" >"$dir/one.log" 2>&1 ||
  { cat "$dir/one.log"; fail "the one-process run failed"; }

if [ "$mode" = equivalence ]; then
  run two.log "$jx" launch --nproc 2 -- "$jx" train --devices 2 "${flags[@]}" \
    --metrics "$dir/two.jsonl" || fail "jx launch --nproc 2 exited $?"
  grep -q "^\[p0\]   4 device(s) (2 processes x 2)" "$dir/two.log" || fail "no banner of 2 x 2"
  same_losses "$dir/one.jsonl" "$dir/two.jsonl" || fail "2 x 2 through jx launch differs"

  run four.log "$jx" launch --nproc 4 -- "$jx" train --devices 1 "${flags[@]}" \
    --metrics "$dir/four.jsonl" || fail "jx launch --nproc 4 exited $?"
  same_losses "$dir/one.jsonl" "$dir/four.jsonl" || fail "4 x 1 through jx launch differs"

  # srun --ntasks 2 without MPI: its variables only; process 0 serves on the node list's first
  # host at 61440 + SLURM_JOB_ID mod 4096
  port=$(free_port 61440 4096)
  for p in 1 0; do
    SLURM_PROCID=$p SLURM_LOCALID=$p SLURM_NTASKS=2 SLURM_NODEID=0 SLURM_STEP_NODELIST=localhost \
      SLURM_STEP_TASKS_PER_NODE=2 SLURM_JOB_ID=$((port - 61440 + 4096 * 7)) \
      timeout 240 "$jx" train --devices 2 "${flags[@]}" --metrics "$dir/slurm.jsonl" \
      >"$dir/slurm.$p.log" 2>&1 &
    pid[$p]=$!
  done
  for p in 0 1; do
    wait "${pid[$p]}" || { sed "s/^/  [srun $p] /" "$dir/slurm.$p.log"; fail "srun process $p failed"; }
  done
  sed "s/^/  [srun 0] /" "$dir/slurm.0.log"
  same_losses "$dir/one.jsonl" "$dir/slurm.jsonl" || fail "2 x 2 under srun differs"

  # jx info joins the job jx launch started and lists both processes
  JX_NUM_CPU_DEVICES=2 run info.log "$jx" launch --nproc 2 -- "$jx" info || fail "jx info: $?"
  grep -q "^\[p0\] processes: 2, launcher: JX_COORDINATOR_ADDRESS (coordinator 127.0.0.1:" \
    "$dir/info.log" && grep -q "^\[p0\]   process 1 on .*: devices 2..3" "$dir/info.log" ||
    fail "jx info under jx launch does not list the 2 processes"
fi

if [ "$mode" = restart ]; then
  # attempt 0: to step 3 (its checkpoint), then process 1 dies; attempt 1 resumes
  script='if [ "$JX_RESTART_COUNT" = 0 ]; then
            "$0" "$@" --stop-at 3 || exit 1
            [ "$JX_PROCESS_ID" = 1 ] && kill -9 $$
            exec sleep 100
          fi
          exec "$0" "$@"'
  mkdir -p "$dir/ck/.step_00000001.tmp.4242" # a save that crashed
  run restart.log "$jx" launch --nproc 2 --max-restarts 1 --stop-grace 2 -- sh -c "$script" \
    "$jx" train --devices 2 "${flags[@]}" --ckpt "$dir/ck" --keep 1 --resume \
    --metrics "$dir/restart.jsonl" || fail "jx launch --max-restarts 1 exited $?"
  [ "$(cd "$dir/ck" && echo * .step*)" = "step_00000006 .step*" ] ||
    fail "--keep 1 left $(ls -A "$dir/ck" | tr '\n' ' ')"
  grep -q "process 1 (pid [0-9]*) was killed by signal 9" "$dir/restart.log" &&
    grep -q "restart 1 of 1" "$dir/restart.log" && grep -q "^\[p0\] resumed from step 3" "$dir/restart.log" ||
    fail "no restart from step 3"
  same_losses "$dir/one.jsonl" "$dir/restart.jsonl" || fail "the restarted job's losses differ"
fi

if [ "$mode" = elastic ]; then
  # 4 nodes of one process each; after step 3 node 3's launcher is killed (its process with it)
  port=$(free_port 20000 30000)
  script='if [ "$JX_RESTART_COUNT" = 0 ]; then
            "$0" "$@" --stop-at 3 || exit 1
            [ "$JX_PROCESS_ID" = 3 ] && kill -9 $PPID
            exec sleep 100
          fi
          exec "$0" "$@"'
  for r in 3 2 1 0; do
    timeout 240 "$jx" launch --nproc 1 --nnodes 3:4 --node-rank $r --coordinator 127.0.0.1:$port \
      --max-restarts 1 --join-settle 2 --stop-grace 2 -- sh -c "$script" \
      "$jx" train --devices 1 "${model[@]}" --batch 12 --ckpt "$dir/ck" --resume \
      --metrics "$dir/elastic.jsonl" >"$dir/node.$r.log" 2>&1 &
    pid[$r]=$!
  done
  for r in 0 1 2; do
    wait "${pid[$r]}" || fail "node $r's launcher exited $?"
    sed "s/^/  [node $r] /" "$dir/node.$r.log"
  done
  wait "${pid[3]}" 2>/dev/null
  grep -q "attempt 1: node 0 of 3, processes 0..0 of 3" "$dir/node.0.log" &&
    grep -q "^\[p0\] resumed from step 3" "$dir/node.0.log" ||
    fail "the job did not go on with 3 processes from step 3"
  [ "$(grep -c '"step"' "$dir/elastic.jsonl")" -ge "$steps" ] &&
    grep -q "\"step\": $steps," "$dir/elastic.jsonl" || fail "the 3 processes did not finish"
fi

if [ "$mode" = hosts ]; then
  # host 0 serves the nodes' rendezvous at its address; its process 0 the job's store at the
  # next port; each host's 2 processes meet in its shared memory, the hosts over Gloo
  launch_on() { # launch_on HOST LOG PROGRAM ARGS...: a launcher of 2 processes on host HOST
    local h=$1 log=$2
    shift 2
    on_host "$h" timeout 240 "$jx" launch --nproc 2 --nnodes 2 --node-rank "$h" --coordinator "${addr[0]}:29400" \
      -- "$@" >"$dir/$log.$h.log" 2>&1
  }
  for h in 1 0; do
    launch_on $h hosts "$jx" train --devices 1 "${flags[@]}" --metrics "$dir/hosts.jsonl" &
    pid[$h]=$!
  done
  for h in 0 1; do
    wait "${pid[$h]}" || fail "host $h's launcher exited $?"
    sed "s/^/  [host $h] /" "$dir/hosts.$h.log"
  done
  grep -q "^\[p0\]   4 device(s) (4 processes x 1)" "$dir/hosts.0.log" || fail "no banner of 4 x 1"
  same_losses "$dir/one.jsonl" "$dir/hosts.jsonl" || fail "4 x 1 on two hosts differs"
  # jx info lists the processes on their hosts
  for h in 1 0; do
    JX_NUM_CPU_DEVICES=1 launch_on $h info "$jx" info &
    pid[$h]=$!
  done
  for h in 0 1; do wait "${pid[$h]}" || fail "jx info: host $h's launcher exited $?"; done
  sed "s/^/  [host 0] /" "$dir/info.0.log"
  grep -q "^\[p0\]   process 1 on host0: devices 1..1" "$dir/info.0.log" &&
    grep -q "^\[p0\]   process 2 on host1: devices 2..2" "$dir/info.0.log" ||
    fail "jx info does not list the processes on two hosts"
fi

[ $failed -eq 0 ] && echo "PASS: jx train through jx launch ($mode)"
exit $failed
