/* Layers, initializers and losses of include/jx/nn.h against JAX
 * (tests/golden/gen_nn.py): each layer's forward eagerly, under jit and
 * under vmap, and the gradients of sum(layer(x) * r) with respect to every
 * parameter and the input, through jx_vjp (jitted too) and
 * jx_value_and_grad; initializers bit for bit against jax.nn.initializers
 * and their statistics against the formulas; the errors. */
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

#define DIR JX_TEST_DATA "/nn/"
enum { MAXP = 24 };

typedef enum {
  DENSE,
  EMBED,
  LN,
  RMS,
  ATTN,
  MLP,
  BLOCK,
  CONV,
  MAXPOOL,
  AVGPOOL,
  DROPOUT,
  XENT,
  MSE,
  ACC
} kind;

typedef struct {
  const char *name;
  kind k;
  int heads;       /* ATTN, BLOCK */
  double eps;      /* LN, RMS, BLOCK; label smoothing for XENT */
  int stride;      /* CONV */
  const char *pad; /* CONV */
  int has_aux, xdiff, lowp;
} nn_case;

static const nn_case CASES[] = {
    {"dense", DENSE, 0, 0, 0, NULL, 0, 1, 0},
    {"dense_nobias", DENSE, 0, 0, 0, NULL, 0, 1, 0},
    {"dense_bf16", DENSE, 0, 0, 0, NULL, 0, 1, 1},
    {"embedding", EMBED, 0, 0, 0, NULL, 0, 0, 0},
    {"layer_norm", LN, 0, 1e-5, 0, NULL, 0, 1, 0},
    {"layer_norm_bf16", LN, 0, 1e-5, 0, NULL, 0, 1, 1},
    {"rms_norm", RMS, 0, 1e-6, 0, NULL, 0, 1, 0},
    {"attention", ATTN, 4, 0, 0, NULL, 0, 1, 0},
    {"attention_rank2", ATTN, 2, 0, 0, NULL, 0, 1, 0},
    {"attention_bf16", ATTN, 2, 0, 0, NULL, 0, 1, 1},
    {"mlp", MLP, 0, 0, 0, NULL, 0, 1, 0},
    {"block", BLOCK, 4, 1e-5, 0, NULL, 0, 1, 0},
    {"conv2d_same_s2", CONV, 0, 0, 2, "SAME", 0, 1, 0},
    {"conv2d_valid", CONV, 0, 0, 1, "VALID", 0, 1, 0},
    {"max_pool", MAXPOOL, 0, 0, 0, NULL, 0, 1, 0},
    {"avg_pool_same", AVGPOOL, 0, 0, 0, NULL, 0, 1, 0},
    {"dropout", DROPOUT, 0, 0, 0, NULL, 1, 1, 0},
    {"xent", XENT, 0, 0, 0, NULL, 1, 1, 0},
    {"xent_smooth", XENT, 0, 0.1, 0, NULL, 1, 1, 0},
    {"xent_rank3", XENT, 0, 0, 0, NULL, 1, 1, 0},
    {"mse", MSE, 0, 0, 0, NULL, 1, 1, 0},
    {"accuracy", ACC, 0, 0, 0, NULL, 1, 1, 0},
};

static jx_array *forward(const nn_case *c, const jx_tree *p, jx_array *x, jx_array *aux) {
  switch (c->k) {
  case DENSE: return jx_dense(p, "", x);
  case EMBED: return jx_embedding(p, "", x);
  case LN: return jx_layer_norm(p, "", x, c->eps);
  case RMS: return jx_rms_norm(p, "", x, c->eps);
  case ATTN: return jx_causal_self_attention(p, "", x, c->heads);
  case MLP: return jx_mlp(p, "", x);
  case BLOCK: return jx_transformer_block(p, "", x, c->heads, c->eps);
  case CONV: return jx_conv2d(p, "", x, JX_SHAPE(c->stride, c->stride), c->pad);
  case MAXPOOL: return jx_max_pool(x, JX_SHAPE(2, 2), JX_SHAPE(2, 2), "VALID");
  case AVGPOOL: return jx_avg_pool(x, JX_SHAPE(3, 3), JX_SHAPE(1, 1), "SAME");
  case DROPOUT: return jx_dropout(aux, x, 0.3, 1);
  case XENT: return jx_softmax_cross_entropy(x, aux, c->eps);
  case MSE: return jx_mse(x, aux);
  case ACC: return jx_accuracy(x, aux);
  }
  return NULL;
}

static jx_array *load_path(const char *path) {
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

static jx_array *load(const char *c, const char *name) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s/%s.npy", c, name);
  return load_path(path);
}

/* got ~ want: |g - w| <= atol (1 + max|w|) + rtol |w| elementwise, in f64. */
static void assert_close(jx_array *got, jx_array *want, double atol, double rtol, const char *c,
                         const char *what) {
  assert_false(jx_is_poisoned(got));
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  if (gs.rank != ws.rank) fprintf(stderr, "%s %s: rank %d, JAX %d\n", c, what, gs.rank, ws.rank);
  assert_int_equal(gs.rank, ws.rank);
  for (int i = 0; i < gs.rank; i++) assert_int_equal(gs.dims[i], ws.dims[i]);
  assert_int_equal(jx_dtype_of(got), jx_dtype_of(want));
  int64_t n = jx_size(want);
  double *g = malloc(sizeof *g * (size_t)(n ? n : 1)), *w = malloc(sizeof *w * (size_t)(n ? n : 1));
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  double scale = 1;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(w[i]));
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(g[i] - w[i]) <= atol * scale + rtol * fabs(w[i]))) {
      fprintf(stderr, "%s %s element %lld: %.9g, JAX %.9g\n", c, what, (long long)i, g[i], w[i]);
      fail();
    }
  free(g);
  free(w);
}

typedef struct {
  const nn_case *c;
  const jx_tree *like; /* the parameter names */
} body_ctx;

/* in: params..., x, [aux] -> y */
static void fwd_body(void *arg, jx_array *const *in, jx_array **out) {
  body_ctx *b = arg;
  int np = jx_tree_size(b->like);
  jx_tree *p = jx_tree_unflatten(b->like, in);
  out[0] = forward(b->c, p, in[np], b->c->has_aux ? in[np + 1] : NULL);
  jx_tree_release(p);
}

typedef struct {
  const nn_case *c;
  const jx_tree *params;
  jx_array *aux;
} vmap_ctx;

/* in: x -> y */
static void fwd_x_body(void *arg, jx_array *const *in, jx_array **out) {
  vmap_ctx *v = arg;
  out[0] = forward(v->c, v->params, in[0], v->aux);
}

/* in: params..., x, [aux], r -> sum(y * r) in f32 */
static void loss_body(void *arg, jx_array *const *in, jx_array **out) {
  body_ctx *b = arg;
  int np = jx_tree_size(b->like), nx = 1 + b->c->has_aux;
  jx_tree *p = jx_tree_unflatten(b->like, in);
  jx_array *y = forward(b->c, p, in[np], b->c->has_aux ? in[np + 1] : NULL);
  out[0] = jx_sum(jx_astype(jx_mul(y, in[np + nx]), JX_F32), JX_AXES(), 0);
  jx_tree_release(p);
}

static void run_case(const nn_case *c) {
  char path[512], line[128];
  double atol = c->lowp ? 2e-2 : 1e-5, rtol = c->lowp ? 2e-2 : 1e-4;
  jx_tree *p = jx_tree_create(), *want_g = jx_tree_create();
  snprintf(path, sizeof path, DIR "%s/params.txt", c->name);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    char nm[160];
    snprintf(nm, sizeof nm, "p_%s", line);
    jx_tree_set(p, line, load(c->name, nm));
    snprintf(nm, sizeof nm, "g_%s", line);
    jx_tree_set(want_g, line, load(c->name, nm));
  }
  fclose(f);
  int np = jx_tree_size(p), nx = 1 + c->has_aux;
  jx_array *in[MAXP], *out[2 * MAXP];
  assert_true(np + nx + 2 <= MAXP);
  jx_tree_flatten(p, in);
  in[np] = load(c->name, "x");
  if (c->has_aux) in[np + 1] = load(c->name, "aux");
  in[np + nx] = load(c->name, "r");
  jx_array *want_y = load(c->name, "y");

  /* eagerly */
  assert_close(forward(c, p, in[np], c->has_aux ? in[np + 1] : NULL), want_y, atol, rtol, c->name,
               "eager forward");

  body_ctx b = {c, p};
  jx_fn *fwd = jx_fn_create(c->name, np + nx, 1, fwd_body, &b);
  /* jitted */
  jx_fn *jf = jx_jit(fwd, NULL);
  check_ok(jx_call(jf, in, out));
  assert_close(out[0], want_y, atol, rtol, c->name, "jit forward");
  /* vmapped over a new leading axis of x, with the parameters and aux
   * closed over (concrete arrays a traced body reads as constants) */
  vmap_ctx vc = {c, p, c->has_aux ? in[np + 1] : NULL};
  jx_fn *fx = jx_fn_create(c->name, 1, 1, fwd_x_body, &vc);
  jx_fn *vf = jx_vmap(fx, JX_AXES(0), JX_AXES(0));
  check_ok(jx_call(vf, (jx_array *[]){load(c->name, "xb")}, out));
  assert_close(out[0], load(c->name, "yb"), atol, rtol, c->name, "vmap forward");
  jx_fn_release(vf);
  jx_fn_release(fx);

  /* gradients through vjp (every input; x's only when it is a float) */
  jx_fn *loss = jx_fn_create(c->name, np + nx + 1, 1, loss_body, &b);
  jx_fn *vjp = jx_vjp(loss), *jvjp = jx_jit(vjp, NULL);
  jx_array *want_loss = load(c->name, "loss");
  for (int jit = 0; jit < 2; jit++) {
    in[np + nx + 1] = jx_ones(JX_F32, JX_SHAPE());
    check_ok(jx_call(jit ? jvjp : vjp, in, out));
    const char *mode = jit ? "jit vjp" : "vjp";
    char what[200];
    snprintf(what, sizeof what, "%s loss", mode);
    assert_close(out[0], want_loss, atol, rtol, c->name, what);
    for (int i = 0; i < np; i++) {
      snprintf(what, sizeof what, "%s grad %s", mode, jx_tree_name(p, i));
      assert_close(out[1 + i], jx_tree_at(want_g, i), atol, rtol, c->name, what);
    }
    if (c->xdiff) {
      snprintf(what, sizeof what, "%s grad x", mode);
      assert_close(out[1 + np], load(c->name, "gx"), atol, rtol, c->name, what);
    }
  }
  /* jx_value_and_grad over the parameters and x, where argnums fit */
  if (np + c->xdiff <= JX_MAX_RANK && np + c->xdiff > 0) {
    jx_axes argnums = {np + c->xdiff, {0}};
    for (int i = 0; i < argnums.n; i++) argnums.v[i] = i;
    jx_fn *vg = jx_value_and_grad(loss, argnums, 0);
    check_ok(jx_call(vg, in, out));
    assert_close(out[0], want_loss, atol, rtol, c->name, "value_and_grad loss");
    for (int i = 0; i < np; i++)
      assert_close(out[1 + i], jx_tree_at(want_g, i), atol, rtol, c->name, jx_tree_name(p, i));
    if (c->xdiff) assert_close(out[1 + np], load(c->name, "gx"), atol, rtol, c->name, "grad x");
    jx_fn_release(vg);
  }
  jx_fn_release(jvjp);
  jx_fn_release(vjp);
  jx_fn_release(loss);
  jx_fn_release(jf);
  jx_fn_release(fwd);
  jx_tree_release(p);
  jx_tree_release(want_g);
}

static void layers_match_jax(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
    jx_scope_begin();
    run_case(&CASES[i]);
    jx_scope_end();
  }
}

/* ---- initializers ---- */

typedef jx_array *(*init_fn)(jx_array *key, jx_dtype dt, jx_shape s);
static jx_array *normal05(jx_array *k, jx_dtype dt, jx_shape s) {
  return jx_init_normal(k, dt, s, 0.05);
}
static jx_array *trunc05(jx_array *k, jx_dtype dt, jx_shape s) {
  return jx_init_truncated_normal(k, dt, s, 0.05);
}
static jx_array *vs_out(jx_array *k, jx_dtype dt, jx_shape s) {
  return jx_init_variance_scaling(k, dt, s, 0.5, "fan_out", "normal");
}
static jx_array *vs_geo(jx_array *k, jx_dtype dt, jx_shape s) {
  return jx_init_variance_scaling(k, dt, s, 3.0, "fan_geo_avg", "uniform");
}

/* The order of gen_nn.py's INITS (key 100 + i). */
/* Uniform draws are bit arithmetic and match JAX's bits; normal ones go
 * through erf_inv, whose implementations differ by a few ulp (as in the
 * random family's goldens). */
static const struct {
  const char *name;
  init_fn fn;
  int exact;
} INITS[] = {
    {"glorot_uniform", jx_init_glorot_uniform, 1},
    {"glorot_normal", jx_init_glorot_normal, 0},
    {"lecun_uniform", jx_init_lecun_uniform, 1},
    {"lecun_normal", jx_init_lecun_normal, 0},
    {"he_uniform", jx_init_he_uniform, 1},
    {"he_normal", jx_init_he_normal, 0},
    {"normal", normal05, 0},
    {"truncated_normal", trunc05, 0},
    {"vs_fan_out_normal", vs_out, 0},
    {"vs_fan_geo_avg_uniform", vs_geo, 1},
};

static void assert_same_bits(jx_array *got, jx_array *want, const char *what) {
  assert_false(jx_is_poisoned(got));
  assert_int_equal(jx_dtype_of(got), jx_dtype_of(want));
  assert_int_equal(jx_size(got), jx_size(want));
  size_t n = (size_t)jx_size(want) * jx_dtype_size(jx_dtype_of(want));
  unsigned char *g = malloc(n), *w = malloc(n);
  check_ok(jx_read(got, g, n));
  check_ok(jx_read(want, w, n));
  if (memcmp(g, w, n)) {
    fprintf(stderr, "%s differs from jax.nn.initializers\n", what);
    fail();
  }
  free(g);
  free(w);
}

static void initializers_match_jax_bits(void **state) {
  (void)state;
  char path[512];
  for (size_t i = 0; i < sizeof INITS / sizeof *INITS; i++) {
    jx_array *key = jx_random_key(100 + i);
    static const struct {
      const char *suffix;
      jx_dtype dt;
      jx_shape s;
    } shapes[3] = {{"dense", JX_F32, {2, {64, 32}}},
                   {"conv", JX_F32, {4, {3, 3, 8, 16}}},
                   {"bf16", JX_BF16, {2, {16, 8}}}};
    for (int j = 0; j < 3; j++) {
      snprintf(path, sizeof path, DIR "init/%s_%s.npy", INITS[i].name, shapes[j].suffix);
      jx_array *got = INITS[i].fn(key, shapes[j].dt, shapes[j].s), *want = load_path(path);
      if (INITS[i].exact)
        assert_same_bits(got, want, path);
      else /* within the random family's tolerance for normals */
        assert_close(got, want, shapes[j].dt == JX_BF16 ? 1e-3 : 1e-7,
                     shapes[j].dt == JX_BF16 ? 8e-3 : 1e-5, path, "init");
    }
  }
}

/* mean, std, min and max of a large draw against the distribution's */
static void stats(jx_array *a, double *mean, double *std, double *lo, double *hi) {
  int64_t n = jx_size(a);
  float *v = malloc(sizeof *v * (size_t)n);
  check_ok(jx_read(a, v, sizeof *v * (size_t)n));
  double s = 0, s2 = 0;
  *lo = INFINITY;
  *hi = -INFINITY;
  for (int64_t i = 0; i < n; i++) {
    s += v[i];
    s2 += (double)v[i] * v[i];
    *lo = fmin(*lo, v[i]);
    *hi = fmax(*hi, v[i]);
  }
  *mean = s / (double)n;
  *std = sqrt(s2 / (double)n - *mean * *mean);
  free(v);
}

static void initializer_statistics(void **state) {
  (void)state;
  jx_array *key = jx_random_key(5);
  double m, sd, lo, hi;
  /* dense [fan_in 400, fan_out 300]; conv [3, 3, 32, 64]: fans 288 and 576 */
  struct {
    init_fn fn;
    jx_shape s;
    double want_std, bound; /* bound: |x| <= bound */
  } t[] = {
      {jx_init_glorot_uniform, JX_SHAPE(400, 300), sqrt(2.0 / 700), sqrt(6.0 / 700)},
      {jx_init_glorot_normal, JX_SHAPE(400, 300), sqrt(2.0 / 700),
       2 * sqrt(2.0 / 700) / 0.8796256610342398},
      {jx_init_he_uniform, JX_SHAPE(3, 3, 32, 64), sqrt(2.0 / 288), sqrt(6.0 / 288)},
      {jx_init_he_normal, JX_SHAPE(3, 3, 32, 64), sqrt(2.0 / 288),
       2 * sqrt(2.0 / 288) / 0.8796256610342398},
      {jx_init_lecun_normal, JX_SHAPE(400, 300), sqrt(1.0 / 400),
       2 * sqrt(1.0 / 400) / 0.8796256610342398},
      {jx_init_lecun_uniform, JX_SHAPE(3, 3, 32, 64), sqrt(1.0 / 288), sqrt(3.0 / 288)},
      {normal05, JX_SHAPE(400, 300), 0.05, INFINITY},
      {trunc05, JX_SHAPE(400, 300), 0.05 * 0.8796256610342398, 0.1},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    stats(t[i].fn(key, JX_F32, t[i].s), &m, &sd, &lo, &hi);
    if (!(fabs(m) < 0.02 * t[i].want_std && fabs(sd / t[i].want_std - 1) < 0.01 &&
          lo >= -t[i].bound && hi <= t[i].bound)) {
      fprintf(stderr, "initializer %zu: mean %g std %g (want %g) range [%g, %g] (bound %g)\n", i, m,
              sd, t[i].want_std, lo, hi, t[i].bound);
      fail();
    }
    /* the bound is nearly reached: the draw fills its support */
    if (isfinite(t[i].bound)) assert_true(hi > 0.95 * t[i].bound && lo < -0.95 * t[i].bound);
  }
}

/* ---- layers' init functions: names, shapes, dtypes ---- */

static void assert_param(const jx_tree *t, const char *name, jx_dtype dt, jx_shape s) {
  jx_array *a = jx_tree_get(t, name);
  if (!a) fprintf(stderr, "no parameter %s\n", name);
  assert_non_null(a);
  assert_int_equal(jx_dtype_of(a), dt);
  jx_shape g = jx_shape_of(a);
  assert_int_equal(g.rank, s.rank);
  for (int i = 0; i < s.rank; i++) assert_int_equal(g.dims[i], s.dims[i]);
}

static void init_functions_make_named_parameters(void **state) {
  (void)state;
  jx_tree *t = jx_tree_create();
  jx_array *key = jx_random_key(1);
  check_ok(jx_dense_init(t, "fc", key, 5, 3, JX_F32));
  check_ok(jx_embedding_init(t, "emb", key, 10, 4, JX_F32));
  check_ok(jx_layer_norm_init(t, "ln", 4, JX_BF16));
  check_ok(jx_rms_norm_init(t, "rms", 4, JX_F32));
  check_ok(jx_conv2d_init(t, "conv", key, 3, 3, 2, 8, JX_F32));
  check_ok(jx_transformer_block_init(t, "blk", key, 8, 32, 0.01, JX_F32));
  assert_param(t, "fc.w", JX_F32, JX_SHAPE(5, 3));
  assert_param(t, "fc.b", JX_F32, JX_SHAPE(3));
  assert_param(t, "emb.table", JX_F32, JX_SHAPE(10, 4));
  assert_param(t, "ln.scale", JX_BF16, JX_SHAPE(4));
  assert_param(t, "ln.bias", JX_BF16, JX_SHAPE(4));
  assert_param(t, "rms.scale", JX_F32, JX_SHAPE(4));
  assert_param(t, "conv.w", JX_F32, JX_SHAPE(3, 3, 2, 8));
  assert_param(t, "conv.b", JX_F32, JX_SHAPE(8));
  const char *blk[] = {"ln1.scale", "ln1.bias", "attn.wq",    "attn.wk",   "attn.wv",   "attn.wo",
                       "attn.bq",   "attn.bk",  "attn.bv",    "attn.bo",   "ln2.scale", "ln2.bias",
                       "mlp.fc.w",  "mlp.fc.b", "mlp.proj.w", "mlp.proj.b"};
  assert_int_equal(jx_tree_size(t), 8 + 16);
  for (int i = 0; i < 16; i++) {
    char nm[64];
    snprintf(nm, sizeof nm, "blk.%s", blk[i]);
    assert_string_equal(jx_tree_name(t, 8 + i), nm);
  }
  assert_param(t, "blk.mlp.fc.w", JX_F32, JX_SHAPE(8, 32));
  assert_param(t, "blk.mlp.proj.w", JX_F32, JX_SHAPE(32, 8));
  /* the dense kernel is lecun_normal of the key; the biases zero, scales one */
  assert_same_bits(jx_tree_get(t, "fc.w"), jx_init_lecun_normal(key, JX_F32, JX_SHAPE(5, 3)),
                   "fc.w");
  assert_true(jx_item(jx_sum(jx_abs(jx_tree_get(t, "fc.b")), JX_AXES(), 0)) == 0);
  assert_true(jx_item(jx_sum(jx_tree_get(t, "ln.scale"), JX_AXES(), 0)) == 4);
  /* the residual projection starts smaller */
  double sd = jx_item(jx_std(jx_tree_get(t, "blk.attn.wo"), JX_AXES(), 0));
  assert_true(sd > 0.003 && sd < 0.02);
  /* the block runs on what its init made, and keeps the shape */
  jx_array *x = jx_random_normal(key, JX_F32, JX_SHAPE(2, 3, 8));
  jx_array *y = jx_transformer_block(t, "blk", x, 2, 1e-5);
  check_ok(jx_last_status());
  assert_int_equal(jx_shape_of(y).dims[2], 8);
  jx_tree_release(t);
}

static void dropout_modes(void **state) {
  (void)state;
  jx_array *key = jx_random_key(0), *x = jx_ones(JX_F32, JX_SHAPE(1000));
  assert_ptr_equal(jx_dropout(key, x, 0.5, 0), x); /* not training: identity */
  assert_ptr_equal(jx_dropout(key, x, 0, 1), x);
  assert_true(jx_item(jx_sum(jx_dropout(key, x, 1, 1), JX_AXES(), 0)) == 0);
  /* kept elements are scaled by 1 / (1 - rate): the mean stays near 1 */
  jx_array *y = jx_dropout(key, x, 0.25, 1);
  double kept = jx_item(jx_sum(jx_astype(jx_ne(y, jx_scalar(JX_F32, 0)), JX_F32), JX_AXES(), 0));
  assert_true(kept > 700 && kept < 800);
  assert_true(jx_item(jx_max(y, JX_AXES(), 0)) == (float)(1 / 0.75));
  check_ok(jx_last_status());
}

/* ---- errors ---- */

/* Cross-entropy's label handling against its definition, logsumexp(row) -
 * row[label], evaluated in f64: a negative label counts from the end, an
 * out-of-range one gives NaN (take_along_axis's fill mode), and the
 * gradient of the summed loss is softmax(row) - onehot(label), none from
 * the NaN row. */
static void xent_body(void *arg, jx_array *const *in, jx_array **out) {
  jx_array *loss = jx_softmax_cross_entropy(in[0], (jx_array *)arg, 0);
  out[0] = jx_sum(jx_where(jx_isnan(loss), jx_zeros(JX_F32, JX_SHAPE()), loss), JX_AXES(), 0);
}

static void xent_labels_wrap_and_fill(void **state) {
  (void)state;
  enum { R = 4, C = 5 };
  float x[R][C];
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) x[i][j] = (float)sin(1.7 * i + 0.9 * j) * 3;
  const int32_t lab[R] = {-1, 2, 7, -5}, cls[R] = {4, 2, -1, 0}; /* -1: out of range */
  jx_array *logits = jx_keep(jx_array_from(JX_F32, JX_SHAPE(R, C), x));
  jx_array *labels = jx_keep(jx_array_from(JX_I32, JX_SHAPE(R), lab));
  float got[R], grad[R][C];
  check_ok(jx_read(jx_softmax_cross_entropy(logits, labels, 0), got, sizeof got));
  jx_fn *f = jx_fn_create("xent", 1, 1, xent_body, labels);
  jx_fn *g = jx_grad(f, JX_AXES());
  jx_array *out[1];
  check_ok(jx_call(g, (jx_array *[]){logits}, out));
  check_ok(jx_read(out[0], grad, sizeof grad));
  for (int i = 0; i < R; i++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) m = fmax(m, x[i][j]);
    for (int j = 0; j < C; j++) s += exp(x[i][j] - m);
    if (cls[i] < 0) {
      assert_true(isnan(got[i]));
    } else {
      double want = log(s) + m - x[i][cls[i]];
      assert_true(fabs(got[i] - want) <= 4e-7 * (1 + fabs(want)));
    }
    for (int j = 0; j < C; j++) {
      double want = exp(x[i][j] - m) / s - (j == cls[i]);
      if (cls[i] < 0) want = 0; /* the row's loss is masked out of the sum */
      assert_true(fabs(grad[i][j] - want) <= 4e-7);
    }
  }
  jx_fn_release(g);
  jx_fn_release(f);
  jx_release(logits);
  jx_release(labels);
}

static void expect_error(jx_array *r, const char *a, const char *b) {
  assert_true(jx_is_poisoned(r));
  if (!strstr(jx_last_error(), a) || (b && !strstr(jx_last_error(), b)))
    fprintf(stderr, "unexpected message: %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), a));
  if (b) assert_non_null(strstr(jx_last_error(), b));
  jx_clear_error();
}

static void errors_name_layer_and_parameter(void **state) {
  (void)state;
  jx_tree *t = jx_tree_create();
  jx_array *key = jx_random_key(0);
  check_ok(jx_dense_init(t, "enc.fc", key, 5, 3, JX_F32));
  check_ok(jx_attention_init(t, "attn", key, 8, 0.02, JX_F32));
  check_ok(jx_layer_norm_init(t, "ln", 8, JX_F32));
  jx_array *x4 = jx_ones(JX_F32, JX_SHAPE(2, 4));
  expect_error(jx_dense(t, "enc.fc", x4), "jx_dense 'enc.fc': parameter 'enc.fc.w' is f32[5,3]",
               "expected a float array [4,*]");
  expect_error(jx_dense(t, "dec", x4), "jx_dense 'dec': parameter 'dec.w' is missing", NULL);
  expect_error(jx_dense(t, "enc.fc", jx_ones(JX_I32, JX_SHAPE(2, 5))),
               "jx_dense 'enc.fc': the input is i32[2,5]", NULL);
  expect_error(jx_causal_self_attention(t, "attn", jx_ones(JX_F32, JX_SHAPE(2, 3, 8)), 3),
               "jx_causal_self_attention 'attn': 3 heads do not divide", "8 features");
  expect_error(jx_causal_self_attention(t, "attn", jx_ones(JX_F32, JX_SHAPE(2, 3, 6)), 2),
               "parameter 'attn.wq' is f32[8,8], expected a float array [6,6]", NULL);
  expect_error(jx_layer_norm(t, "ln", jx_ones(JX_F32, JX_SHAPE(3, 7)), 1e-5),
               "jx_layer_norm 'ln': parameter 'ln.scale' is f32[8]", "[7]");
  expect_error(jx_mlp(t, "ln", jx_ones(JX_F32, JX_SHAPE(3, 8))),
               "jx_mlp 'ln': parameter 'ln.fc.w' is missing", NULL);
  check_ok(jx_conv2d_init(t, "conv", key, 3, 3, 2, 4, JX_F32));
  expect_error(jx_conv2d(t, "conv", jx_ones(JX_F32, JX_SHAPE(1, 5, 5, 3)), JX_SHAPE(), "SAME"),
               "jx_conv2d 'conv': parameter 'conv.w' is f32[3,3,2,4]", "[*,*,3,*]");
  expect_error(jx_conv2d(t, "conv", jx_ones(JX_F32, JX_SHAPE(1, 5, 5, 2)), JX_SHAPE(), "FULL"),
               "padding 'FULL' is not SAME or VALID", NULL);
  expect_error(jx_conv2d(t, "conv", jx_ones(JX_F32, JX_SHAPE(5, 5, 2)), JX_SHAPE(), "SAME"),
               "jx_conv2d 'conv': the input is f32[5,5,2]", NULL);
  expect_error(jx_embedding(t, "enc.fc", jx_ones(JX_F32, JX_SHAPE(3))),
               "jx_embedding 'enc.fc': ids are f32[3], expected integers", NULL);
  expect_error(jx_dropout(key, x4, 1.5, 1), "jx_dropout: rate 1.5 is not in [0, 1]", NULL);
  expect_error(
      jx_softmax_cross_entropy(jx_ones(JX_F32, JX_SHAPE(4, 5)), jx_zeros(JX_I32, JX_SHAPE(5)), 0),
      "jx_softmax_cross_entropy: logits f32[4,5] and labels i32[5]", "without its last");
  expect_error(
      jx_softmax_cross_entropy(jx_ones(JX_F32, JX_SHAPE(4, 5)), jx_zeros(JX_F32, JX_SHAPE(4)), 0),
      "expected float logits and integer labels", NULL);
  expect_error(
      jx_softmax_cross_entropy(jx_ones(JX_F32, JX_SHAPE(4, 5)), jx_zeros(JX_I32, JX_SHAPE(4)), 1.0),
      "label_smoothing 1 is not in [0, 1)", NULL);
  expect_error(jx_mse(x4, jx_ones(JX_F32, JX_SHAPE(4, 2))),
               "jx_mse: prediction f32[2,4] and target f32[4,2] differ in shape", NULL);
  expect_error(jx_init_glorot_uniform(key, JX_F32, JX_SHAPE(7)),
               "jx_init_glorot_uniform: a shape of rank 1 has no fan in and fan out", NULL);
  expect_error(jx_init_he_normal(key, JX_I32, JX_SHAPE(2, 2)),
               "jx_init_he_normal: dtype i32 is not a float dtype", NULL);
  expect_error(jx_init_variance_scaling(key, JX_F32, JX_SHAPE(2, 2), 1, "fan_sum", "normal"),
               "mode 'fan_sum' is not one of", NULL);
  expect_error(jx_init_variance_scaling(key, JX_F32, JX_SHAPE(2, 2), 1, "fan_in", "cauchy"),
               "distribution 'cauchy' is not one of", NULL);
  /* a poisoned input passes through without a new error */
  assert_true(jx_is_poisoned(jx_dense(t, "enc.fc", jx_stop_gradient(NULL))));
  jx_clear_error();
  jx_tree_release(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(layers_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(initializers_match_jax_bits, setup, teardown),
      cmocka_unit_test_setup_teardown(initializer_statistics, setup, teardown),
      cmocka_unit_test_setup_teardown(init_functions_make_named_parameters, setup, teardown),
      cmocka_unit_test_setup_teardown(dropout_modes, setup, teardown),
      cmocka_unit_test_setup_teardown(xent_labels_wrap_and_fill, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_layer_and_parameter, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return r;
}
