#define _GNU_SOURCE /* mkdtemp, setenv */
/* One compiler run per jit compilation: a jitted function whose scan body
 * holds a cond compiles the kernels of the top program, the scan body and
 * both branches in one translation unit (control_compile.c's batch), so a
 * cold cache sees exactly one compiler run; the results keep the eager
 * interpreter's bits, and a second function of the same structure reuses
 * the batch (no compiler run at all). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "compile/executable.h"
#include "compile/toolchain.h"
#include "ir/program.h"
#include "trace/fn.h"

enum { N = 96, LEN = 6 };

static jx_fn *then_fn, *else_fn, *body_fn;

/* the branches: different elementwise chains of the carry and x */
static void then_branch(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_tanh(jx_add(jx_mul(in[0], in[1]), jx_scalar(JX_F32, 0.5)));
}
static void else_branch(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sub(jx_exp(jx_neg(jx_abs(in[0]))), jx_mul(in[1], jx_scalar(JX_F32, 0.25)));
}

/* scan body: (c, x) -> (cond(sum(x) > 0, then, else)(c, x) * 0.9 + x, c * c) */
static void scan_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *pred = jx_gt(jx_sum(in[1], JX_AXES(0), 0), jx_scalar(JX_F32, 0.0));
  jx_array *r[1];
  if (jx_cond(pred, then_fn, else_fn, 2, in, r)) r[0] = jx_poison();
  out[0] = jx_add(jx_mul(r[0], jx_scalar(JX_F32, 0.9)), in[1]);
  out[1] = jx_mul(in[0], in[0]);
}

/* f(c0, xs) = (final carry, ys), with elementwise work before and after */
static void top(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *c0 = jx_sqrt(jx_add(jx_abs(in[0]), jx_scalar(JX_F32, 1.0)));
  jx_array *init[1] = {c0}, *xs[1] = {in[1]}, *r[2];
  if (jx_scan(body_fn, 1, init, 1, xs, LEN, 0, r)) r[0] = r[1] = jx_poison();
  out[0] = jx_mul(jx_logistic(r[0]), jx_scalar(JX_F32, 3.0));
  out[1] = r[1];
}

static jx_array *values(jx_shape s, int seed) {
  int64_t n = jx_shape_numel(s);
  float *h = malloc(sizeof *h * (size_t)n);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++) h[i] = (float)(sin(0.37 * (double)i + seed) * 2.0);
  jx_array *a = jx_array_from(JX_F32, s, h);
  free(h);
  return a;
}

static void same_bits(jx_array *a, jx_array *b) {
  size_t n = (size_t)jx_shape_numel(jx_shape_of(a));
  assert_int_equal(n, (size_t)jx_shape_numel(jx_shape_of(b)));
  float *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
  assert_int_equal(jx_read(a, x, sizeof *x * n), JX_OK);
  assert_int_equal(jx_read(b, y, sizeof *y * n), JX_OK);
  assert_memory_equal(x, y, sizeof *x * n);
  free(x);
  free(y);
}

/* programs under p (p included, compiled as x) with a compiled kernel */
static int programs_with_kernels(const jx_program *p, const jx_executable *x) {
  int n = x && jx_executable_kernels(x, NULL) > 0;
  for (int k = 0; k < p->neqns; k++)
    for (int s = 0; s < p->eqns[k].nsub; s++) {
      const jx_program *q = p->eqns[k].sub[s];
      n += programs_with_kernels(q, x ? jx_exec_cpu(jx_exec_nested_find(jx_executable_nested(x), q))
                                      : NULL);
    }
  return n;
}

static void scan_and_cond_compile_in_one_run(void **state) {
  (void)state;
  jx_array *in[2] = {jx_keep(values(JX_SHAPE(N), 1)), jx_keep(values(JX_SHAPE(LEN, N), 2))};
  jx_fn *f = jx_fn_create("scan_cond", 2, 2, top, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[2], *got[2];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  jx_kernel_stats s0 = jx_kernel_cache_stats();
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  jx_kernel_stats s1 = jx_kernel_cache_stats();
  /* the cache directory is new: one compiler run, no hits on disk */
  assert_int_equal(s1.compiles - s0.compiles, 1);
  assert_int_equal(s1.disk_hits - s0.disk_hits, 0);
  for (int o = 0; o < 2; o++) same_bits(want[o], got[o]);
  /* and the run was worth batching: the top program, the scan body and
   * both branches have kernels of their own */
  jx_aval av[2] = {{JX_F32, 0, {1, {N}}, 0}, {JX_F32, 0, {2, {LEN, N}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  assert_true(programs_with_kernels(p, jx_program_executable(p)) >= 4);
  jx_program_release(p);

  /* the same structure again (a new function): its kernels are in the batch */
  jx_fn *f2 = jx_fn_create("scan_cond_again", 2, 2, top, NULL);
  jx_fn *jf2 = jx_jit(f2, NULL);
  s0 = jx_kernel_cache_stats();
  assert_int_equal(jx_call(jf2, in, got), JX_OK);
  s1 = jx_kernel_cache_stats();
  assert_int_equal(s1.compiles - s0.compiles, 0);
  for (int o = 0; o < 2; o++) same_bits(want[o], got[o]);
  jx_fn_release(jf2);
  jx_fn_release(f2);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_release(in[0]);
  jx_release(in[1]);
}

int main(void) {
  /* a cache directory of our own, empty: the compile is cold */
  char dir[] = "/tmp/jx-batch-XXXXXX";
  const char *tmp = getenv("TMPDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/jx-batch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  char *made = mkdtemp(path);
  if (!made) made = mkdtemp(dir);
  if (!made) return 1;
  setenv("JX_CACHE_DIR", made, 1);
  then_fn = jx_fn_create("then", 2, 1, then_branch, NULL);
  else_fn = jx_fn_create("else", 2, 1, else_branch, NULL);
  body_fn = jx_fn_create("body", 2, 2, scan_body, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scan_and_cond_compile_in_one_run),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_fn_release(body_fn);
  jx_fn_release(then_fn);
  jx_fn_release(else_fn);
  jx_shutdown();
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", made);
  if (system(cmd) != 0) rc = rc ? rc : 1;
  return rc;
}
