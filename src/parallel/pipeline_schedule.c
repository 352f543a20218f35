/* Pipeline schedule tables. Each stage has its list of actions in order
 * (GPipe: every forward, then every backward; 1F1B as PyTorch's
 * Schedule1F1B: min(M, S - s) forwards, then a backward and a forward in
 * turn, then the remaining backwards), and the last stage runs forward, loss
 * and backward of a microbatch as one action. The table is the lists played
 * out tick by tick: at each tick a stage takes its next action once its
 * input is there (activations sent at tick t arrive at t + 1, as does a
 * cotangent, except that the last stage's combined action takes two ticks, a
 * forward's and a backward's, so its cotangent counts from t + 2). Each
 * value that waits between ticks (an inbox's activations or cotangent, a
 * forward's residuals until its backward) gets a slot, the lowest free one,
 * so that the buffers are as small as the schedule allows. */
#include "pipeline_schedule.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"

typedef struct {
  int kind, microbatch;
} action;

/* Stage s's actions in order into list (2M entries, or M for the last stage); returns the count. */
static int stage_actions(jx_pipeline_schedule schedule, int S, int M, int s, action *list) {
  int n = 0;
  if (s == S - 1) {
    for (int i = 0; i < M; i++) list[n++] = (action){PIPE_FORWARD_BACKWARD, i};
    return n;
  }
  if (schedule == JX_PIPELINE_GPIPE) {
    for (int i = 0; i < M; i++) list[n++] = (action){PIPE_FORWARD, i};
    for (int i = 0; i < M; i++) list[n++] = (action){PIPE_BACKWARD, i};
    return n;
  }
  int warmup = M < S - s ? M : S - s, f = 0, b = 0;
  while (f < warmup) list[n++] = (action){PIPE_FORWARD, f++};
  while (b < M) {
    list[n++] = (action){PIPE_BACKWARD, b++};
    if (f < M) list[n++] = (action){PIPE_FORWARD, f++};
  }
  return n;
}

/* Gives each interval [from[i], to[i]] (i = 0..n-1, in order of from) the
 * lowest slot free by then; returns the number of slots used. */
static int assign_slots(int n, const int *from, const int *to, int *slot, int *free_from) {
  int used = 0;
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < used && free_from[k] > from[i]) k++;
    if (k == used) used++;
    slot[i] = k;
    free_from[k] = to[i] + 1;
  }
  return used;
}

/* The most intervals open at once. */
static int most_open(int n, const int *from, const int *to) {
  int most = 0;
  for (int i = 0; i < n; i++) {
    int open = 0;
    for (int j = 0; j < n; j++) open += from[j] <= from[i] && from[i] <= to[j];
    if (open > most) most = open;
  }
  return most;
}

void pipe_table_free(pipe_table *t) {
  if (!t) return;
  free(t->steps);
  free(t->stashed);
  memset(t, 0, sizeof *t);
}

jx_status pipe_table_build(jx_pipeline_schedule schedule, int S, int M, pipe_table *out) {
  memset(out, 0, sizeof *out);
  if (S < 1 || M < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pipeline: %d stages and %d microbatches; at least 1 of each is needed",
                        S, M);
  if (schedule == JX_PIPELINE_1F1B && M < S)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pipeline: 1F1B needs at least as many microbatches as stages (as "
                        "PyTorch's Schedule1F1B); got %d microbatches for %d stages",
                        M, S);
  if (schedule != JX_PIPELINE_GPIPE && schedule != JX_PIPELINE_1F1B)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "jx_pipeline: the schedule JX_PIPELINE_INTERLEAVED is not implemented yet "
                        "(JX_PIPELINE_GPIPE and JX_PIPELINE_1F1B are)");
  int cap = 4 * (M + S) + 4; /* ticks; a schedule takes at most 2 (M + S - 1) */
  size_t SM = (size_t)S * (size_t)M;
  action *lists = calloc(SM * 2, sizeof *lists);
  int *len = calloc((size_t)S, sizeof *len), *next = calloc((size_t)S, sizeof *next);
  int *busy_until = calloc((size_t)S, sizeof *busy_until);
  /* per (stage, microbatch): when its input / cotangent may be used, when it
   * arrives, and the ticks of its forward and backward */
  int *act_ready = malloc(SM * sizeof(int)), *cot_ready = malloc(SM * sizeof(int));
  int *act_arrive = calloc(SM, sizeof(int)), *cot_arrive = calloc(SM, sizeof(int));
  int *fwd_tick = calloc(SM, sizeof(int)), *bwd_tick = calloc(SM, sizeof(int));
  int *slot = calloc((size_t)M, sizeof(int)), *free_from = calloc((size_t)M + 1, sizeof(int));
  int *from = calloc((size_t)M, sizeof(int)), *to = calloc((size_t)M, sizeof(int));
  out->steps = malloc((size_t)cap * (size_t)S * sizeof *out->steps);
  out->stashed = calloc((size_t)S, sizeof *out->stashed);
  jx_status st = JX_OK;
  if (!lists || !len || !next || !busy_until || !act_ready || !cot_ready || !act_arrive ||
      !cot_arrive || !fwd_tick || !bwd_tick || !slot || !free_from || !from || !to || !out->steps ||
      !out->stashed) {
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    goto done;
  }
  out->nstages = S;
  out->microbatches = M;
  int remaining = 0;
  for (int s = 0; s < S; s++) {
    len[s] = stage_actions(schedule, S, M, s, lists + (size_t)s * 2 * M);
    remaining += len[s];
    for (int i = 0; i < M; i++) {
      act_ready[s * M + i] = s == 0 ? 0 : INT_MAX;
      cot_ready[s * M + i] = INT_MAX;
    }
  }
  for (size_t k = 0; k < (size_t)cap * (size_t)S; k++)
    out->steps[k] = (pipe_step){PIPE_IDLE, 0, -1, -1, -1, -1, -1};
  int t = 0;
  for (; remaining > 0; t++) {
    if (t >= cap) {
      st = jx_error_set(JX_ERR_INTERNAL, "jx_pipeline: the schedule does not end in %d ticks", cap);
      goto done;
    }
    for (int s = 0; s < S; s++) {
      if (t < busy_until[s] || next[s] == len[s]) continue;
      action a = lists[(size_t)s * 2 * M + next[s]];
      int k = s * M + a.microbatch;
      int ready = a.kind == PIPE_BACKWARD ? cot_ready[k] <= t : act_ready[k] <= t;
      if (!ready) continue;
      out->steps[t * S + s].kind = a.kind;
      out->steps[t * S + s].microbatch = a.microbatch;
      busy_until[s] = t + (a.kind == PIPE_FORWARD_BACKWARD ? 2 : 1);
      out->busy_ticks += busy_until[s] - t;
      next[s]++;
      remaining--;
      if (a.kind != PIPE_BACKWARD) fwd_tick[k] = t;
      if (a.kind != PIPE_FORWARD) bwd_tick[k] = t;
      if (a.kind == PIPE_FORWARD && s + 1 < S) act_ready[k + M] = act_arrive[k + M] = t + 1;
      if (a.kind != PIPE_FORWARD && s > 0) {
        cot_ready[k - M] = busy_until[s];
        cot_arrive[k - M] = t + 1;
      }
    }
  }
  out->nticks = 0;
  for (int s = 0; s < S; s++)
    if (busy_until[s] > out->nticks) out->nticks = busy_until[s];
  /* the slots, stage by stage; microbatches arrive and are stashed in order */
  for (int s = 0; s < S; s++) {
    if (s > 0) { /* the activations inbox: from arrival to the forward */
      for (int i = 0; i < M; i++) from[i] = act_arrive[s * M + i], to[i] = fwd_tick[s * M + i];
      int n = assign_slots(M, from, to, slot, free_from);
      if (n > out->act_slots) out->act_slots = n;
      for (int i = 0; i < M; i++) {
        out->steps[from[i] * S + s].recv_act_slot = slot[i];
        out->steps[to[i] * S + s].act_slot = slot[i];
      }
    }
    if (s < S - 1) { /* the cotangents inbox: from arrival to the backward */
      for (int i = 0; i < M; i++) from[i] = cot_arrive[s * M + i], to[i] = bwd_tick[s * M + i];
      int n = assign_slots(M, from, to, slot, free_from);
      if (n > out->cot_slots) out->cot_slots = n;
      for (int i = 0; i < M; i++) {
        out->steps[from[i] * S + s].recv_cot_slot = slot[i];
        out->steps[to[i] * S + s].cot_slot = slot[i];
      }
      /* the stash: from the forward to the backward */
      for (int i = 0; i < M; i++) from[i] = fwd_tick[s * M + i], to[i] = bwd_tick[s * M + i];
      int m = assign_slots(M, from, to, slot, free_from);
      if (m > out->stash_slots) out->stash_slots = m;
      out->stashed[s] = most_open(M, from, to);
      for (int i = 0; i < M; i++) {
        out->steps[from[i] * S + s].stash_slot = slot[i];
        out->steps[to[i] * S + s].stash_slot = slot[i];
      }
    }
  }
  /* unused slots name the spare one of their buffer */
  for (int k = 0; k < out->nticks * S; k++) {
    pipe_step *p = &out->steps[k];
    if (p->act_slot < 0) p->act_slot = out->act_slots;
    if (p->stash_slot < 0) p->stash_slot = out->stash_slots;
    if (p->cot_slot < 0) p->cot_slot = out->cot_slots;
    if (p->recv_act_slot < 0) p->recv_act_slot = out->act_slots;
    if (p->recv_cot_slot < 0) p->recv_cot_slot = out->cot_slots;
  }
done:
  free(lists);
  free(len);
  free(next);
  free(busy_until);
  free(act_ready);
  free(cot_ready);
  free(act_arrive);
  free(cot_arrive);
  free(fwd_tick);
  free(bwd_tick);
  free(slot);
  free(free_from);
  free(from);
  free(to);
  if (st) pipe_table_free(out);
  return st;
}
