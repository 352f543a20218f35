/* Text generation with the GPT: a jitted prefill and a jitted decode step,
 * each ending in the sampler (jx_sample_logits) and the PRNG split, so that
 * one step is one call and the host only reads the new tokens (to stream
 * them and to watch for stop strings). The cache, the key and the
 * seen-token mask are carried from call to call (donated on one device).
 *
 * When the batch's slot reaches the cache's end, the last half of each
 * sequence is prefilled again into a fresh cache (a sliding window, as the
 * model never saw positions past its context). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_check.h"

typedef struct {
  jx_gpt_config cfg;
  const jx_tree *params_like;
  jx_sampling sampling;
  int np, nc;
  int64_t cache_len;
} gen_ctx;

/* The sampler's tail of both steps: (next, key', seen') from the logits of
 * the last position. */
static void sample_tail(const gen_ctx *g, jx_array *logits, jx_array *key, jx_array *seen,
                        jx_array **out_next, jx_array **out_key, jx_array **out_seen) {
  /* greedy draws nothing: the key goes on as it is */
  jx_array *keys = g->sampling.temperature == 0 ? NULL : jx_random_split(key, 2);
  *out_key =
      keys ? jx_reshape(jx_slice(keys, JX_SHAPE(0, 0), JX_SHAPE(1, 2), JX_SHAPE()), JX_SHAPE(2))
           : key;
  jx_array *use =
      keys ? jx_reshape(jx_slice(keys, JX_SHAPE(1, 0), JX_SHAPE(2, 2), JX_SHAPE()), JX_SHAPE(2))
           : key;
  jx_array *next = jx_astype(jx_sample_logits(logits, use, seen, &g->sampling), JX_I32);
  int64_t B = jx_shape_of(seen).dims[0], V = g->cfg.vocab;
  double r = g->sampling.repetition_penalty;
  *out_next = next;
  /* the seen tokens matter to a repetition penalty only */
  *out_seen = r > 0 && r != 1 ? jx_logical_or(seen, jx_eq(jx_iota(JX_I32, JX_SHAPE(1, V), 1),
                                                          jx_reshape(next, JX_SHAPE(B, 1))))
                              : seen;
}

/* (params..., tokens [B, P], pad, key, seen) -> (next, cache..., key', seen') */
static void prefill_sample_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gen_ctx *g = ctx;
  jx_tree *p = jx_tree_unflatten(g->params_like, in);
  jx_array *tokens = in[g->np];
  jx_array *logits =
      jx_gpt_prefill(&g->cfg, p, tokens, in[g->np + 1], g->cache_len, out + 1); /* [B, P, V] */
  jx_shape ts = jx_shape_of(tokens);
  int64_t B = ts.dims[0], P = ts.dims[1], V = g->cfg.vocab;
  logits = jx_reshape(jx_slice(logits, JX_SHAPE(0, P - 1, 0), JX_SHAPE(B, P, V), JX_SHAPE()),
                      JX_SHAPE(B, V));
  sample_tail(g, logits, in[g->np + 2], in[g->np + 3], &out[0], &out[1 + g->nc], &out[2 + g->nc]);
  jx_tree_release(p);
}

/* (params..., cache..., tokens [B], pad, slot, key, seen) -> (next, cache..., key', seen') */
static void decode_sample_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gen_ctx *g = ctx;
  jx_tree *p = jx_tree_unflatten(g->params_like, in);
  jx_array *const *rest = in + g->np + g->nc;
  jx_array *logits = jx_gpt_decode_step(&g->cfg, p, rest[0], rest[1], rest[2], in + g->np, out + 1);
  sample_tail(g, logits, rest[3], rest[4], &out[0], &out[1 + g->nc], &out[2 + g->nc]);
  jx_tree_release(p);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check_prompts(const char *fn, const jx_gpt_config *c, int64_t batch,
                         const int32_t *const *prompts, const int64_t *lengths) {
  if (batch < 1 || !prompts || !lengths) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: needs a batch of >= 1 prompts (batch %lld)", fn,
                    (long long)batch);
    return 0;
  }
  for (int64_t b = 0; b < batch; b++) {
    if (lengths[b] < 1 || !prompts[b]) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: prompt %lld is empty", fn, (long long)b);
      return 0;
    }
    if (lengths[b] > c->context) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT,
                      "%s: prompt %lld has %lld tokens, longer than the model's context of %lld",
                      fn, (long long)b, (long long)lengths[b], (long long)c->context);
      return 0;
    }
    for (int64_t i = 0; i < lengths[b]; i++)
      if (prompts[b][i] < 0 || prompts[b][i] >= c->vocab) {
        jx_report_error(JX_ERR_INVALID_ARGUMENT,
                        "%s: prompt %lld: token %d at position %lld is not in the vocabulary "
                        "[0, %lld)",
                        fn, (long long)b, (int)prompts[b][i], (long long)i, (long long)c->vocab);
        return 0;
      }
  }
  return 1;
}

/* "data" / "model" where the mesh has the axis and it divides n, else "None". */
static const char *axis_if(const jx_mesh *m, const char *axis, int64_t n) {
  int64_t s = m ? jx_mesh_axis_size(m, axis) : -1;
  return s > 1 && n % s == 0 ? axis : "None";
}

/* One sequence's state on the host: its tokens (prompt and output) and
 * whether it has ended. */
typedef struct {
  int32_t *tokens;
  int64_t len, prompt_len, produced;
  int done;
} sequence;

/* Appends tok to s; ends s at max_tokens or at a stop string. */
static void emit(const jx_generate_options *o, sequence *s, int64_t b, int32_t tok) {
  if (s->done) return;
  s->tokens[s->len++] = tok;
  s->produced++;
  if (o->on_token) o->on_token(o->ctx, b, tok);
  if (s->produced >= o->max_tokens) s->done = 1;
  for (int i = 0; i < o->nstop && !s->done; i++) {
    int64_t n = o->stop[i] ? (int64_t)strlen(o->stop[i]) : 0;
    if (n < 1 || n > s->produced) continue;
    int match = 1;
    for (int64_t j = 0; j < n && match; j++)
      match = s->tokens[s->len - n + j] == (int32_t)(unsigned char)o->stop[i][j];
    s->done = match;
  }
}

/* The batch's last `width` tokens of each sequence, left-padded: tokens
 * [B, width] and pad [B] into host buffers. */
static void window(const sequence *seq, int64_t B, int64_t width, int32_t *tok, int32_t *pad) {
  for (int64_t b = 0; b < B; b++) {
    int64_t n = seq[b].len < width ? seq[b].len : width;
    pad[b] = (int32_t)(width - n);
    for (int64_t i = 0; i < width; i++)
      tok[b * width + i] = i < pad[b] ? 0 : seq[b].tokens[seq[b].len - n + (i - pad[b])];
  }
}

typedef struct {
  jx_fn *prefill, *decode;        /* jitted */
  jx_tree *state;                 /* "cache.<i>", "key", "seen", "next" */
  jx_array **params;              /* placed as the mesh says */
  jx_sharding *rows, *replicated; /* NULL on one device */
  jx_array **in, **out;
} runner;

static void set_state(runner *r, const gen_ctx *g, jx_array **out) {
  char name[32];
  jx_tree_set(r->state, "next", out[0]);
  for (int i = 0; i < g->nc; i++) {
    snprintf(name, sizeof name, "cache.%d", i);
    jx_tree_set(r->state, name, out[1 + i]);
  }
  jx_tree_set(r->state, "key", out[1 + g->nc]);
  jx_tree_set(r->state, "seen", out[2 + g->nc]);
}

static jx_array *put_rows(const runner *r, jx_array *a) {
  return r->rows ? jx_device_put(a, r->rows) : a;
}

/* Prefills the window of every sequence; reads the sampled tokens into next. */
static jx_status run_prefill(runner *r, const gen_ctx *g, const sequence *seq, int64_t B,
                             int64_t width, int32_t *next) {
  int32_t *tok = malloc(sizeof *tok * (size_t)(B * width)), *pad = malloc(sizeof *pad * (size_t)B);
  if (!tok || !pad) {
    free(tok);
    free(pad);
    return jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_gpt_generate: out of memory");
  }
  window(seq, B, width, tok, pad);
  jx_scope_begin();
  for (int i = 0; i < g->np; i++) r->in[i] = r->params[i];
  r->in[g->np] = put_rows(r, jx_array_from(JX_I32, JX_SHAPE(B, width), tok));
  r->in[g->np + 1] = put_rows(r, jx_array_from(JX_I32, JX_SHAPE(B), pad));
  jx_tree_set(r->state, "pad", r->in[g->np + 1]);
  r->in[g->np + 2] = jx_tree_get(r->state, "key");
  r->in[g->np + 3] = jx_tree_get(r->state, "seen");
  jx_status st = jx_call(r->prefill, r->in, r->out);
  if (!st) {
    set_state(r, g, r->out);
    st = jx_read(r->out[0], next, sizeof *next * (size_t)B);
  }
  jx_scope_end();
  free(tok);
  free(pad);
  return st;
}

static jx_status run_decode(runner *r, const gen_ctx *g, int64_t B, int32_t slot, int32_t *next) {
  char name[32];
  jx_scope_begin();
  for (int i = 0; i < g->np; i++) r->in[i] = r->params[i];
  for (int i = 0; i < g->nc; i++) {
    snprintf(name, sizeof name, "cache.%d", i);
    r->in[g->np + i] = jx_tree_get(r->state, name);
  }
  jx_array **rest = r->in + g->np + g->nc;
  rest[0] = jx_tree_get(r->state, "next");
  rest[1] = jx_tree_get(r->state, "pad");
  rest[2] = jx_array_from(JX_I32, JX_SHAPE(), &slot);
  if (r->replicated) rest[2] = jx_device_put(rest[2], r->replicated);
  rest[3] = jx_tree_get(r->state, "key");
  rest[4] = jx_tree_get(r->state, "seen");
  jx_status st = jx_call(r->decode, r->in, r->out);
  if (!st) {
    set_state(r, g, r->out);
    st = jx_read(r->out[0], next, sizeof *next * (size_t)B);
  }
  jx_scope_end();
  return st;
}

/* The jitted functions, with shardings on a mesh and donation on one device. */
static jx_status make_runner(runner *r, const gen_ctx *g, const jx_tree *params, jx_mesh *mesh,
                             int64_t B) {
  const char *fn = "jx_gpt_generate";
  int np = g->np, nc = g->nc;
  jx_fn *pf = jx_fn_create("gpt_prefill_sample", np + 4, nc + 3, prefill_sample_body, (void *)g);
  jx_fn *df = jx_fn_create("gpt_decode_sample", np + nc + 5, nc + 3, decode_sample_body, (void *)g);
  r->params = calloc((size_t)np, sizeof *r->params);
  r->in = calloc((size_t)(np + nc + 5), sizeof *r->in);
  r->out = calloc((size_t)(nc + 3), sizeof *r->out);
  r->state = jx_tree_create();
  if (!pf || !df || !r->params || !r->in || !r->out || !r->state) {
    jx_fn_release(pf);
    jx_fn_release(df);
    return jx_last_status() ? jx_last_status()
                            : jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  jx_tree_flatten(params, r->params);
  jx_status st = JX_OK;
  if (!mesh) {
    int *donate = calloc((size_t)(np + nc + 5), sizeof *donate);
    if (!donate) return jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int i = 0; i < nc; i++) donate[np + i] = 1; /* the cache, written in place */
    r->prefill = jx_jit(pf, NULL);
    r->decode = jx_jit(df, &(jx_jit_options){.donate = donate});
    free(donate);
  } else {
    char(*specs)[64] = calloc((size_t)np, sizeof *specs);
    jx_sharding **psh = calloc((size_t)np, sizeof *psh);
    jx_sharding **pin = calloc((size_t)(np + 4), sizeof *pin),
                **pout = calloc(nc + 3, sizeof *pout);
    jx_sharding **din = calloc((size_t)(np + nc + 5), sizeof *din);
    char cache_spec[64];
    snprintf(cache_spec, sizeof cache_spec, "%s,None,%s,None", axis_if(mesh, "data", B),
             axis_if(mesh, "model", g->cfg.n_heads));
    if (!strcmp(cache_spec, "None,None,None,None")) cache_spec[0] = '\0';
    if (specs && psh && pin && pout && din &&
        !(st = jx_gpt_param_specs(&g->cfg, params, mesh, 0, specs))) {
      jx_sharding *cache_sh = jx_sharding_create(mesh, cache_spec);
      r->rows = jx_sharding_create(mesh, strcmp(axis_if(mesh, "data", B), "data") ? "" : "data");
      r->replicated = jx_sharding_create(mesh, "");
      for (int i = 0; i < np; i++) {
        psh[i] = jx_sharding_create(mesh, specs[i]);
        r->params[i] = jx_keep(jx_device_put(r->params[i], psh[i]));
        pin[i] = din[i] = psh[i];
      }
      for (int i = 0; i < nc; i++) din[np + i] = pout[1 + i] = cache_sh;
      pin[np] = pin[np + 1] = pout[0] = pout[2 + nc] = r->rows;
      pin[np + 2] = pout[1 + nc] = r->replicated;
      pin[np + 3] = r->rows;
      din[np + nc] = din[np + nc + 1] = din[np + nc + 4] = r->rows;
      din[np + nc + 2] = din[np + nc + 3] = r->replicated;
      r->prefill = jx_jit(pf, &(jx_jit_options){.in_shardings = pin, .out_shardings = pout});
      r->decode = jx_jit(df, &(jx_jit_options){.in_shardings = din, .out_shardings = pout});
      for (int i = 0; i < np; i++) jx_sharding_release(psh[i]);
      jx_sharding_release(cache_sh);
    } else if (!st) {
      st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    free(specs);
    free(psh);
    free(pin);
    free(pout);
    free(din);
  }
  jx_fn_release(pf);
  jx_fn_release(df);
  if (!st && (!r->prefill || !r->decode))
    st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  return st;
}

static void free_runner(runner *r, int np) {
  jx_fn_release(r->prefill);
  jx_fn_release(r->decode);
  jx_tree_release(r->state);
  if (r->rows)
    for (int i = 0; r->params && i < np; i++) jx_release(r->params[i]);
  free(r->params);
  free(r->in);
  free(r->out);
  jx_sharding_release(r->rows);
  jx_sharding_release(r->replicated);
}

jx_status jx_gpt_generate(const jx_gpt_config *c, const jx_tree *params, int64_t batch,
                          const int32_t *const *prompts, const int64_t *lengths,
                          const jx_generate_options *o, jx_generate_stats *stats) {
  const char *fn = "jx_gpt_generate";
  if (stats) *stats = (jx_generate_stats){0};
  if (!nn_gpt_check_config(fn, c)) return jx_last_status();
  if (!params || !o)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: NULL parameters or options", fn);
  if (o->max_tokens < 0 || (o->nstop > 0 && !o->stop))
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: max_tokens %lld must be >= 0", fn,
                           (long long)o->max_tokens);
  if (!check_prompts(fn, c, batch, prompts, lengths)) return jx_last_status();
  int64_t B = batch, P = 0, V = c->vocab;
  for (int64_t b = 0; b < B; b++) P = lengths[b] > P ? lengths[b] : P;
  if (o->max_tokens == 0) return JX_OK;
  /* slots for the prompt and every token but the last, within the context */
  int64_t S = P + o->max_tokens - 1 < c->context ? P + o->max_tokens - 1 : c->context;
  if (S < P) S = P;
  /* the window prefilled again when the cache is full: the prompt's width
   * (so one trace of the prefill serves both) unless that leaves no room */
  int64_t width = P > S / 2 ? P : S / 2, refill = width < S ? width : S / 2;
  if (S < P + o->max_tokens - 1 && refill < 1)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: a context of %lld cannot slide its window",
                           fn, (long long)c->context);

  gen_ctx g = {.cfg = *c,
               .params_like = params,
               .sampling = o->sampling,
               .np = jx_tree_size(params),
               .nc = jx_gpt_cache_count(c),
               .cache_len = S};
  sequence *seq = calloc((size_t)B, sizeof *seq);
  int32_t *next = calloc((size_t)B, sizeof *next);
  uint8_t *seen = calloc((size_t)(B * V), 1);
  runner r = {0};
  jx_status st = seq && next && seen ? JX_OK : JX_ERR_OUT_OF_MEMORY;
  for (int64_t b = 0; !st && b < B; b++) {
    seq[b].tokens = malloc(sizeof *seq[b].tokens * (size_t)(lengths[b] + o->max_tokens));
    if (!seq[b].tokens) {
      st = JX_ERR_OUT_OF_MEMORY;
      break;
    }
    memcpy(seq[b].tokens, prompts[b], sizeof *seq[b].tokens * (size_t)lengths[b]);
    seq[b].len = seq[b].prompt_len = lengths[b];
    for (int64_t i = 0; i < lengths[b]; i++) seen[b * V + prompts[b][i]] = 1;
  }
  if (st) st = jx_report_error(st, "%s: out of memory", fn);
  if (!st) st = make_runner(&r, &g, params, o->mesh, B);
  if (!st) {
    jx_scope_begin();
    jx_tree_set(r.state, "key", jx_random_key(o->seed));
    jx_tree_set(r.state, "seen", put_rows(&r, jx_array_from(JX_BOOL, JX_SHAPE(B, V), seen)));
    jx_scope_end();
    if (r.replicated)
      jx_tree_set(r.state, "key", jx_device_put(jx_tree_get(r.state, "key"), r.replicated));
  }
  double t0 = now_s(), t_decode = 0;
  /* the prompt padded to the refill's width when the window will slide */
  int64_t first = S < P + o->max_tokens - 1 && refill == width ? width : P;
  if (!st) st = run_prefill(&r, &g, seq, B, first, next);
  if (!st && stats) {
    stats->prefill_s = now_s() - t0;
    for (int64_t b = 0; b < B; b++) stats->prefill_tokens += lengths[b];
  }
  int64_t slot = first, steps = 0;
  for (int64_t b = 0; !st && b < B; b++) emit(o, &seq[b], b, next[b]);
  for (;;) {
    int active = 0;
    for (int64_t b = 0; b < B; b++) active |= !seq[b].done;
    if (st || !active) break;
    if (slot == S) { /* the cache is full: start again from the last half */
      st = run_prefill(&r, &g, seq, B, refill, next);
      slot = refill;
    } else {
      st = run_decode(&r, &g, B, (int32_t)slot, next);
      slot++;
    }
    for (int64_t b = 0; !st && b < B; b++) emit(o, &seq[b], b, next[b]);
    /* the first step traces and compiles: the decode rate counts the rest */
    if (++steps == 1) t_decode = now_s();
  }
  if (!st && stats && steps > 1) {
    stats->decode_s = now_s() - t_decode;
    stats->decode_tokens = B * (steps - 1);
  }
  free_runner(&r, g.np);
  for (int64_t b = 0; seq && b < B; b++) free(seq[b].tokens);
  free(seq);
  free(next);
  free(seen);
  return st;
}
