/* Pipeline schedule tables. Each device has its list of actions in order
 * (GPipe: every forward, then every backward; 1F1B as PyTorch's
 * Schedule1F1B: min(M, S - s) forwards, then a backward and a forward in
 * turn, then the remaining backwards; interleaved 1F1B as Megatron's, over
 * the device's V chunks, global stage g = chunk S + device), and the last
 * stage runs forward, loss and backward of a microbatch as one action. The
 * table is the lists played out tick by tick: at each tick a device takes
 * its next action once its input is there (activations sent at tick t
 * arrive at t + 1, as does a cotangent, except that the last stage's
 * combined action takes two ticks, a forward's and a backward's, so its
 * cotangent counts from t + 2). Each value that waits between ticks (an
 * inbox's activations or cotangent, a forward's residuals until its
 * backward) gets a slot of its device's buffer, the lowest free one, so
 * that the buffers are as small as the schedule allows. */
#include "pipeline_schedule.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"

typedef struct {
  int kind, microbatch, chunk;
} action;

/* Device d's actions in order into list (at most 2 M V entries); returns
 * the count. Global stage g = chunk S + d; the last one's forward is its
 * FORWARD_BACKWARD and it has no BACKWARD of its own. */
static int device_actions(jx_pipeline_schedule schedule, int S, int V, int M, int d, int lag,
                          action *list) {
  int n = 0, G = S * V;
  if (schedule != JX_PIPELINE_INTERLEAVED) { /* one chunk: device d is stage d */
    if (d == S - 1) {
      for (int i = 0; i < M; i++) list[n++] = (action){PIPE_FORWARD_BACKWARD, i, 0};
      return n;
    }
    if (schedule == JX_PIPELINE_GPIPE) {
      for (int i = 0; i < M; i++) list[n++] = (action){PIPE_FORWARD, i, 0};
      for (int i = 0; i < M; i++) list[n++] = (action){PIPE_BACKWARD, i, 0};
      return n;
    }
    /* with a lag a microbatch's round trip to the last stage and back takes
     * longer: more forwards go ahead to keep the steady state busy */
    int ahead = (S - d) * (1 + lag) - lag, warmup = M < ahead ? M : ahead, f = 0, b = 0;
    while (f < warmup) list[n++] = (action){PIPE_FORWARD, f++, 0};
    while (b < M) {
      list[n++] = (action){PIPE_BACKWARD, b++, 0};
      if (f < M) list[n++] = (action){PIPE_FORWARD, f++, 0};
    }
    return n;
  }
  /* interleaved (Megatron's order): microbatches in groups of S, each group
   * through chunk 0, 1, ... forward and the reverse backward; the k-th
   * forward is of chunk (k mod SV) / S, microbatch (k / SV) S + k mod S */
  int total = M * V, warmup = (S - d - 1) * 2 + (V - 1) * S, f = 0, b = 0;
  if (warmup > total) warmup = total;
#define FWD(k) ((action){PIPE_FORWARD, ((k) / G) * S + (k) % S, ((k) % G) / S})
#define BWD(k) ((action){PIPE_BACKWARD, ((k) / G) * S + (k) % S, V - 1 - ((k) % G) / S})
  while (f < warmup) list[n++] = FWD(f), f++;
  while (f < total || b < total) {
    if (f < total) list[n++] = FWD(f), f++;
    if (b < total) list[n++] = BWD(b), b++;
  }
#undef FWD
#undef BWD
  int kept = 0; /* the last stage's forward is its backward too */
  for (int k = 0; k < n; k++) {
    int last = d == S - 1 && list[k].chunk == V - 1;
    if (last && list[k].kind == PIPE_BACKWARD) continue;
    if (last) list[k].kind = PIPE_FORWARD_BACKWARD;
    list[kept++] = list[k];
  }
  return kept;
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

typedef struct {
  int from, to, key; /* key: global stage * M + microbatch */
} interval;

static int by_from(const void *a, const void *b) {
  const interval *x = a, *y = b;
  return x->from != y->from ? (x->from > y->from) - (x->from < y->from)
                            : (x->key > y->key) - (x->key < y->key);
}

/* Slots for the n intervals of one device's buffer (sorted here); *slots
 * grows to the count used; set(step, slot) records them. */
static void place(pipe_table *out, interval *iv, int n, int d, int *slots, int *slot,
                  int *free_from, int *from, int *to, int which) {
  qsort(iv, (size_t)n, sizeof *iv, by_from);
  for (int i = 0; i < n; i++) from[i] = iv[i].from, to[i] = iv[i].to;
  int used = assign_slots(n, from, to, slot, free_from);
  if (used > *slots) *slots = used;
  int S = out->nstages;
  for (int i = 0; i < n; i++) {
    pipe_step *a = &out->steps[from[i] * S + d], *b = &out->steps[to[i] * S + d];
    if (which == 0) a->recv_act_slot = slot[i], b->act_slot = slot[i];
    if (which == 1) a->recv_cot_slot = slot[i], b->cot_slot = slot[i];
    if (which == 2) a->stash_slot = b->stash_slot = slot[i];
  }
}

jx_status pipe_table_build(jx_pipeline_schedule schedule, int S, int V, int M, pipe_table *out) {
  return pipe_table_build_overlapped(schedule, S, V, M, 0, out);
}

jx_status pipe_table_build_overlapped(jx_pipeline_schedule schedule, int S, int V, int M,
                                      int overlap, pipe_table *out) {
  memset(out, 0, sizeof *out);
  int lag = overlap ? 1 : 0; /* ticks between a value's arrival and its first use */
  if (S < 1 || M < 1 || V < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pipeline: %d stages and %d microbatches; at least 1 of each is needed",
                        S, M);
  if (schedule == JX_PIPELINE_1F1B && M < S)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pipeline: 1F1B needs at least as many microbatches as stages (as "
                        "PyTorch's Schedule1F1B); got %d microbatches for %d stages",
                        M, S);
  if (schedule == JX_PIPELINE_INTERLEAVED && (S < 2 || V < 2 || M % S))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pipeline: interleaved 1F1B needs at least 2 stages, at least 2 "
                        "virtual stages each and microbatches a multiple of the stages (as "
                        "Megatron's and PyTorch's ScheduleInterleaved1F1B); got %d microbatches, "
                        "%d stages, %d virtual stages",
                        M, S, V);
  if (schedule != JX_PIPELINE_INTERLEAVED) V = 1;
  int G = S * V;
  int cap = 4 * (M * V + G) * (1 + lag) + 4; /* ticks; a schedule takes about 2 (M V + S - 1) */
  size_t GM = (size_t)G * (size_t)M, L = 2 * (size_t)M * (size_t)V;
  action *lists = calloc((size_t)S * L, sizeof *lists);
  int *len = calloc((size_t)S, sizeof *len), *next = calloc((size_t)S, sizeof *next);
  int *busy_until = calloc((size_t)S, sizeof *busy_until);
  /* per (global stage, microbatch): when its input / cotangent may be used,
   * when it arrives, and the ticks of its forward and backward */
  int *act_ready = malloc(GM * sizeof(int)), *cot_ready = malloc(GM * sizeof(int));
  int *act_arrive = calloc(GM, sizeof(int)), *cot_arrive = calloc(GM, sizeof(int));
  int *fwd_tick = calloc(GM, sizeof(int)), *bwd_tick = calloc(GM, sizeof(int));
  size_t per = (size_t)M * (size_t)V + 1;
  int *slot = calloc(per, sizeof(int)), *free_from = calloc(per, sizeof(int));
  int *from = calloc(per, sizeof(int)), *to = calloc(per, sizeof(int));
  interval *iv = calloc(per, sizeof *iv);
  out->steps = malloc((size_t)cap * (size_t)S * sizeof *out->steps);
  out->stashed = calloc((size_t)S, sizeof *out->stashed);
  jx_status st = JX_OK;
  if (!lists || !len || !next || !busy_until || !act_ready || !cot_ready || !act_arrive ||
      !cot_arrive || !fwd_tick || !bwd_tick || !slot || !free_from || !from || !to || !iv ||
      !out->steps || !out->stashed) {
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    goto done;
  }
  out->nstages = S;
  out->virtual_stages = V;
  out->microbatches = M;
  int remaining = 0;
  for (int d = 0; d < S; d++) {
    len[d] = device_actions(schedule, S, V, M, d, lag, lists + (size_t)d * L);
    remaining += len[d];
  }
  for (size_t k = 0; k < GM; k++) {
    act_ready[k] = k < (size_t)M ? 0 : INT_MAX; /* global stage 0 reads the batch */
    cot_ready[k] = INT_MAX;
  }
  for (size_t k = 0; k < (size_t)cap * (size_t)S; k++)
    out->steps[k] = (pipe_step){PIPE_IDLE, 0, 0, -1, -1, -1, -1, -1};
  int t = 0;
  for (; remaining > 0; t++) {
    if (t >= cap) {
      st = jx_error_set(JX_ERR_INTERNAL, "jx_pipeline: the schedule does not end in %d ticks", cap);
      goto done;
    }
    for (int d = 0; d < S; d++) {
      if (t < busy_until[d] || next[d] == len[d]) continue;
      action a = lists[(size_t)d * L + next[d]];
      int g = a.chunk * S + d, k = g * M + a.microbatch;
      int ready = a.kind == PIPE_BACKWARD ? cot_ready[k] <= t : act_ready[k] <= t;
      if (!ready) continue;
      pipe_step *p = &out->steps[t * S + d];
      p->kind = a.kind;
      p->microbatch = a.microbatch;
      p->chunk = a.chunk;
      busy_until[d] = t + (a.kind == PIPE_FORWARD_BACKWARD ? 2 : 1);
      out->busy_ticks += busy_until[d] - t;
      next[d]++;
      remaining--;
      if (a.kind != PIPE_BACKWARD) fwd_tick[k] = t;
      if (a.kind != PIPE_FORWARD) bwd_tick[k] = t;
      if (a.kind == PIPE_FORWARD && g + 1 < G) {
        act_arrive[k + M] = t + 1;
        act_ready[k + M] = t + 1 + lag;
      }
      if (a.kind != PIPE_FORWARD && g > 0) {
        cot_ready[k - M] = busy_until[d] + lag;
        cot_arrive[k - M] = t + 1;
      }
    }
  }
  out->nticks = 0;
  for (int d = 0; d < S; d++)
    if (busy_until[d] > out->nticks) out->nticks = busy_until[d];
  /* the slots, device by device, over its chunks */
  for (int d = 0; d < S; d++) {
    int n = 0;
    for (int g = d; g < G; g += S) /* the activations inbox: from arrival to the forward */
      for (int i = 0; g > 0 && i < M; i++)
        iv[n++] = (interval){act_arrive[g * M + i], fwd_tick[g * M + i], g * M + i};
    place(out, iv, n, d, &out->act_slots, slot, free_from, from, to, 0);
    n = 0;
    for (int g = d; g < G; g += S) /* the cotangents inbox: from arrival to the backward */
      for (int i = 0; g < G - 1 && i < M; i++)
        iv[n++] = (interval){cot_arrive[g * M + i], bwd_tick[g * M + i], g * M + i};
    place(out, iv, n, d, &out->cot_slots, slot, free_from, from, to, 1);
    n = 0;
    for (int g = d; g < G; g += S) /* the stash: from the forward to the backward */
      for (int i = 0; g < G - 1 && i < M; i++)
        iv[n++] = (interval){fwd_tick[g * M + i], bwd_tick[g * M + i], g * M + i};
    place(out, iv, n, d, &out->stash_slots, slot, free_from, from, to, 2);
    out->stashed[d] = most_open(n, from, to);
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
  free(iv);
  if (st) pipe_table_free(out);
  return st;
}

/* The schedules tagged so far: a few per process (one per pipeline shape),
 * kept for the process's life so that a profile can name them at its end. */
enum { PIPE_PROFILE_TAGS = 256 };
static pipe_profile profiles[PIPE_PROFILE_TAGS];
static int nprofiles;
static pthread_mutex_t profiles_lock = PTHREAD_MUTEX_INITIALIZER;

int pipe_profile_tag(jx_pipeline_schedule schedule, const pipe_table *t) {
  pipe_profile p = {schedule,        t->nstages, t->virtual_stages,
                    t->microbatches, t->nticks,  t->busy_ticks};
  pthread_mutex_lock(&profiles_lock);
  int k = 0;
  while (k < nprofiles && memcmp(&profiles[k], &p, sizeof p)) k++;
  if (k == nprofiles && nprofiles < PIPE_PROFILE_TAGS) profiles[nprofiles++] = p;
  pthread_mutex_unlock(&profiles_lock);
  return k < nprofiles ? k + 1 : 0;
}

int pipe_profile_of(int tag, pipe_profile *out) {
  pthread_mutex_lock(&profiles_lock);
  int found = tag >= 1 && tag <= nprofiles;
  if (found) *out = profiles[tag - 1];
  pthread_mutex_unlock(&profiles_lock);
  return !found;
}
