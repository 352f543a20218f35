#!/usr/bin/env bash
# `jx train` and `jx info` under mpirun (registered by tests/CMakeLists.txt as mpi.train_np2):
#   run_mpi_train.sh MPIRUN JX PLUGIN CORPUS
# Oracle: one process with 4 devices, `jx train --devices 4 --mesh data=2,model=2`. Checks:
#   - 2 processes x 2 devices on the same mesh give the same losses (--metrics, written by
#     process 0 only), and only process 0 prints;
#   - stopped at step 3 with a checkpoint and resumed, still under mpirun: the same losses;
#   - a mesh that does not cover the job's devices fails on every process, naming the
#     counts, and mpirun exits non-zero without hanging;
#   - `jx info` lists both processes and the MPI plugin.
set -u
mpirun=$1 jx=$2 plugin=$3 corpus=$4
export JX_MPI_PLUGIN=$plugin JX_COLLECTIVE_TIMEOUT=120
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # see run_mpi_test.sh
unset JX_NUM_CPU_DEVICES
steps=6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flags=(--layers 1 --width 32 --heads 2 --context 16 --batch 8 --steps "$steps" --data "$corpus"
  --mesh data=2,model=2)
np2=(timeout 300 "$mpirun" -np 2 --oversubscribe --bind-to none "$jx")
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# losses a.jsonl b.jsonl: every step 1..$steps in both, equal to a relative 2e-5
same_losses() {
  awk -v steps="$steps" -F'[:,]' '
    FNR == 1 { file++ }
    { step = $2 + 0; loss[file, step] = $4 + 0; seen[file, step] = 1 }
    END {
      bad = 0
      for (s = 1; s <= steps; s++) {
        if (!seen[1, s] || !seen[2, s]) { print "step " s " missing"; bad = 1; continue }
        d = loss[1, s] - loss[2, s]; if (d < 0) d = -d
        m = loss[1, s]; if (m < 0) m = -m
        printf "step %d: %.6f vs %.6f\n", s, loss[1, s], loss[2, s]
        if (d > 2e-5 * m) { print "  differ"; bad = 1 }
      }
      exit bad
    }' "$1" "$2"
}

"$jx" train --devices 4 "${flags[@]}" --sample 0 --metrics "$dir/one.jsonl" >"$dir/one.log" 2>&1 ||
  { cat "$dir/one.log"; fail "the one-process run failed"; }

"${np2[@]}" train --devices 2 "${flags[@]}" --sample 16 --metrics "$dir/two.jsonl" \
  >"$dir/two.log" 2>&1
rc=$?
cat "$dir/two.log"
[ $rc -eq 0 ] || fail "mpirun -np 2 jx train exited $rc"
same_losses "$dir/one.jsonl" "$dir/two.jsonl" || fail "2 processes' losses differ from 1 process's"
[ "$(grep -c '^loss .* -> ' "$dir/two.log")" -eq 1 ] || fail "not exactly one process printed"
[ "$(grep -c '^sample:$' "$dir/two.log")" -eq 1 ] || fail "not exactly one sample"
grep -q "4 device(s) (2 processes x 2)" "$dir/two.log" || fail "the banner does not count processes"

# stopped at step 3 (checkpoint) and resumed: steps 4.. appended to the same metrics
"${np2[@]}" train --devices 2 "${flags[@]}" --sample 0 --stop-at 3 --ckpt "$dir/ck" \
  --metrics "$dir/resumed.jsonl" >"$dir/part.log" 2>&1 &&
  "${np2[@]}" train --devices 2 "${flags[@]}" --sample 0 --resume --ckpt "$dir/ck" \
    --metrics "$dir/resumed.jsonl" >>"$dir/part.log" 2>&1
rc=$?
cat "$dir/part.log"
[ $rc -eq 0 ] || fail "stop at 3 and resume under mpirun exited $rc"
same_losses "$dir/one.jsonl" "$dir/resumed.jsonl" || fail "the resumed run's losses differ"

# a mesh of 8 devices in a job of 4: every process says so; mpirun exits non-zero, quickly
start=$(date +%s)
"${np2[@]}" train --devices 2 --mesh data=4,model=2 --steps 2 --sample 0 --data "$corpus" \
  >"$dir/bad.log" 2>&1
rc=$?
cat "$dir/bad.log"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a mismatched mesh: mpirun exited $rc (want non-zero, no hang)"
for p in 0 1; do
  grep -q "process $p of 2): --mesh: .*has 8 devices but the job has 4" "$dir/bad.log" ||
    fail "process $p did not report the mismatched mesh"
done
[ $(($(date +%s) - start)) -lt 60 ] || fail "the mismatched mesh took over 60 s"

JX_NUM_CPU_DEVICES=2 "${np2[@]}" info >"$dir/info.log" 2>&1 || fail "mpirun -np 2 jx info failed"
cat "$dir/info.log"
grep -q "^processes: 2" "$dir/info.log" && grep -q "process 1 on .*: devices 2..3" "$dir/info.log" &&
  grep -q "devices: 4 (cpu) in all, 2 per process" "$dir/info.log" &&
  grep -q "multi-process (MPI): plugin loadable" "$dir/info.log" ||
  fail "jx info does not list the processes, devices and plugin"

[ $failed -eq 0 ] && echo "PASS: jx train and jx info on 2 processes"
exit $failed
