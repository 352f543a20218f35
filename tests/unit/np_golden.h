/* The runner of the jax.numpy surface tests (tests/unit/test_np_*.c) over
 * the goldens of tests/golden/gen_np_surface.py: each case's function runs
 * on JAX's inputs eagerly and under jit (and under jx_vmap where the golden
 * is jax.vmap's), its outputs are compared with JAX's (dtype, shape, NaN
 * and infinities, values within the dtype's tolerance), and the gradient of
 * sum(out0 * ct0) with respect to every float input with JAX's; cases marked
 * so also pass jx_check_grads. Include after test_util.h. */
#ifndef JX_TESTS_UNIT_NP_GOLDEN_H
#define JX_TESTS_UNIT_NP_GOLDEN_H

#include <unistd.h>

#define NP_DIR JX_TEST_DATA "/np_surface/"
#define NP_MAX 8

typedef void (*np_fn)(jx_array *const *in, jx_array **out);
typedef struct {
  const char *name;
  int nin, nout;
  np_fn fn;
  int vmap;            /* the golden is jax.vmap(fn, in_axes) */
  int in_axes[NP_MAX]; /* with vmap: each input's mapped axis, or JX_NONE */
  int check_grads;     /* also jx_check_grads (order 1) */
  int x64;             /* run in x64 mode, as JAX ran it (its inputs are 64-bit) */
} np_case;

/* a case: NP("name", nin, nout, fn) or with .vmap = 1, .in_axes = {...}, .check_grads = 1,
   .x64 = 1 */
#define NP(NAME, NIN, NOUT, FN, ...)                                                               \
  { .name = (NAME), .nin = (NIN), .nout = (NOUT), .fn = (FN), __VA_ARGS__ }

static void np_body(void *ctx, jx_array *const *in, jx_array **out) {
  ((const np_case *)ctx)->fn(in, out);
}

static int np_exists(const char *name, const char *kind, int i) {
  char path[512];
  snprintf(path, sizeof path, NP_DIR "%s.%s%d.npy", name, kind, i);
  return access(path, R_OK) == 0;
}

static jx_array *np_load(const char *name, const char *kind, int i) {
  char path[512];
  snprintf(path, sizeof path, NP_DIR "%s.%s%d.npy", name, kind, i);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* 1 when got matches want (see the header comment), else 0, printing why */
static int np_matches(jx_array *got, jx_array *want, const char *name, const char *what) {
  if (jx_is_poisoned(got)) {
    fprintf(stderr, "%s %s: poisoned: %s\n", name, what, jx_last_error());
    return 0;
  }
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  int same_shape = gs.rank == ws.rank;
  for (int d = 0; same_shape && d < gs.rank; d++) same_shape = gs.dims[d] == ws.dims[d];
  if (!same_shape || jx_dtype_of(got) != jx_dtype_of(want)) {
    char *g = jx_format(got), *w = jx_format(want);
    fprintf(stderr, "%s %s: %s rank %d, JAX %s rank %d\n%s\nJAX:\n%s\n", name, what,
            jx_dtype_name(jx_dtype_of(got)), gs.rank, jx_dtype_name(jx_dtype_of(want)), ws.rank, g,
            w);
    free(g);
    free(w);
    return 0;
  }
  jx_dtype dt = jx_dtype_of(want);
  double tol = dt == JX_F64                    ? 1e-12
               : dt == JX_F32                  ? 2e-6
               : dt == JX_F16 || dt == JX_BF16 ? 1e-2
                                               : 0;
  int64_t n = jx_size(want);
  double *g = calloc((size_t)n + 1, sizeof *g), *w = calloc((size_t)n + 1, sizeof *w);
  assert_true(g && w);
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof *g * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof *w * (size_t)n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    int same = isnan(w[i])   ? isnan(g[i])
               : isinf(w[i]) ? g[i] == w[i]
                             : fabs(g[i] - w[i]) <= tol * fmax(1, fabs(w[i]));
    if (!same && bad++ < 8)
      fprintf(stderr, "%s %s[%lld]: %.17g, JAX %.17g\n", name, what, (long long)i, g[i], w[i]);
  }
  free(g);
  free(w);
  return !bad;
}

typedef struct {
  jx_fn *f;
  jx_array *ct;
  int nout;
} np_loss_ctx;

/* sum(out0 * ct0) */
static void np_loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  const np_loss_ctx *c = ctx;
  jx_array *o[NP_MAX];
  jx_call(c->f, in, o);
  out[0] = jx_sum(jx_mul(o[0], c->ct), JX_AXES(), 0);
}

/* The number of outputs and gradients of case c that differ from JAX's. */
static int np_run_case(const np_case *c, int jit) {
  const char *mode = jit ? "jit" : "eager";
  jx_array *in[NP_MAX], *out[NP_MAX], *grads[NP_MAX];
  int wrong = 0, x64 = jx_x64_enabled();
  if (c->x64) jx_config_enable_x64(1);
  for (int i = 0; i < c->nin; i++) in[i] = np_load(c->name, "in", i);
  jx_fn *base = jx_fn_create(c->name, c->nin, c->nout, np_body, (void *)c);
  jx_fn *f = base;
  if (c->vmap) {
    jx_axes ax = {c->nin, {0}};
    for (int i = 0; i < c->nin; i++) ax.v[i] = c->in_axes[i];
    f = jx_vmap(base, ax, JX_AXES());
  }
  jx_fn *run = jit ? jx_jit(f, NULL) : f;
  jx_status st = jx_call(run, in, out);
  if (st) fprintf(stderr, "%s %s: %s\n", c->name, mode, jx_last_error());
  check_ok(st);
  for (int k = 0; k < c->nout; k++) {
    char what[32];
    snprintf(what, sizeof what, "%s out%d", mode, k);
    wrong += !np_matches(out[k], np_load(c->name, "out", k), c->name, what);
  }
  if (np_exists(c->name, "ct", 0)) {
    np_loss_ctx lc = {f, np_load(c->name, "ct", 0), c->nout};
    jx_fn *loss = jx_fn_create(c->name, c->nin, 1, np_loss_body, &lc);
    int argn[NP_MAX], n = 0;
    for (int i = 0; i < c->nin; i++)
      if (np_exists(c->name, "grad", i)) argn[n++] = i;
    jx_fn *g = jx_grad_argnums(loss, n, argn);
    jx_fn *grun = jit ? jx_jit(g, NULL) : g;
    st = jx_call(grun, in, grads);
    if (st) fprintf(stderr, "%s %s grad: %s\n", c->name, mode, jx_last_error());
    check_ok(st);
    for (int k = 0; k < n; k++) {
      char what[32];
      snprintf(what, sizeof what, "%s grad%d", mode, argn[k]);
      wrong += !np_matches(grads[k], np_load(c->name, "grad", argn[k]), c->name, what);
    }
    if (jit) jx_fn_release(grun);
    jx_fn_release(g);
    jx_fn_release(loss);
  }
  if (c->check_grads && !jit) {
    st = jx_check_grads(f, in, 1, 0, 0);
    if (st) fprintf(stderr, "%s check_grads: %s\n", c->name, jx_last_error());
    wrong += st != JX_OK;
    jx_clear_error();
  }
  if (jit) jx_fn_release(run);
  if (f != base) jx_fn_release(f);
  jx_fn_release(base);
  jx_config_enable_x64(x64);
  return wrong;
}

static int np_run_all(const np_case *cases, int n, int jit) {
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    jx_scope_begin();
    wrong += np_run_case(&cases[i], jit);
    jx_scope_end();
  }
  return wrong;
}

/* test_golden_eager and test_golden_jit: every case of the array CASES, eagerly and under jit */
#define NP_GOLDEN_TESTS(CASES)                                                                     \
  static void test_golden_eager(void **state) {                                                    \
    (void)state;                                                                                   \
    assert_int_equal(np_run_all(CASES, (int)(sizeof CASES / sizeof CASES[0]), 0), 0);              \
  }                                                                                                \
  static void test_golden_jit(void **state) {                                                      \
    (void)state;                                                                                   \
    assert_int_equal(np_run_all(CASES, (int)(sizeof CASES / sizeof CASES[0]), 1), 0);              \
  }

/* a case's function of one input (a) or two (a, b) with one output, the expression EXPR */
#define NP_FN1(NAME, EXPR)                                                                         \
  static void NAME(jx_array *const *in, jx_array **out) {                                          \
    jx_array *a = in[0];                                                                           \
    out[0] = (EXPR);                                                                               \
  }
#define NP_FN2(NAME, EXPR)                                                                         \
  static void NAME(jx_array *const *in, jx_array **out) {                                          \
    jx_array *a = in[0], *b = in[1];                                                               \
    out[0] = (EXPR);                                                                               \
  }

/* One error case: expr must return a poisoned array and record an error
 * mentioning `what` and this file (the caller's file:line). */
#define NP_EXPECT_ERROR(expr, what)                                                                \
  do {                                                                                             \
    jx_clear_error();                                                                              \
    jx_array *np_r_ = (expr);                                                                      \
    assert_true(jx_is_poisoned(np_r_));                                                            \
    if (!strstr(jx_last_error(), __FILE__)) fprintf(stderr, "error was: %s\n", jx_last_error());   \
    assert_non_null(strstr(jx_last_error(), __FILE__));                                            \
    assert_error_has(what);                                                                        \
  } while (0)

#endif
