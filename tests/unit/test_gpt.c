/* The GPT model (src/nn/gpt.c) against JAX and Optax
 * (tests/golden/gen_gpt.py): jx_gpt_init's draws, logits, loss and every
 * parameter's gradient for fixed weights and tokens, a 10-step AdamW loss
 * trajectory in a jitted train step, the tensor-parallel / FSDP partition
 * specs, and the errors. */
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

#define DIR JX_TEST_DATA "/gpt/"
enum { NP = 36, STEPS = 10, B = 4, T = 16 };

static jx_array *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s.npy", name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* |got - want| <= atol (1 + max|want|) + rtol |want|, elementwise. */
static void assert_close(jx_array *got, jx_array *want, double atol, double rtol,
                         const char *what) {
  assert_false(jx_is_poisoned(got));
  int64_t n = jx_size(want);
  assert_int_equal(jx_size(got), n);
  assert_int_equal(jx_ndim(got), jx_ndim(want));
  double *g = malloc(sizeof *g * (size_t)n), *w = malloc(sizeof *w * (size_t)n);
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  double scale = 1;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(g[i] - w[i]) <= atol * scale + rtol * fabs(w[i]))) {
      fprintf(stderr, "%s element %lld: %.9g, JAX %.9g\n", what, (long long)i, g[i], w[i]);
      fail();
    }
  free(g);
  free(w);
}

static char NAMES[NP][64];
static int nparams;

static void read_names(void) {
  FILE *f = fopen(DIR "params.txt", "r");
  assert_non_null(f);
  nparams = 0;
  while (nparams < NP && fgets(NAMES[nparams], 64, f)) {
    NAMES[nparams][strcspn(NAMES[nparams], "\n")] = 0;
    nparams++;
  }
  fclose(f);
}

static jx_tree *load_params(const char *prefix) {
  char nm[128];
  jx_tree *t = jx_tree_create();
  for (int i = 0; i < nparams; i++) {
    snprintf(nm, sizeof nm, "%s%.60s", prefix, NAMES[i]);
    jx_tree_set(t, NAMES[i], load(nm));
  }
  return t;
}

static jx_gpt_config CFG;

/* tokens [B, T], targets [B, T] from the stored [B, T + 1] */
static void batch(jx_array **tokens, jx_array **targets) {
  jx_array *all = load("tokens");
  *tokens = jx_slice(all, JX_SHAPE(0, 0), JX_SHAPE(B, T), JX_SHAPE());
  *targets = jx_slice(all, JX_SHAPE(0, 1), JX_SHAPE(B, T + 1), JX_SHAPE());
}

static void init_matches_jax(void **state) {
  (void)state;
  jx_tree *t = jx_gpt_init(&CFG, jx_random_key(0), JX_F32);
  assert_non_null(t);
  assert_int_equal(jx_tree_size(t), nparams);
  char nm[128];
  for (int i = 0; i < nparams; i++) {
    assert_string_equal(jx_tree_name(t, i), NAMES[i]);
    snprintf(nm, sizeof nm, "init_%.60s", NAMES[i]);
    /* normal draws within the random family's tolerance (erf_inv differs by
     * a few ulp from XLA's); zeros and ones exactly */
    assert_close(jx_tree_at(t, i), load(nm), 1e-8, 1e-5, nm);
  }
  /* 2 * (4 d^2 + 4 d + 2 * 4 d^2 + 4 d + d + 4 d) + V d + ctx d + 2 d */
  assert_int_equal(jx_tree_numel(t), 2 * (12 * 32 * 32 + 13 * 32) + 256 * 32 + 16 * 32 + 64);
  jx_tree_release(t);
}

static void forward_loss_and_grads_match_jax(void **state) {
  (void)state;
  jx_tree *p = load_params("p_");
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  assert_close(jx_gpt_forward(&CFG, p, tokens), load("logits"), 2e-6, 1e-4, "logits");
  assert_close(jx_gpt_loss(&CFG, p, tokens, targets), load("loss"), 1e-6, 1e-6, "loss");

  jx_fn *loss = jx_gpt_loss_fn(&CFG, p);
  jx_fn *vjp = jx_vjp(loss), *jvjp = jx_jit(vjp, NULL);
  jx_array *in[NP + 3], *out[NP + 3];
  jx_tree_flatten(p, in);
  in[nparams] = tokens;
  in[nparams + 1] = targets;
  in[nparams + 2] = jx_ones(JX_F32, JX_SHAPE());
  for (int jit = 0; jit < 2; jit++) {
    check_ok(jx_call(jit ? jvjp : vjp, in, out));
    assert_close(out[0], load("loss"), 1e-6, 1e-6, "vjp loss");
    for (int i = 0; i < nparams; i++) {
      char nm[128];
      snprintf(nm, sizeof nm, "g_%.60s", NAMES[i]);
      /* gradients span 1e-5..1e-1 (and bk's is 0 in exact arithmetic: a
       * shift of every key leaves the softmax unchanged), so the absolute
       * tolerance is a fraction of the largest gradient, wte's ~0.1 */
      assert_close(out[1 + i], load(nm), 1e-7, 1e-3, nm);
    }
  }
  jx_fn_release(jvjp);
  jx_fn_release(vjp);
  jx_fn_release(loss);
  jx_tree_release(p);
}

static void adamw_trajectory_matches_optax(void **state) {
  (void)state;
  jx_tree *p = load_params("p_");
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  jx_optimizer *opt = jx_optim_adamw(1e-2, 0.9, 0.999, 1e-8, 0.01);
  jx_tree *st = jx_optim_init(opt, p);
  int ns = jx_tree_size(st);
  jx_fn *loss = jx_gpt_loss_fn(&CFG, p);
  jx_fn *step = jx_train_step(loss, p, st, opt); /* value_and_grad + the AdamW update */
  jx_fn *jstep = jx_jit(step, NULL);
  float want[STEPS];
  check_ok(jx_read(load("adamw_loss"), want, sizeof want));
  jx_array **in = malloc(sizeof *in * (size_t)(nparams + ns + 2));
  jx_array **out = malloc(sizeof *out * (size_t)(1 + nparams + ns));
  for (int s = 0; s < STEPS; s++) {
    jx_scope_begin();
    jx_tree_flatten(p, in);
    jx_tree_flatten(st, in + nparams);
    in[nparams + ns] = tokens;
    in[nparams + ns + 1] = targets;
    check_ok(jx_call(jstep, in, out));
    double l = jx_item(out[0]);
    if (!(fabs(l - want[s]) <= 2e-5 * fabs(want[s]))) {
      fprintf(stderr, "step %d: loss %.7f, Optax %.7f\n", s, l, (double)want[s]);
      fail();
    }
    for (int i = 0; i < nparams; i++) jx_tree_set(p, NAMES[i], out[1 + i]);
    for (int i = 0; i < ns; i++) jx_tree_set(st, jx_tree_name(st, i), out[1 + nparams + i]);
    jx_scope_end();
  }
  assert_int_equal(jx_fn_trace_count(jstep), 1);
  const char *some[] = {"wte", "blocks.1.attn.wq", "blocks.1.mlp.proj.b", "ln_f.scale"};
  for (int i = 0; i < 4; i++) {
    char nm[128];
    snprintf(nm, sizeof nm, "adamw_%s", some[i]);
    assert_close(jx_tree_get(p, some[i]), load(nm), 2e-5, 1e-4, nm);
  }
  free(in);
  free(out);
  jx_fn_release(jstep);
  jx_fn_release(step);
  jx_fn_release(loss);
  jx_tree_release(st);
  jx_tree_release(p);
  jx_optim_release(opt);
}

static const char *spec_of(const jx_tree *t, char (*specs)[64], const char *name) {
  for (int i = 0; i < jx_tree_size(t); i++)
    if (!strcmp(jx_tree_name(t, i), name)) return specs[i];
  return NULL;
}

static void partition_specs(void **state) {
  (void)state;
  jx_tree *p = load_params("p_");
  char specs[NP][64];
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  assert_non_null(m);
  check_ok(jx_gpt_param_specs(&CFG, p, m, 0, specs));
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.wq"), "None,model");
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.bq"), "model");
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.wo"), "model,None");
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.bo"), "");
  assert_string_equal(spec_of(p, specs, "blocks.1.mlp.fc.w"), "None,model");
  assert_string_equal(spec_of(p, specs, "blocks.1.mlp.proj.w"), "model,None");
  assert_string_equal(spec_of(p, specs, "wte"), "model,None");
  assert_string_equal(spec_of(p, specs, "wpe"), "");
  assert_string_equal(spec_of(p, specs, "ln_f.scale"), "");
  check_ok(jx_gpt_param_specs(&CFG, p, m, 1, specs));
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.wq"), "data,model");
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.wo"), "model,data");
  assert_string_equal(spec_of(p, specs, "wte"), "model,data");
  assert_string_equal(spec_of(p, specs, "wpe"), "data,None");
  /* every spec is one the mesh takes for its parameter, and the model
   * computes the same logits from parameters laid out that way */
  jx_tree *sharded = jx_tree_create();
  for (int i = 0; i < nparams; i++) {
    jx_sharding *s = jx_sharding_create(m, specs[i]);
    assert_non_null(s);
    jx_tree_set(sharded, NAMES[i], jx_device_put(jx_tree_at(p, i), s));
    jx_sharding_release(s);
  }
  check_ok(jx_last_status());
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  assert_close(jx_gpt_forward(&CFG, sharded, tokens), load("logits"), 2e-6, 1e-4, "sharded logits");
  /* an axis that does not divide a dim leaves it whole */
  jx_mesh *m3 = jx_mesh_create(JX_SHAPE(3), (const char *[]){"model"});
  assert_non_null(m3);
  check_ok(jx_gpt_param_specs(&CFG, p, m3, 1, specs));
  assert_string_equal(spec_of(p, specs, "blocks.0.attn.wq"), "");
  jx_mesh_release(m3);
  jx_tree_release(sharded);
  jx_mesh_release(m);
  jx_tree_release(p);
}

static void errors(void **state) {
  (void)state;
  jx_tree *p = load_params("p_");
  jx_array *tokens, *targets;
  batch(&tokens, &targets);
  jx_array *r = jx_gpt_forward(&CFG, p, jx_zeros(JX_I32, JX_SHAPE(2, 17)));
  assert_true(jx_is_poisoned(r));
  assert_non_null(strstr(jx_last_error(), "jx_gpt_forward: tokens i32[2,17]"));
  assert_non_null(strstr(jx_last_error(), "T <= context 16"));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_gpt_forward(&CFG, p, jx_zeros(JX_F32, JX_SHAPE(2, 3)))));
  assert_non_null(strstr(jx_last_error(), "expected integers [batch, T]"));
  jx_clear_error();
  jx_gpt_config bad = CFG;
  bad.n_heads = 5;
  assert_null(jx_gpt_init(&bad, jx_random_key(0), JX_F32));
  assert_non_null(strstr(jx_last_error(), "n_heads must divide d_model"));
  jx_clear_error();
  jx_tree_set(p, "blocks.1.mlp.fc.w", jx_zeros(JX_F32, JX_SHAPE(32, 64)));
  assert_true(jx_is_poisoned(jx_gpt_loss(&CFG, p, tokens, targets)));
  assert_non_null(strstr(jx_last_error(), "jx_mlp 'blocks.1.mlp': parameter "
                                          "'blocks.1.mlp.fc.b' is f32[128], expected a float "
                                          "array [64]"));
  jx_clear_error();
  jx_tree *q = jx_tree_create();
  assert_true(jx_is_poisoned(jx_gpt_forward(&CFG, q, tokens)));
  assert_non_null(strstr(jx_last_error(), "parameter 'wte' is missing"));
  jx_clear_error();
  jx_tree_release(q);
  jx_tree_release(p);
}

int main(void) {
  jx_set_cpu_device_count(4);
  CFG = jx_gpt_config_default();
  read_names();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(init_matches_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(forward_loss_and_grads_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(adamw_trajectory_matches_optax, setup, teardown),
      cmocka_unit_test_setup_teardown(partition_specs, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return r;
}
