/* Control flow under jx_jit: the nested programs of scan, while, fori and
 * cond are compiled with the program that holds them (fused kernels), and
 * give the eager interpreter's bits; also under grad (scan's transposed
 * bodies), vmap and inside shard_map; a long while loop keeps one carry
 * alive, not one per iteration; a body another program shares is compiled
 * as a private copy. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "compile/executable.h"
#include "cuda/cuda_exec.h"
#include "ir/program.h"
#include "parallel/shard_map.h"
#include "prims/prims.h"
#include "trace/fn.h"
#include "test_util.h"

enum { N = 64, LEN = 12 };

static jx_array *val(jx_shape s, double seed) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  jx_array *r = jx_arange(JX_F32, 0, (double)n, 1);
  return jx_reshape(jx_sin(jx_add(jx_mul(r, jx_scalar(JX_F32, 0.37)), jx_scalar(JX_F32, seed))), s);
}

/* a and b: same shape and the same bits, or within tol (relative) when tol > 0 */
static void assert_same(jx_array *a, jx_array *b, double tol) {
  if (jx_is_poisoned(a) || jx_is_poisoned(b)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  assert_false(jx_is_poisoned(b));
  jx_shape sa = jx_shape_of(a), sb = jx_shape_of(b);
  assert_int_equal(sa.rank, sb.rank);
  for (int d = 0; d < sa.rank; d++) assert_int_equal(sa.dims[d], sb.dims[d]);
  assert_int_equal(jx_dtype_of(a), jx_dtype_of(b));
  size_t n = (size_t)jx_size(a);
  float *x = malloc(sizeof(float) * (n + 1)), *y = malloc(sizeof(float) * (n + 1));
  check_ok(jx_read(jx_astype(a, JX_F32), x, sizeof(float) * n));
  check_ok(jx_read(jx_astype(b, JX_F32), y, sizeof(float) * n));
  if (tol == 0)
    assert_memory_equal(x, y, sizeof(float) * n);
  else
    for (size_t k = 0; k < n; k++) assert_true(fabs(x[k] - y[k]) <= tol * (1 + fabs(y[k])));
  free(x);
  free(y);
}

/* The nested executables of jitted program p's executable: a CUDA one
 * under JX_PLATFORM=cuda (its control flow compiled for the host). */
static const jx_exec_nested *nested_of(const jx_program *p) {
  const char *platform = getenv("JX_PLATFORM");
  if (platform && !strcmp(platform, "cuda"))
    return jx_cuda_executable_nested(jx_program_executable(p));
  return jx_executable_nested(jx_program_executable(p));
}

/* Asserts every nested program an impl runs under p is compiled: an
 * executable of t (the nested executables of p's), or one of its own (a
 * shard_map body); returns how many there are and adds their kernels to
 * *kernels. */
static int nested_compiled(const jx_program *p, const jx_exec_nested *t, int *kernels) {
  int n = 0;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    int all = e->prim == &jx_prim_scan || e->prim == &jx_prim_while || e->prim == &jx_prim_cond ||
              e->prim == &jx_prim_remat || e->prim == &jx_prim_shard_map;
    for (int s = 0; all && s < e->nsub; s++) {
      const jx_program *q = e->sub[s];
      const jx_executable *qx = jx_exec_cpu(jx_exec_nested_find(t, q));
      if (!qx) qx = jx_exec_cpu(jx_program_exec(q));
      if (!qx) fprintf(stderr, "%s's program %d '%s' is not compiled\n", e->prim->name, s, q->name);
      assert_non_null(qx);
      *kernels += jx_executable_kernels(qx, NULL);
      n += 1 + nested_compiled(q, jx_executable_nested(qx), kernels);
    }
  }
  return n;
}

/* The compiled program jf runs for these inputs. */
static jx_program *jit_program(jx_fn *jf, int n, jx_array *const *in) {
  jx_aval av[8];
  for (int i = 0; i < n; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  return p;
}

/* ---- scan ---- */
/* (c, x) -> (c * 0.9 + sin(x), tanh(c') * 2) */
static void scan_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *c = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 0.9)), jx_sin(in[1]));
  out[0] = c;
  out[1] = jx_mul(jx_tanh(c), jx_scalar(JX_F32, 2));
}

static jx_fn *body_fn; /* shared by the functions below, so its program is cached once */

/* (c0, xs) -> (c, ys); ctx: reverse */
static void scan_fn(void *ctx, jx_array *const *in, jx_array **out) {
  if (jx_scan(body_fn, 1, in, 1, in + 1, -1, ctx != NULL, out)) out[0] = out[1] = jx_poison();
}

/* (c0, xs) -> sum(c) + sum(ys * xs) */
static void scan_loss(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *r[2];
  scan_fn(ctx, in, r);
  out[0] = jx_add(jx_sum(r[0], JX_AXES(), 0), jx_sum(jx_mul(r[1], in[1]), JX_AXES(), 0));
}

static void scan_matches_eager(void **state) {
  (void)state;
  jx_array *in[2] = {val(JX_SHAPE(N), 0.1), val(JX_SHAPE(LEN, N), 0.7)};
  for (int reverse = 0; reverse < 2; reverse++) {
    jx_fn *f = jx_fn_create("scan_fn", 2, 2, scan_fn, reverse ? "r" : NULL), *jf = jx_jit(f, NULL);
    jx_array *want[2], *got[2];
    check_ok(jx_call(f, in, want));
    check_ok(jx_call(jf, in, got));
    assert_same(got[0], want[0], 0);
    assert_same(got[1], want[1], 0);
    /* the body runs as fused kernels */
    jx_program *p = jit_program(jf, 2, in);
    int kernels = 0;
    assert_int_equal(nested_compiled(p, nested_of(p), &kernels), 1);
    assert_true(kernels >= 1);
    jx_program_release(p);
    jx_fn_release(jf);
    jx_fn_release(f);
  }
  /* a zero-length scan: the carry as given, empty ys */
  jx_fn *f = jx_fn_create("scan_fn", 2, 2, scan_fn, NULL), *jf = jx_jit(f, NULL);
  jx_array *in0[2] = {in[0], jx_zeros(JX_F32, JX_SHAPE(0, N))}, *want[2], *got[2];
  check_ok(jx_call(f, in0, want));
  check_ok(jx_call(jf, in0, got));
  assert_same(got[0], want[0], 0);
  assert_same(got[1], want[1], 0);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void scan_under_grad(void **state) {
  (void)state;
  jx_array *in[2] = {val(JX_SHAPE(N), 0.2), val(JX_SHAPE(LEN, N), 0.3)};
  jx_fn *f = jx_fn_create("scan_loss", 2, 1, scan_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0, 1)), *jg = jx_jit(g, NULL);
  jx_array *want[2], *got[2];
  check_ok(jx_call(g, in, want));
  check_ok(jx_call(jg, in, got));
  /* the sums may reassociate; the scans' elementwise work does not */
  assert_same(got[0], want[0], 1e-6);
  assert_same(got[1], want[1], 1e-6);
  jx_program *p = jit_program(jg, 2, in);
  int kernels = 0;
  assert_true(nested_compiled(p, nested_of(p), &kernels) >=
              2); /* the forward and the transposed scan */
  assert_true(kernels >= 2);
  jx_program_release(p);
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void scan_under_vmap(void **state) {
  (void)state;
  jx_array *in[2] = {val(JX_SHAPE(3, N), 0.4), val(JX_SHAPE(3, LEN, N), 0.5)};
  jx_fn *f = jx_fn_create("scan_fn", 2, 2, scan_fn, NULL);
  jx_fn *v = jx_vmap(f, JX_AXES(0, 0), JX_AXES(0, 0)), *jv = jx_jit(v, NULL);
  jx_array *want[2], *got[2];
  check_ok(jx_call(v, in, want));
  check_ok(jx_call(jv, in, got));
  assert_same(got[0], want[0], 0);
  assert_same(got[1], want[1], 0);
  jx_program *p = jit_program(jv, 2, in);
  int kernels = 0;
  assert_int_equal(nested_compiled(p, nested_of(p), &kernels), 1);
  assert_true(kernels >= 1);
  jx_program_release(p);
  jx_fn_release(jv);
  jx_fn_release(v);
  jx_fn_release(f);
}

static void scan_inside_shard_map(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"i"});
  jx_array *in[2] = {val(JX_SHAPE(N), 0.6), val(JX_SHAPE(LEN, N), 0.8)};
  jx_fn *f = jx_fn_create("scan_fn", 2, 2, scan_fn, NULL);
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"i", "None,i"}, (const char *[]){"i", "None,i"});
  jx_fn *js = jx_jit(s, NULL);
  jx_array *want[2], *got[2], *sm[2];
  check_ok(jx_call(f, in, want));
  check_ok(jx_call(s, in, sm)); /* eager shard_map: its body compiled at the first call */
  check_ok(jx_call(js, in, got));
  assert_same(sm[0], want[0], 0);
  assert_same(sm[1], want[1], 0);
  assert_same(got[0], want[0], 0);
  assert_same(got[1], want[1], 0);
  jx_program *p = jit_program(js, 2, in);
  int kernels = 0;
  assert_int_equal(nested_compiled(p, nested_of(p), &kernels),
                   2); /* the shard_map body and its scan's body */
  assert_true(kernels >= 1);
  jx_program_release(p);
  /* the eager shard_map compiled a private copy of the scan body: the body
   * function's cached program, which eager scans evaluate, stays as traced */
  jx_aval av[2] = {{JX_F32, 0, {1, {N / 2}}, 0}, {JX_F32, 0, {1, {N / 2}}, 0}};
  jx_program *b = jx_fn_program(body_fn, av);
  assert_non_null(b);
  assert_null(jx_program_executable(b));
  jx_program_release(b);
  jx_fn_release(js);
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* ---- while, fori ---- */
/* (i, x) -> i < 7 */
static void while_cond(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_lt(in[0], jx_scalar(JX_I32, ctx ? *(const int *)ctx : 7));
}
/* (i, x) -> (i + 1, x * 1.5 - 0.25) */
static void while_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[0], jx_scalar(JX_I32, 1));
  out[1] = jx_sub(jx_mul(in[1], jx_scalar(JX_F32, 1.5)), jx_scalar(JX_F32, 0.25));
}

typedef struct {
  jx_fn *cond, *body;
} loop_fns;

static void while_fn(void *ctx, jx_array *const *in, jx_array **out) {
  loop_fns *l = ctx;
  if (jx_while(l->cond, l->body, 2, in, out)) out[0] = out[1] = jx_poison();
}

/* (i, x) -> x * 0.5 + i */
static void fori_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *i = jx_astype(in[0], JX_F32); /* first: the f32[4,64] ops then fuse in a row */
  out[0] = jx_add(jx_mul(in[1], jx_scalar(JX_F32, 0.5)), i);
}

static void fori_fn(void *ctx, jx_array *const *in, jx_array **out) {
  if (jx_fori(2, 11, ctx, 1, in, out)) out[0] = jx_poison();
}

static void while_and_fori_match_eager(void **state) {
  (void)state;
  loop_fns l = {jx_fn_create("while_cond", 2, 1, while_cond, NULL),
                jx_fn_create("while_body", 2, 2, while_body, NULL)};
  jx_fn *f = jx_fn_create("while_fn", 2, 2, while_fn, &l), *jf = jx_jit(f, NULL);
  jx_array *in[2] = {jx_scalar(JX_I32, 0), val(JX_SHAPE(N), 0.9)}, *want[2], *got[2];
  check_ok(jx_call(f, in, want));
  check_ok(jx_call(jf, in, got));
  assert_int_equal((int)jx_item(got[0]), 7);
  assert_same(got[0], want[0], 0);
  assert_same(got[1], want[1], 0);
  jx_program *p = jit_program(jf, 2, in);
  int kernels = 0;
  assert_int_equal(nested_compiled(p, nested_of(p), &kernels), 2); /* cond and body */
  assert_true(kernels >= 1);
  jx_program_release(p);
  /* a loop that does not run: the carries as given */
  in[0] = jx_scalar(JX_I32, 9);
  check_ok(jx_call(f, in, want));
  check_ok(jx_call(jf, in, got));
  assert_same(got[1], in[1], 0);
  assert_same(got[1], want[1], 0);
  jx_fn_release(jf);
  jx_fn_release(f);

  jx_fn *fb = jx_fn_create("fori_body", 2, 1, fori_body, NULL);
  jx_fn *g = jx_fn_create("fori_fn", 1, 1, fori_fn, fb), *jg = jx_jit(g, NULL);
  jx_array *x[1] = {val(JX_SHAPE(4, N), 1.1)}, *w[1], *r[1];
  check_ok(jx_call(g, x, w));
  check_ok(jx_call(jg, x, r));
  assert_same(r[0], w[0], 0);
  p = jit_program(jg, 1, x);
  kernels = 0;
  assert_int_equal(nested_compiled(p, nested_of(p), &kernels), 1);
  assert_true(kernels >= 1);
  jx_program_release(p);
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(fb);
  jx_fn_release(l.cond);
  jx_fn_release(l.body);
}

/* 400 iterations over a 64 KiB carry: the loop holds about one carry at a
 * time (each is released once the next exists), not one per iteration */
static void long_while_keeps_one_carry(void **state) {
  (void)state;
  static const int steps = 400;
  loop_fns l = {jx_fn_create("while_cond", 2, 1, while_cond, (void *)&steps),
                jx_fn_create("while_body", 2, 2, while_body, NULL)};
  jx_fn *f = jx_fn_create("while_fn", 2, 2, while_fn, &l), *jf = jx_jit(f, NULL);
  jx_array *in[2] = {jx_scalar(JX_I32, 0), jx_mul(val(JX_SHAPE(16384), 0.5), jx_scalar(JX_F32, 0))};
  jx_array *out[2];
  check_ok(jx_call(jf, in, out)); /* compiles */
  jx_memory_stats before, after;
  check_ok(jx_memory_stats_get(0, &before));
  jx_memory_reset_peak(0);
  jx_scope_begin();
  check_ok(jx_call(jf, in, out));
  assert_int_equal((int)jx_item(out[0]), steps);
  jx_scope_end();
  check_ok(jx_memory_stats_get(0, &after));
  int64_t carry = 16384 * 4;
  if (after.peak_bytes - before.live_bytes > 8 * carry)
    fprintf(stderr, "peak %lld bytes above the start\n",
            (long long)(after.peak_bytes - before.live_bytes));
  assert_true(after.peak_bytes - before.live_bytes <= 8 * carry);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_fn_release(l.cond);
  jx_fn_release(l.body);
}

/* ---- cond ---- */
static void twice_plus_one(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}
static void sine(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sin(in[0]);
}

static void cond_fn(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *const *br = ctx;
  if (jx_cond(jx_gt(in[0], jx_scalar(JX_F32, 0)), br[0], br[1], 1, in + 1, out))
    out[0] = jx_poison();
}

static void cond_matches_eager(void **state) {
  (void)state;
  jx_fn *br[2] = {jx_fn_create("twice_plus_one", 1, 1, twice_plus_one, NULL),
                  jx_fn_create("sine", 1, 1, sine, NULL)};
  jx_fn *f = jx_fn_create("cond_fn", 2, 1, cond_fn, br), *jf = jx_jit(f, NULL);
  for (int k = 0; k < 2; k++) {
    jx_array *in[2] = {jx_scalar(JX_F32, k ? -1.0 : 1.0), val(JX_SHAPE(5, N), 1.3)};
    jx_array *want[1], *got[1];
    check_ok(jx_call(f, in, want));
    check_ok(jx_call(jf, in, got));
    assert_same(got[0], want[0], 0);
    jx_program *p = jit_program(jf, 2, in);
    int kernels = 0;
    assert_int_equal(nested_compiled(p, nested_of(p), &kernels), 2); /* both branches */
    assert_true(kernels >= 1);
    jx_program_release(p);
  }
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_fn_release(br[0]);
  jx_fn_release(br[1]);
}

int main(void) {
  jx_set_cpu_device_count(2);
  body_fn = jx_fn_create("scan_body", 2, 2, scan_body, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(scan_matches_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(scan_under_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(scan_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(scan_inside_shard_map, setup, teardown),
      cmocka_unit_test_setup_teardown(while_and_fori_match_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(long_while_keeps_one_carry, setup, teardown),
      cmocka_unit_test_setup_teardown(cond_matches_eager, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_fn_release(body_fn);
  return r;
}
