/* Decoding the GPT with a key/value cache, and sampling.
 *
 * The oracle of the cache is the full forward pass: for a batch of
 * sequences of different lengths (left-padded prompts of different
 * lengths, then one token per step), the jitted prefill and decode step
 * give at every position the logits jx_gpt_forward gives for that sequence
 * alone, on one device and on a 2x2 data x model mesh, with one trace of
 * the decode step for every step. The sampler keeps top-k and top-p draws
 * inside their allowed sets over many seeds, draws top-k tokens with the
 * renormalized softmax's frequencies, equals greedy as the temperature goes
 * to 0 and repeats itself for a seed. Generation is deterministic, the same
 * on a mesh, honours stop strings, and names bad prompts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

enum { B = 4, V = 256 };

static const jx_gpt_config cfg = {
    .vocab = V, .n_layers = 2, .d_model = 32, .n_heads = 4, .context = 16, .mlp_ratio = 4};

/* The initial weights grown 25-fold: logits of order one that depend on
 * positions and masks well above f32 rounding. */
static jx_array *grow(void *ctx, const char *name, jx_array *a) {
  (void)ctx;
  (void)name;
  return jx_ndim(a) == 2 ? jx_mul(a, jx_scalar(JX_F32, 25)) : a;
}

static jx_tree *make_params(void) {
  jx_tree *p = jx_gpt_init(&cfg, jx_random_key(7), JX_F32);
  assert_non_null(p);
  jx_tree *big = jx_tree_map(p, grow, NULL);
  jx_tree_release(p);
  return big;
}

/* Sequences of total lengths len[b], the first plen[b] tokens the prompt. */
static const int64_t len[B] = {12, 9, 14, 16}, plen[B] = {5, 2, 7, 3};
enum { P = 7 };

static void tokens_of(int64_t b, int32_t *t) {
  uint64_t rng = 0x9e3779b97f4a7c15ull + (uint64_t)b;
  for (int64_t i = 0; i < len[b]; i++) t[i] = (int32_t)(test_rng_next(&rng) % V);
}

static double max_diff(jx_array *got, jx_array *want) {
  return jx_item(jx_max(jx_abs(jx_sub(got, want)), JX_AXES(), 0));
}

/* Runs prefill and every decode step (sharded when mesh is not NULL) and
 * compares each sequence's logits with its full forward pass. */
static void cache_matches_forward(jx_mesh *mesh) {
  jx_tree *params = make_params();
  int np = jx_tree_size(params), nc = jx_gpt_cache_count(&cfg);
  int64_t S = 0;
  for (int b = 0; b < B; b++) S = P + len[b] - plen[b] > S ? P + len[b] - plen[b] : S;
  S--;                   /* the last token of the longest sequence is never fed */
  int64_t steps = S - P; /* slots P .. S - 1, some beyond the context (positions are not) */
  S += 2;                /* a spare slot: slots past the step are masked */

  /* the oracle: logits [1, len, V] of each sequence alone */
  int32_t seqs[B][16];
  jx_array *full[B];
  for (int b = 0; b < B; b++) {
    tokens_of(b, seqs[b]);
    full[b] = jx_gpt_forward(&cfg, params, jx_array_from(JX_I32, JX_SHAPE(1, len[b]), seqs[b]));
  }

  jx_fn *pf = jx_gpt_prefill_fn(&cfg, params, S), *df = jx_gpt_decode_fn(&cfg, params);
  assert_non_null(pf);
  assert_non_null(df);
  jx_sharding **pin = NULL, **pout = NULL, **din = NULL, *rows = NULL, *rep = NULL, *csh = NULL;
  jx_array **arg = calloc((size_t)(np + nc + 3), sizeof *arg);
  jx_array **res = calloc((size_t)(nc + 1), sizeof *res);
  jx_tree_flatten(params, arg);
  int *donate = calloc((size_t)(np + nc + 3), sizeof *donate);
  for (int i = 0; i < nc; i++) donate[np + i] = 1;
  jx_fn *jpf, *jdf;
  if (mesh) {
    char(*specs)[64] = calloc((size_t)np, sizeof *specs);
    check_ok(jx_gpt_param_specs(&cfg, params, mesh, 0, specs));
    pin = calloc((size_t)(np + 2), sizeof *pin);
    pout = calloc((size_t)(nc + 1), sizeof *pout);
    din = calloc((size_t)(np + nc + 3), sizeof *din);
    rows = jx_sharding_create(mesh, "data");
    rep = jx_sharding_create(mesh, "");
    csh = jx_sharding_create(mesh, "data,None,model,None");
    for (int i = 0; i < np; i++) {
      pin[i] = din[i] = jx_sharding_create(mesh, specs[i]);
      arg[i] = jx_device_put(arg[i], pin[i]);
    }
    pin[np] = pin[np + 1] = din[np + nc] = din[np + nc + 1] = rows;
    din[np + nc + 2] = rep;
    pout[0] = rows;
    for (int i = 0; i < nc; i++) pout[1 + i] = din[np + i] = csh;
    jpf = jx_jit(pf, &(jx_jit_options){.in_shardings = pin, .out_shardings = pout});
    jdf = jx_jit(df, &(jx_jit_options){.in_shardings = din, .out_shardings = pout});
    free(specs);
  } else {
    jpf = jx_jit(pf, NULL);
    jdf = jx_jit(df, &(jx_jit_options){.donate = donate});
  }

  /* prefill: left-padded prompts */
  int32_t tok[B * P], pad[B];
  for (int b = 0; b < B; b++) {
    pad[b] = (int32_t)(P - plen[b]);
    for (int i = 0; i < P; i++) tok[b * P + i] = i < pad[b] ? 0 : seqs[b][i - pad[b]];
  }
  jx_array *pad_a = jx_array_from(JX_I32, JX_SHAPE(B), pad);
  if (mesh) pad_a = jx_device_put(pad_a, rows);
  arg[np] = jx_array_from(JX_I32, JX_SHAPE(B, P), tok);
  if (mesh) arg[np] = jx_device_put(arg[np], rows);
  arg[np + 1] = pad_a;
  check_ok(jx_call(jpf, arg, res));
  for (int b = 0; b < B; b++) {
    jx_array *got = jx_slice(res[0], JX_SHAPE(b, pad[b], 0), JX_SHAPE(b + 1, P, V), JX_SHAPE());
    jx_array *want = jx_slice(full[b], JX_SHAPE(0, 0, 0), JX_SHAPE(1, plen[b], V), JX_SHAPE());
    assert_true(jx_item(jx_max(jx_abs(want), JX_AXES(), 0)) > 0.5); /* logits of order one */
    double d = max_diff(got, want);
    if (d > 1e-4) fprintf(stderr, "prefill: sequence %d differs by %g\n", b, d);
    assert_true(d <= 1e-4);
  }

  /* decode: one token per sequence per step, in slot P + s */
  jx_array **cache = calloc((size_t)nc, sizeof *cache);
  for (int i = 0; i < nc; i++) cache[i] = res[1 + i];
  for (int64_t s = 0; s <= steps; s++) {
    int32_t next[B], slot = (int32_t)(P + s);
    for (int b = 0; b < B; b++) next[b] = plen[b] + s < len[b] ? seqs[b][plen[b] + s] : 0;
    arg[np + nc] = jx_array_from(JX_I32, JX_SHAPE(B), next);
    arg[np + nc + 2] = jx_array_from(JX_I32, JX_SHAPE(), &slot);
    if (mesh) {
      arg[np + nc] = jx_device_put(arg[np + nc], rows);
      arg[np + nc + 2] = jx_device_put(arg[np + nc + 2], rep);
    }
    arg[np + nc + 1] = pad_a;
    for (int i = 0; i < nc; i++) arg[np + i] = cache[i];
    check_ok(jx_call(jdf, arg, res));
    for (int i = 0; i < nc; i++) cache[i] = res[1 + i];
    for (int b = 0; b < B; b++) {
      if (plen[b] + s >= len[b]) continue;
      jx_array *got = jx_slice(res[0], JX_SHAPE(b, 0), JX_SHAPE(b + 1, V), JX_SHAPE());
      jx_array *want = jx_reshape(jx_slice(full[b], JX_SHAPE(0, plen[b] + s, 0),
                                           JX_SHAPE(1, plen[b] + s + 1, V), JX_SHAPE()),
                                  JX_SHAPE(1, V));
      double d = max_diff(got, want);
      if (d > 1e-4) fprintf(stderr, "step %lld: sequence %d differs by %g\n", (long long)s, b, d);
      assert_true(d <= 1e-4);
    }
  }
  assert_int_equal(jx_fn_trace_count(jdf), 1); /* one trace for every step */
  if (!mesh) {                                 /* the donated cache was taken by the step */
    assert_true(jx_is_poisoned(jx_neg(arg[np])));
    assert_error_has("donated");
  }
  if (mesh) {
    for (int i = 0; i < np; i++) jx_sharding_release(pin[i]);
    jx_sharding_release(rows);
    jx_sharding_release(rep);
    jx_sharding_release(csh);
  }
  free(pin);
  free(pout);
  free(din);
  free(cache);
  free(arg);
  free(res);
  free(donate);
  jx_fn_release(jpf);
  jx_fn_release(jdf);
  jx_fn_release(pf);
  jx_fn_release(df);
  jx_tree_release(params);
}

static void cache_matches_forward_one_device(void **state) {
  (void)state;
  cache_matches_forward(NULL);
}

static void cache_matches_forward_on_mesh(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  assert_non_null(m);
  cache_matches_forward(m);
  jx_mesh_release(m);
}

/* ---- sampling ---- */
enum { ROWS = 8, NV = 40, SEEDS = 100 };

static jx_array *random_logits(uint64_t seed) {
  return jx_mul(jx_random_normal(jx_random_key(seed), JX_F32, JX_SHAPE(ROWS, NV)),
                jx_scalar(JX_F32, 2));
}

static void top_k_and_top_p_stay_in_their_sets(void **state) {
  (void)state;
  jx_array *logits = random_logits(3);
  float l[ROWS * NV];
  check_ok(jx_read(logits, l, sizeof l));
  /* the allowed sets from the host: the 5 largest; the nucleus of 0.6 */
  uint8_t in_k[ROWS][NV] = {{0}}, in_p[ROWS][NV] = {{0}};
  for (int r = 0; r < ROWS; r++) {
    int order[NV];
    for (int i = 0; i < NV; i++) order[i] = i;
    for (int i = 0; i < NV; i++) /* selection sort, descending */
      for (int j = i + 1; j < NV; j++)
        if (l[r * NV + order[j]] > l[r * NV + order[i]]) {
          int t = order[i];
          order[i] = order[j];
          order[j] = t;
        }
    for (int i = 0; i < 5; i++) in_k[r][order[i]] = 1;
    double z = 0, mass = 0;
    for (int i = 0; i < NV; i++) z += exp(l[r * NV + i] - l[r * NV + order[0]]);
    for (int i = 0; i < NV && mass < 0.6; i++) {
      in_p[r][order[i]] = 1;
      mass += exp(l[r * NV + order[i]] - l[r * NV + order[0]]) / z;
    }
  }
  int hits_k[NV * ROWS] = {0};
  for (uint64_t seed = 0; seed < SEEDS; seed++) {
    jx_scope_begin();
    int32_t tk[ROWS], tp[ROWS];
    jx_array *key = jx_random_key(seed);
    check_ok(
        jx_read(jx_sample_logits(logits, key, NULL, &(jx_sampling){.temperature = 1, .top_k = 5}),
                tk, sizeof tk));
    check_ok(
        jx_read(jx_sample_logits(logits, key, NULL, &(jx_sampling){.temperature = 1, .top_p = 0.6}),
                tp, sizeof tp));
    for (int r = 0; r < ROWS; r++) {
      assert_true(tk[r] >= 0 && tk[r] < NV && in_k[r][tk[r]]);
      assert_true(tp[r] >= 0 && tp[r] < NV && in_p[r][tp[r]]);
      hits_k[r * NV + tk[r]]++;
    }
    jx_scope_end();
  }
  int distinct = 0; /* draws, not the argmax every time */
  for (int i = 0; i < NV * ROWS; i++) distinct += hits_k[i] > 0;
  assert_true(distinct > ROWS * 2);
}

/* Many rows of one distribution in one draw: top-k's frequencies are the
 * softmax of the k largest logits, renormalized. */
static void top_k_draws_follow_the_renormalized_softmax(void **state) {
  (void)state;
  enum { N = 4000 };
  const float row[6] = {1.0f, 0.5f, -0.3f, 2.0f, 0.1f, -1.0f};
  float *l = malloc(sizeof *l * N * 6);
  for (int i = 0; i < N * 6; i++) l[i] = row[i % 6];
  jx_array *logits = jx_array_from(JX_F32, JX_SHAPE(N, 6), l);
  int32_t *t = malloc(sizeof *t * N);
  check_ok(jx_read(jx_sample_logits(logits, jx_random_key(11), NULL,
                                    &(jx_sampling){.temperature = 1, .top_k = 3}),
                   t, sizeof *t * N));
  double count[6] = {0}, z = exp(2.0) + exp(1.0) + exp(0.5);
  for (int i = 0; i < N; i++) count[t[i]]++;
  const double want[6] = {exp(1.0) / z, exp(0.5) / z, 0, exp(2.0) / z, 0, 0};
  for (int v = 0; v < 6; v++) {
    if (fabs(count[v] / N - want[v]) > 0.03)
      fprintf(stderr, "token %d: frequency %g, expected %g\n", v, count[v] / N, want[v]);
    assert_true(fabs(count[v] / N - want[v]) <= 0.03);
  }
  free(l);
  free(t);
}

static void cold_sampling_is_greedy_and_seeds_repeat(void **state) {
  (void)state;
  for (uint64_t seed = 0; seed < 20; seed++) {
    jx_scope_begin();
    jx_array *logits = random_logits(100 + seed), *key = jx_random_key(seed);
    int32_t greedy[ROWS], cold[ROWS], a[ROWS], b[ROWS], argmax[ROWS];
    check_ok(
        jx_read(jx_sample_logits(logits, key, NULL, &(jx_sampling){0}), greedy, sizeof greedy));
    check_ok(jx_read(jx_argmax(logits, 1), argmax, sizeof argmax));
    check_ok(jx_read(jx_sample_logits(logits, key, NULL, &(jx_sampling){.temperature = 1e-4}), cold,
                     sizeof cold));
    jx_sampling hot = {.temperature = 1.5, .top_k = 20, .top_p = 0.9};
    check_ok(jx_read(jx_sample_logits(logits, key, NULL, &hot), a, sizeof a));
    check_ok(jx_read(jx_sample_logits(logits, jx_random_key(seed), NULL, &hot), b, sizeof b));
    assert_memory_equal(greedy, argmax, sizeof greedy);
    assert_memory_equal(greedy, cold, sizeof greedy);
    assert_memory_equal(a, b, sizeof a);
    jx_scope_end();
  }
}

/* A repetition penalty turns greedy away from a seen argmax whose lead is
 * smaller than the penalty's effect. */
static void repetition_penalty_lowers_seen_tokens(void **state) {
  (void)state;
  const float l[2][3] = {{2.0f, 1.5f, 0.0f}, {-1.0f, -1.2f, -3.0f}};
  const uint8_t seen[2][3] = {{1, 0, 0}, {1, 0, 0}};
  jx_array *logits = jx_array_from(JX_F32, JX_SHAPE(2, 3), l);
  jx_array *s = jx_array_from(JX_BOOL, JX_SHAPE(2, 3), seen);
  int32_t t[2];
  check_ok(jx_read(
      jx_sample_logits(logits, jx_random_key(0), s, &(jx_sampling){.repetition_penalty = 1.5}), t,
      sizeof t));
  /* 2 / 1.5 < 1.5 and -1 * 1.5 < -1.2 */
  assert_int_equal(t[0], 1);
  assert_int_equal(t[1], 1);
  check_ok(jx_read(jx_sample_logits(logits, jx_random_key(0), s, &(jx_sampling){0}), t, sizeof t));
  assert_int_equal(t[0], 0);
  assert_int_equal(t[1], 0);
  jx_sample_logits(logits, jx_random_key(0), NULL, &(jx_sampling){.top_k = -1});
  assert_error_has("none may be negative");
}

/* ---- generation ---- */
typedef struct {
  int32_t out[B][64];
  int64_t n[B];
} collected;

static void collect(void *ctx, int64_t seq, int32_t token) {
  collected *c = ctx;
  c->out[seq][c->n[seq]++] = token;
}

static void generate_into(const jx_tree *params, jx_mesh *mesh, jx_sampling s, int64_t max_tokens,
                          const char *const *stop, int nstop, collected *c) {
  int32_t seqs[B][16];
  const int32_t *prompts[B];
  for (int b = 0; b < B; b++) {
    tokens_of(b, seqs[b]);
    prompts[b] = seqs[b];
  }
  memset(c, 0, sizeof *c);
  jx_generate_options o = {.sampling = s,
                           .max_tokens = max_tokens,
                           .seed = 5,
                           .stop = stop,
                           .nstop = nstop,
                           .mesh = mesh,
                           .on_token = collect,
                           .ctx = c};
  jx_generate_stats st;
  check_ok(jx_gpt_generate(&cfg, params, B, prompts, plen, &o, &st));
  assert_true(st.prefill_tokens == 5 + 2 + 7 + 3);
}

static void generation_is_deterministic_and_the_same_on_a_mesh(void **state) {
  (void)state;
  jx_tree *params = make_params();
  collected a, b, m;
  /* 30 tokens: more than the context, so the window slides */
  generate_into(params, NULL, (jx_sampling){0}, 30, NULL, 0, &a);
  generate_into(params, NULL, (jx_sampling){0}, 30, NULL, 0, &b);
  jx_mesh *mesh = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  generate_into(params, mesh, (jx_sampling){0}, 30, NULL, 0, &m);
  for (int s = 0; s < B; s++) {
    assert_int_equal(a.n[s], 30);
    assert_memory_equal(a.out[s], b.out[s], sizeof a.out[s]);
    assert_memory_equal(a.out[s], m.out[s], sizeof a.out[s]);
  }
  /* greedy's first tokens are the argmax of the prompt's last logits */
  for (int s = 0; s < B; s++) {
    int32_t seq[16];
    tokens_of(s, seq);
    jx_array *logits =
        jx_gpt_forward(&cfg, params, jx_array_from(JX_I32, JX_SHAPE(1, plen[s]), seq));
    jx_array *last =
        jx_slice(logits, JX_SHAPE(0, plen[s] - 1, 0), JX_SHAPE(1, plen[s], V), JX_SHAPE());
    assert_int_equal((int32_t)jx_item(jx_argmax(jx_reshape(last, JX_SHAPE(V)), 0)), a.out[s][0]);
  }
  /* sampled: the same seed, the same text */
  jx_sampling hot = {.temperature = 1, .top_k = 40, .top_p = 0.95, .repetition_penalty = 1.2};
  generate_into(params, NULL, hot, 12, NULL, 0, &a);
  generate_into(params, NULL, hot, 12, NULL, 0, &b);
  for (int s = 0; s < B; s++) assert_memory_equal(a.out[s], b.out[s], sizeof a.out[s]);
  jx_mesh_release(mesh);
  jx_tree_release(params);
}

static void stop_strings_end_a_sequence(void **state) {
  (void)state;
  jx_tree *params = make_params();
  collected all, stopped;
  generate_into(params, NULL, (jx_sampling){0}, 10, NULL, 0, &all);
  /* sequence 0's fourth token as a stop string: it ends at that token's first
   * occurrence; the others (not ending with it before) run on */
  char stop[2] = {(char)all.out[0][3], 0};
  const char *stops[1] = {stop};
  generate_into(params, NULL, (jx_sampling){0}, 10, stops, all.out[0][3] ? 1 : 0, &stopped);
  int64_t first = 0;
  while (all.out[0][3] && all.out[0][first] != all.out[0][3]) first++;
  assert_int_equal(stopped.n[0], all.out[0][3] ? first + 1 : 10);
  assert_memory_equal(stopped.out[0], all.out[0], sizeof(int32_t) * (size_t)stopped.n[0]);
  jx_tree_release(params);
}

static void bad_prompts_are_named(void **state) {
  (void)state;
  jx_tree *params = make_params();
  int32_t t[20] = {1, 2, 300};
  const int32_t *p[1] = {t};
  jx_generate_options o = {.max_tokens = 4};
  check_ok(jx_gpt_generate(&cfg, params, 1, p, (int64_t[]){2}, &o, NULL));
  assert_int_not_equal(jx_gpt_generate(&cfg, params, 1, p, (int64_t[]){0}, &o, NULL), JX_OK);
  assert_error_has("prompt 0 is empty");
  assert_int_not_equal(jx_gpt_generate(&cfg, params, 1, p, (int64_t[]){17}, &o, NULL), JX_OK);
  assert_error_has("longer than the model's context of 16");
  assert_int_not_equal(jx_gpt_generate(&cfg, params, 1, p, (int64_t[]){3}, &o, NULL), JX_OK);
  assert_error_has("token 300 at position 2 is not in the vocabulary");
  jx_gpt_config other = cfg;
  other.d_model = 64;
  assert_int_not_equal(jx_gpt_generate(&other, params, 1, p, (int64_t[]){2}, &o, NULL), JX_OK);
  assert_error_has("wte");
  jx_tree_release(params);
}

static void decoding_errors_name_the_input(void **state) {
  (void)state;
  jx_tree *params = make_params();
  int nc = jx_gpt_cache_count(&cfg);
  jx_array *cache[4], *next[4];
  jx_array *pad = jx_zeros(JX_I32, JX_SHAPE(2));
  jx_array *logits =
      jx_gpt_prefill(&cfg, params, jx_zeros(JX_I32, JX_SHAPE(2, 17)), pad, 20, cache);
  assert_true(jx_is_poisoned(logits) && jx_is_poisoned(cache[nc - 1]));
  assert_error_has("the prompt length must be in [1, context 16]");
  logits = jx_gpt_prefill(&cfg, params, jx_zeros(JX_I32, JX_SHAPE(2, 4)), pad, 8, cache);
  check_ok(jx_last_status());
  cache[1] = jx_zeros(JX_F32, JX_SHAPE(2, 9, 4, 8)); /* one slot more than the keys' */
  jx_array *slot = jx_scalar(JX_I32, 4);
  logits = jx_gpt_decode_step(&cfg, params, jx_zeros(JX_I32, JX_SHAPE(2)), pad, slot, cache, next);
  assert_true(jx_is_poisoned(logits) && jx_is_poisoned(next[0]));
  assert_error_has("cache[1] is f32[2,9,4,8], expected f32[2, slots, 4, 8]");
  cache[1] = jx_zeros(JX_F32, JX_SHAPE(2, 8, 4, 8));
  jx_gpt_decode_step(&cfg, params, jx_zeros(JX_F32, JX_SHAPE(2)), pad, slot, cache, next);
  assert_error_has("expected integer tokens [batch]");
  jx_gpt_decode_step(&cfg, params, jx_zeros(JX_I32, JX_SHAPE(2)), pad,
                     jx_zeros(JX_I32, JX_SHAPE(1)), cache, next);
  assert_error_has("expected an integer scalar");
  jx_tree_release(params);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(cache_matches_forward_one_device, setup, teardown),
      cmocka_unit_test_setup_teardown(cache_matches_forward_on_mesh, setup, teardown),
      cmocka_unit_test_setup_teardown(top_k_and_top_p_stay_in_their_sets, setup, teardown),
      cmocka_unit_test_setup_teardown(top_k_draws_follow_the_renormalized_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(cold_sampling_is_greedy_and_seeds_repeat, setup, teardown),
      cmocka_unit_test_setup_teardown(repetition_penalty_lowers_seen_tokens, setup, teardown),
      cmocka_unit_test_setup_teardown(generation_is_deterministic_and_the_same_on_a_mesh, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(stop_strings_end_a_sequence, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_prompts_are_named, setup, teardown),
      cmocka_unit_test_setup_teardown(decoding_errors_name_the_input, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
