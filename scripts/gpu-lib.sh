# shellcheck shell=bash disable=SC2154 # deadline, logs and summary are the sourcing script's
# Shared by scripts/gpu-check.sh and scripts/gpu-smoke.sh (sourced, not run):
# steps with a time limit under the run's deadline, and the benches' JSON
# fields. The sourcing script sets deadline (epoch seconds), logs (a folder)
# and the array summary.

step() { # step NAME SECONDS COMMAND...: runs with a time limit into its log, records the outcome
  local name=$1 limit=$2 t0 rc
  shift 2
  local log="$logs/${name//[^A-Za-z0-9_.-]/_}.log"
  local left=$((deadline - $(date +%s)))
  echo "=== $name"
  if ((left < 10)); then
    echo "no time left (the run's deadline has passed)"
    summary+=("SKIPPED $name (no time left)")
    return 1
  fi
  ((limit > left)) && limit=$left
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0))
  if ((rc == 0)); then
    tail -n "${STEP_SHOW:-6}" "$log"
    summary+=("ok      $name (${took}s)")
  else
    if ((rc == 124 || rc == 137)); then
      summary+=("TIMEOUT $name (over ${limit}s)")
    else
      summary+=("FAILED  $name (exit $rc, ${took}s)")
    fi
    echo "--- $name: exit $rc after ${took}s; the last lines of $log:"
    tail -n "${STEP_FAIL_SHOW:-40}" "$log"
  fi
  return $rc
}

# field FILE IMPL KEY: KEY's value in FILE's JSON line of IMPL (numbers and
# strings, written by the benches as "key":value or "key": value)
field() {
  grep -h "\"impl\": *\"$2\"" "$1" 2>/dev/null | head -1 |
    sed -n "s/.*\"$3\": *\"\{0,1\}\([^\",}]*\).*/\1/p"
}
skipped() { # skipped FILE IMPL: the reason a bench gave for skipping, if it did
  grep -h "\"impl\": *\"$2\"" "$1" 2>/dev/null | grep '"skipped"' | head -1 |
    sed -n 's/.*"skipped": *"\(.*\)"}.*/\1/p'
}

gemm_line() { # gemm_line LOG: bench_cuda_gemm's figures and the target, or why there are none
  local ratio
  ratio=$(sed -n 's/.*"jx_over_cublaslt":\([0-9.]*\).*/\1/p' "$1" 2>/dev/null | head -1)
  if [[ -n $ratio ]]; then
    echo "  bf16 GEMM 4096^3: jx $(field "$1" jx tflop_per_s) TFLOP/s, cuBLASLt" \
      "$(field "$1" cublaslt tflop_per_s) TFLOP/s: jx/cuBLASLt $ratio" \
      "(target >= 0.85: $(awk -v r="$ratio" 'BEGIN { print (r >= 0.85 ? "met" : "NOT met") }'))"
  else
    echo "  bf16 GEMM: no result ($(grep -m1 -E 'skipped|error|wrong|failed' "$1" 2>/dev/null ||
      echo 'see its log'))"
  fi
}

gpt_line() { # gpt_line LOG IMPL NAME: a GPT bench's tokens/s and MFU, or why there are none
  local why
  why=$(skipped "$1" "$2")
  if [[ -n $why ]]; then
    echo "  GPT step, $3: skipped: $why"
  elif [[ -n $(field "$1" "$2" tokens_per_s) ]]; then
    echo "  GPT step, $3: $(field "$1" "$2" layers) layers, d $(field "$1" "$2" d), context" \
      "$(field "$1" "$2" ctx), vocab $(field "$1" "$2" vocab), batch $(field "$1" "$2" batch):" \
      "$(field "$1" "$2" median_ms) ms/step, $(field "$1" "$2" tokens_per_s) tokens/s," \
      "$(field "$1" "$2" tflop_per_s) TFLOP/s, MFU $(awk -v m="$(field "$1" "$2" mfu)" \
        'BEGIN { printf "%.1f %%", 100 * m }') of $(field "$1" "$2" peak_tflops) TFLOP/s" \
      "(first call $(field "$1" "$2" first_call_s) s; loss $(field "$1" "$2" loss_first) ->" \
      "$(field "$1" "$2" loss_last))"
    [[ -n $(field "$1" "$2" step_copied_up_mb) ]] &&
      echo "    a step copied $(field "$1" "$2" step_copied_up_mb) MB to the device and" \
        "$(field "$1" "$2" step_copied_down_mb) MB back"
  else # it failed: its error, or the last thing it said
    why=$(grep -E -i 'error|wrong|not finite|fail' "$1" 2>/dev/null | tail -n 2)
    echo "  GPT step, $3: no result: ${why:-$(tail -n 1 "$1" 2>/dev/null)}"
  fi
  return 0
}

summary_status() { # 0 when every step in summary passed
  local line
  for line in "${summary[@]}"; do
    [[ $line == ok* ]] || return 1
  done
  return 0
}
