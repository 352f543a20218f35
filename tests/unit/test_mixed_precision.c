/* Mixed precision (bf16 compute, f32 master weights and optimizer state)
 * against JAX + Optax (tests/golden/gen_mixed_precision.py: the tiny GPT of
 * gen_gpt.py with its parameters cast to bf16 inside the loss), and the
 * identities: parameters, gradients and optimizer state stay f32; a
 * compute dtype of f32 is jx_train_step bit for bit; the bf16 run's losses
 * track the f32 run's.
 *
 * Tolerances (measured errors in brackets). bf16 keeps 8 significant
 * bits: one rounding is off by up to 2^-9 (0.2 %). Both sides round every
 * bf16 op's result (the generator turns XLA's excess precision off) and sum
 * matmuls in f32, so the forward agrees closely: the loss to 1e-6 relative
 * [9e-8], while the f32 loss of the same weights is 9e-6 away. The
 * gradients differ more, and not by jx's doing: XLA's CPU backend sums a
 * bf16 reduction (a bias gradient: the transpose of a broadcast over 64
 * rows) in bf16, where jx sums in f32 and rounds once (a 64-row bf16 sum in
 * XLA is 0.7 % away from the exactly rounded sum). So vector gradients are
 * compared to 3 % of their largest element, 0.6 % on average [2 %, 0.37 %],
 * matrix gradients (f32-summed GEMMs on both sides) to 1 %, 0.1 % on
 * average [0.63 %, 0.042 %]. AdamW at lr 1e-2 moves an element by about lr
 * a step whatever its gradient's size, so where a gradient is near 0 the
 * two sides' rounding can flip a step's sign: after 5 steps parameters are
 * compared to 4e-2 absolute, 2e-3 on average [2e-2, 5.6e-4], and the losses
 * to 1.5e-3 relative [5.9e-4] (the bf16-f32 gap in JAX is 1.9e-3 by step
 * 5). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

#define GPT_DIR JX_TEST_DATA "/gpt/"
#define MP_DIR  JX_TEST_DATA "/mixed_precision/"
enum { NP = 36, STEPS = 5, B = 4, T = 16 };

static jx_array *load(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s%s.npy", dir, name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* max |got - want| / max(|want|, floor) over the elements (and in *mean the
 * mean |got - want| on the same scale); got must be f32. */
static double rel_err(jx_array *got, jx_array *want, double floor_, double *mean) {
  assert_false(jx_is_poisoned(got));
  assert_int_equal(jx_dtype_of(got), JX_F32);
  int64_t n = jx_size(want);
  assert_int_equal(jx_size(got), n);
  double *g = malloc(sizeof *g * (size_t)n), *w = malloc(sizeof *w * (size_t)n);
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  double scale = floor_, err = 0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; i++) {
    err = fmax(err, fabs(g[i] - w[i]));
    sum += fabs(g[i] - w[i]);
  }
  free(g);
  free(w);
  if (mean) *mean = sum / (double)n / scale;
  return err / scale;
}

/* rel_err's maximum within tol and its mean within mean_tol. */
static void expect_close(jx_array *got, jx_array *want, double floor_, double tol, double mean_tol,
                         const char *what) {
  double m, e = rel_err(got, want, floor_, &m);
  if (!(e <= tol && m <= mean_tol)) {
    fprintf(stderr, "%s: error %.3g (mean %.3g) of the largest value, tolerance %.3g (%.3g)\n",
            what, e, m, tol, mean_tol);
    fail();
  }
}

static char NAMES[NP][64];
static int nparams;
static jx_gpt_config CFG; /* the default (tiny) GPT, no compute dtype */

static void read_names(void) {
  FILE *f = fopen(GPT_DIR "params.txt", "r");
  assert_non_null(f);
  nparams = 0;
  while (nparams < NP && fgets(NAMES[nparams], 64, f)) {
    NAMES[nparams][strcspn(NAMES[nparams], "\n")] = 0;
    nparams++;
  }
  fclose(f);
}

static jx_tree *load_params(void) {
  char nm[128];
  jx_tree *t = jx_tree_create();
  for (int i = 0; i < nparams; i++) {
    snprintf(nm, sizeof nm, "p_%.60s", NAMES[i]);
    jx_tree_set(t, NAMES[i], load(GPT_DIR, nm));
  }
  return t;
}

static void batch(jx_array **tokens, jx_array **targets) {
  jx_array *all = load(GPT_DIR, "tokens");
  *tokens = jx_slice(all, JX_SHAPE(0, 0), JX_SHAPE(B, T), JX_SHAPE());
  *targets = jx_slice(all, JX_SHAPE(0, 1), JX_SHAPE(B, T + 1), JX_SHAPE());
}

static jx_gpt_config bf16_config(void) {
  jx_gpt_config c = CFG;
  c.compute_dtype = JX_BF16;
  return c;
}

static void tree_cast_casts_floats_only(void **state) {
  (void)state;
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "w", jx_full(JX_F32, JX_SHAPE(), 1.00390625)); /* 1 + 2^-8: a tie in bf16 */
  jx_tree_set(t, "count", jx_full(JX_I32, JX_SHAPE(), 7));
  jx_tree_set(t, "h", jx_full(JX_BF16, JX_SHAPE(2), 3));
  jx_tree *c = jx_tree_cast(t, JX_BF16);
  assert_non_null(c);
  assert_int_equal(jx_tree_size(c), 3);
  assert_string_equal(jx_tree_name(c, 1), "count");
  assert_int_equal(jx_dtype_of(jx_tree_at(c, 0)), JX_BF16);
  assert_true(jx_item(jx_tree_at(c, 0)) == 1.0);        /* rounded to even */
  assert_ptr_equal(jx_tree_at(c, 1), jx_tree_at(t, 1)); /* integers untouched */
  assert_ptr_equal(jx_tree_at(c, 2), jx_tree_at(t, 2)); /* already bf16: no op */
  jx_tree_release(c);
  jx_tree_release(t);
}

/* The bf16-compute loss and gradients at the stored weights (eagerly; the
 * jitted step below covers the compiled path): the gradients arrive f32,
 * through the casts. */
static void loss_and_grads_match_jax(void **state) {
  (void)state;
  jx_tree *p = load_params();
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  jx_gpt_config cfg = bf16_config();
  jx_array *logits = jx_gpt_forward(&cfg, p, tokens);
  assert_int_equal(jx_dtype_of(logits), JX_BF16);
  jx_fn *loss = jx_gpt_loss_fn(&cfg, p);
  jx_fn *vg = jx_value_and_grad_first(loss, nparams, 0);
  jx_array *in[NP + 2], *out[NP + 1];
  jx_tree_flatten(p, in);
  in[nparams] = tokens;
  in[nparams + 1] = targets;
  check_ok(jx_call(vg, in, out));
  expect_close(out[0], load(MP_DIR, "loss"), 1e-30, 1e-6, 1e-6, "loss");
  for (int i = 0; i < nparams; i++) {
    char nm[128];
    snprintf(nm, sizeof nm, "g_%.60s", NAMES[i]);
    /* floor 1e-3: bk's gradient is 0 in exact arithmetic (a shift of every
     * key leaves the softmax unchanged), rounding noise elsewhere */
    if (jx_ndim(out[1 + i]) == 2)
      expect_close(out[1 + i], load(MP_DIR, nm), 1e-3, 1e-2, 1e-3, nm);
    else
      expect_close(out[1 + i], load(MP_DIR, nm), 1e-3, 3e-2, 6e-3, nm);
  }
  /* bf16 is not f32: the same weights in f32 give another loss */
  assert_true(fabs(jx_item(out[0]) - jx_item(load(GPT_DIR, "loss"))) > 1e-6);
  jx_fn_release(vg);
  jx_fn_release(loss);
  jx_tree_release(p);
}

/* STEPS AdamW steps from the stored weights, jitted or eager; losses[s]
 * before each. o == NULL: jx_train_step. The parameters and state are left
 * in *pp, *sp. (The f32 runs are eager: one compile less keeps the test
 * fast on a cold kernel cache.) */
static void run_steps(const jx_gpt_config *cfg, const jx_train_step_options *o, int jit,
                      float *losses, jx_tree **pp, jx_tree **sp) {
  jx_tree *p = load_params();
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  jx_optimizer *opt = jx_optim_adamw(1e-2, 0.9, 0.999, 1e-8, 0.01);
  jx_tree *st = jx_optim_init(opt, p);
  int ns = jx_tree_size(st);
  jx_fn *loss = jx_gpt_loss_fn(cfg, p);
  jx_fn *step = o ? jx_train_step_with(loss, p, st, opt, o) : jx_train_step(loss, p, st, opt);
  assert_non_null(step);
  jx_fn *jstep = jit ? jx_jit(step, NULL) : NULL;
  jx_array **in = malloc(sizeof *in * (size_t)(nparams + ns + 2));
  jx_array **out = malloc(sizeof *out * (size_t)(1 + nparams + ns));
  for (int s = 0; s < STEPS; s++) {
    jx_scope_begin();
    jx_tree_flatten(p, in);
    jx_tree_flatten(st, in + nparams);
    in[nparams + ns] = tokens;
    in[nparams + ns + 1] = targets;
    check_ok(jx_call(jit ? jstep : step, in, out));
    assert_int_equal(jx_dtype_of(out[0]), JX_F32);
    losses[s] = (float)jx_item(out[0]);
    for (int i = 0; i < nparams; i++) jx_tree_set(p, NAMES[i], out[1 + i]);
    for (int i = 0; i < ns; i++) jx_tree_set(st, jx_tree_name(st, i), out[1 + nparams + i]);
    jx_scope_end();
  }
  free(in);
  free(out);
  jx_fn_release(jstep);
  jx_fn_release(step);
  jx_fn_release(loss);
  jx_optim_release(opt);
  *pp = p;
  *sp = st;
}

/* master weights and moments f32, the step count i32 */
static void assert_master_copies_f32(const jx_tree *p, const jx_tree *st) {
  for (int i = 0; i < jx_tree_size(p); i++) assert_int_equal(jx_dtype_of(jx_tree_at(p, i)), JX_F32);
  for (int i = 0; i < jx_tree_size(st); i++)
    assert_int_equal(jx_dtype_of(jx_tree_at(st, i)),
                     strcmp(jx_tree_name(st, i), "count") ? JX_F32 : JX_I32);
}

static void check_trajectory(const float *losses, const jx_tree *p, const char *route) {
  float want[STEPS];
  check_ok(jx_read(load(MP_DIR, "adamw_loss"), want, sizeof want));
  for (int s = 0; s < STEPS; s++) {
    if (!(fabs(losses[s] - want[s]) <= (s ? 1.5e-3 : 1e-6) * want[s])) {
      fprintf(stderr, "%s, step %d: loss %.7f, Optax %.7f\n", route, s, (double)losses[s],
              (double)want[s]);
      fail();
    }
  }
  const char *kept[] = {"wte", "blocks.0.attn.wq", "blocks.1.mlp.fc.w", "blocks.1.mlp.proj.b",
                        "ln_f.scale"};
  for (int i = 0; i < 5; i++) {
    char nm[128];
    snprintf(nm, sizeof nm, "adamw_%s", kept[i]);
    /* floor 1: absolute tolerances (the values are O(0.02)..O(1)) */
    expect_close(jx_tree_get(p, kept[i]), load(MP_DIR, nm), 1, 4e-2, 2e-3, nm);
  }
}

/* Both ways in: the GPT config's compute dtype, and the train step's
 * option on a plain loss. */
static void adamw_trajectory_matches_optax(void **state) {
  (void)state;
  float losses[STEPS];
  jx_tree *p, *st;
  jx_gpt_config cfg = bf16_config();
  run_steps(&cfg, NULL, 1, losses, &p, &st);
  assert_master_copies_f32(p, st);
  check_trajectory(losses, p, "gpt config compute_dtype");
  jx_tree_release(p);
  jx_tree_release(st);
  jx_train_step_options o = {.compute_dtype = JX_BF16};
  run_steps(&CFG, &o, 1, losses, &p, &st);
  assert_master_copies_f32(p, st);
  check_trajectory(losses, p, "train step compute_dtype");
  jx_tree_release(p);
  jx_tree_release(st);
}

static void bf16_tracks_f32(void **state) {
  (void)state;
  float f32[STEPS], same[STEPS], bf16[STEPS];
  jx_tree *p32, *s32, *psame, *ssame, *p16, *s16;
  run_steps(&CFG, NULL, 0, f32, &p32, &s32);
  /* a compute dtype equal to the parameters' is no cast at all */
  jx_train_step_options o = {.compute_dtype = JX_F32};
  run_steps(&CFG, &o, 0, same, &psame, &ssame);
  for (int s = 0; s < STEPS; s++) assert_true(same[s] == f32[s]);
  for (int i = 0; i < nparams; i++)
    expect_close(jx_tree_at(psame, i), jx_tree_at(p32, i), 1e-30, 0, 0, "f32 compute dtype");
  /* JAX's f32 run is the oracle of the f32 side (test_gpt checks it to 2e-5) */
  float want[STEPS];
  check_ok(jx_read(load(MP_DIR, "f32_adamw_loss"), want, sizeof want));
  jx_gpt_config cfg = bf16_config();
  run_steps(&cfg, NULL, 1, bf16, &p16, &s16);
  for (int s = 0; s < STEPS; s++) {
    assert_true(fabs(f32[s] - want[s]) <= 2e-5 * want[s]);
    /* bf16 rounding moves the loss by ~1e-4 at the start and, as the
     * trajectories part, ~2e-3 after 5 steps (JAX: 0.0081 / 4.30) */
    if (!(fabs(bf16[s] - f32[s]) <= 5e-3 * f32[s])) {
      fprintf(stderr, "step %d: bf16 loss %.6f, f32 loss %.6f\n", s, (double)bf16[s],
              (double)f32[s]);
      fail();
    }
  }
  assert_true(bf16[0] != f32[0]);             /* the casts are there */
  assert_true(bf16[STEPS - 1] < bf16[0] - 1); /* and it trains */
  jx_tree_release(p32);
  jx_tree_release(s32);
  jx_tree_release(psame);
  jx_tree_release(ssame);
  jx_tree_release(p16);
  jx_tree_release(s16);
}

static void errors(void **state) {
  (void)state;
  jx_tree *p = load_params();
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  assert_null(jx_tree_cast(p, JX_I32));
  assert_non_null(strstr(jx_last_error(), "jx_tree_cast: i32 is not a float dtype"));
  jx_clear_error();
  assert_null(jx_tree_cast(NULL, JX_BF16));
  assert_non_null(strstr(jx_last_error(), "jx_tree_cast: the tree is NULL"));
  jx_clear_error();
  jx_gpt_config bad = CFG;
  bad.compute_dtype = JX_I8;
  assert_true(jx_is_poisoned(jx_gpt_loss(&bad, p, tokens, targets)));
  assert_non_null(strstr(jx_last_error(), "compute_dtype i8"));
  jx_clear_error();
  jx_optimizer *opt = jx_optim_sgd(0.1, 0);
  jx_tree *st = jx_optim_init(opt, p);
  jx_fn *loss = jx_gpt_loss_fn(&CFG, p);
  jx_train_step_options o = {.compute_dtype = JX_U16};
  assert_null(jx_train_step_with(loss, p, st, opt, &o));
  assert_non_null(strstr(jx_last_error(), "jx_train_step: compute dtype u16 is not a float"));
  jx_clear_error();
  jx_fn_release(loss);
  jx_tree_release(st);
  jx_optim_release(opt);
  jx_tree_release(p);
}

int main(void) {
  CFG = jx_gpt_config_default();
  read_names();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(tree_cast_casts_floats_only, setup, teardown),
      cmocka_unit_test_setup_teardown(loss_and_grads_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(adamw_trajectory_matches_optax, setup, teardown),
      cmocka_unit_test_setup_teardown(bf16_tracks_f32, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return r;
}
