/* Debugging tools: jx_debug_print eagerly and under jit, grad, vmap,
 * shard_map and pmap (exact text, captured in memory); the NaN/Inf locator
 * (JX_DEBUG_NANS/INFS) on planted values, eagerly, in jitted code, in a
 * gradient and in a sharded program, naming the op and this file's line;
 * memory accounting and out-of-memory reports; the mesh's text view. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/base/memstats.h"
#include "../../src/compile/async_dispatch.h"
#include "../../src/debug/debug_internal.h"
#include "test_util.h"

static char *captured;
static size_t captured_len;
static FILE *cap;

static void capture_begin(void) {
  cap = open_memstream(&captured, &captured_len);
  assert_non_null(cap);
  jx_debug_set_output(cap);
}

/* Ends the capture and returns the text (freed at the next capture_end). */
static const char *capture_end(void) {
  static char *last;
  jx_debug_set_output(NULL);
  fclose(cap);
  free(last);
  last = captured;
  captured = NULL;
  return last;
}

static void expect_text(const char *got, const char *want) {
  if (strcmp(got, want) != 0) fprintf(stderr, "got:\n%s\nwanted:\n%s\n", got, want);
  assert_string_equal(got, want);
}

/* test_util.h's assert_error_has, keeping the error for a second look. */
static void assert_error_kept_has(const char *what) {
  if (!strstr(jx_last_error(), what)) fprintf(stderr, "error was: %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), what));
}

static jx_array *vec(double a, double b, double c) {
  float v[3] = {(float)a, (float)b, (float)c};
  return jx_array_from(JX_F32, JX_SHAPE(3), v);
}

/* ---- jx_debug_print ---- */
static void test_print_eager(void **state) {
  (void)state;
  capture_begin();
  jx_array *x = vec(1, 2, 3.5);
  jx_debug_print("x = {}", 1, &x);
  jx_array *two[2] = {jx_scalar(JX_I32, 7), x};
  jx_debug_print("{1} and {0} {{literal}}", 2, two);
  jx_debug_print("no values", 0, NULL);
  expect_text(capture_end(), "x = [1.  2.  3.5]\n[1.  2.  3.5] and 7 {literal}\nno values\n");
  check_ok(jx_last_status());
  jx_debug_print("{} {}", 1, &x);
  assert_error_kept_has("needs 2 values, given 1");
  jx_clear_error();
  jx_debug_print("{", 1, &x);
  assert_error_kept_has("malformed format");
}

/* prints its input and sin(input); returns 2x: the prints feed nothing */
static void print_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_debug_print("in: {}", 1, in);
  jx_array *s = jx_sin(in[0]);
  jx_debug_print("in: {}", 1, in); /* equal to the first: must not be merged */
  jx_debug_print("sin: {}", 1, &s);
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

static void test_print_jit(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("printer", 1, 1, print_body, NULL);
  jx_fn *j = jx_jit(f, NULL);
  jx_array *out[1];
  capture_begin();
  jx_array *x = vec(0, 0, 0);
  check_ok(jx_call(j, &x, out));
  jx_array *y = vec(1, 2, 3);
  check_ok(jx_call(j, &y, out)); /* a second run prints again: the print is in the program */
  char *sin_y = jx_format(jx_sin(y)), want[512];
  snprintf(
      want, sizeof want,
      "in: [0. 0. 0.]\nin: [0. 0. 0.]\nsin: [0. 0. 0.]\nin: [1. 2. 3.]\nin: [1. 2. 3.]\nsin: %s\n",
      sin_y);
  free(sin_y);
  expect_text(capture_end(), want);
  /* the jitted program keeps the prints and their order */
  char *ir = jx_fn_ir(j, &x);
  assert_non_null(ir);
  assert_non_null(strstr(ir, "debug_print"));
  free(ir);
  jx_fn_release(j);
  jx_fn_release(f);
}

/* scan body (carry, x) -> (carry + x, nothing else), printing the carry */
static void scan_print_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_debug_print("carry {}", 1, &in[0]);
  out[0] = jx_add(in[0], in[1]);
}

static jx_fn *scan_print_fn;
/* x -> x * 2, with a scan whose results nobody reads: its prints still run */
static void unused_scan_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *init = jx_scalar(JX_F32, 0), *res[1];
  jx_array *xs = jx_arange(JX_F32, 1, 3, 1);
  jx_scan(scan_print_fn, 1, &init, 1, &xs, 2, 0, res);
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

static void test_print_in_unused_loop(void **state) {
  (void)state;
  scan_print_fn = jx_fn_create("scan_print", 2, 1, scan_print_body, NULL);
  jx_fn *f = jx_fn_create("unused_scan", 1, 1, unused_scan_body, NULL), *j = jx_jit(f, NULL);
  jx_array *x = vec(1, 2, 3), *out[1];
  capture_begin();
  check_ok(jx_call(j, &x, out));
  expect_text(capture_end(), "carry 0.0\ncarry 1.0\n");
  jx_fn_release(j);
  jx_fn_release(f);
  jx_fn_release(scan_print_fn);
}

static void sq_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_mul(in[0], in[0]);
  jx_debug_print("h = {}", 1, &h);
  out[0] = jx_sum(h, JX_AXES(), 0);
}

static void test_print_grad(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sq", 1, 1, sq_body, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *jg = jx_jit(g, NULL);
  jx_array *x = vec(1, 2, 3), *out[1];
  capture_begin();
  check_ok(jx_call(g, &x, out));  /* the primal value, once, in the forward pass */
  check_ok(jx_call(jg, &x, out)); /* and under jit */
  expect_text(capture_end(), "h = [1. 4. 9.]\nh = [1. 4. 9.]\n");
  double v[3];
  check_ok(jx_read(jx_astype(out[0], JX_F64), v, sizeof v));
  assert_true(v[0] == 2 && v[1] == 4 && v[2] == 6);
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void row_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *both[2] = {in[0], in[1]};
  jx_debug_print("row {} scale {}", 2, both);
  out[0] = jx_mul(in[0], in[1]);
}

static void test_print_vmap(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("row", 2, 1, row_body, NULL);
  jx_fn *v = jx_vmap(f, JX_AXES(0, JX_NONE), JX_AXES(0));
  jx_fn *jv = jx_jit(v, NULL);
  float d[4] = {1, 2, 3, 4};
  jx_array *in[2] = {jx_array_from(JX_F32, JX_SHAPE(2, 2), d), jx_scalar(JX_F32, 10)};
  jx_array *out[1];
  capture_begin();
  check_ok(jx_call(v, in, out));
  check_ok(jx_call(jv, in, out));
  const char *want = "row [1. 2.] scale 10.0\nrow [3. 4.] scale 10.0\n";
  char both[256];
  snprintf(both, sizeof both, "%s%s", want, want);
  expect_text(capture_end(), both);
  jx_fn_release(jv);
  jx_fn_release(v);
  jx_fn_release(f);
}

static int cmp_lines(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The captured lines, sorted (devices print concurrently), joined again. */
static char *sorted_lines(const char *text) {
  char *copy = strdup(text), *lines[64];
  int n = 0;
  for (char *s = strtok(copy, "\n"); s && n < 64; s = strtok(NULL, "\n")) lines[n++] = s;
  qsort(lines, (size_t)n, sizeof *lines, cmp_lines);
  char *out = calloc(strlen(text) + 2, 1);
  for (int i = 0; i < n; i++) strcat(strcat(out, lines[i]), "\n");
  free(copy);
  return out;
}

static void block_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_debug_print("block {}", 1, in);
  out[0] = jx_psum(in[0], "i");
}

static void test_print_shard_map_pmap(void **state) {
  (void)state;
  const char *names[1] = {"i"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), names);
  const char *spec[1] = {"i"};
  jx_fn *f = jx_fn_create("block", 1, 1, block_body, NULL);
  jx_fn *sm = jx_shard_map(f, m, spec, spec);
  jx_array *x = jx_arange(JX_F32, 0, 8, 1), *out[1];
  capture_begin();
  check_ok(jx_call(sm, &x, out));
  char *got = sorted_lines(capture_end());
  expect_text(got, "[device 0] block [0. 1.]\n[device 1] block [2. 3.]\n"
                   "[device 2] block [4. 5.]\n[device 3] block [6. 7.]\n");
  free(got);
  jx_fn *pm = jx_pmap(f, "i", JX_AXES(0), JX_AXES(0));
  jx_array *y = jx_reshape(x, JX_SHAPE(4, 2));
  capture_begin();
  check_ok(jx_call(pm, &y, out));
  got = sorted_lines(capture_end());
  expect_text(got, "[device 0] block [0. 1.]\n[device 1] block [2. 3.]\n"
                   "[device 2] block [4. 5.]\n[device 3] block [6. 7.]\n");
  free(got);
  jx_fn_release(pm);
  jx_fn_release(sm);
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* ---- JX_DEBUG_NANS / JX_DEBUG_INFS ---- */
static int log_line, sqrt_line;

static void log_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_exp(in[0]);
  jx_array *l = (log_line = __LINE__, jx_log(jx_sub(in[0], jx_scalar(JX_F32, 1))));
  out[0] = jx_add(jx_mul(e, jx_scalar(JX_F32, 2)), l);
}

static void test_nans_eager_and_jit(void **state) {
  (void)state;
  jx_debug_set_checks(1, 0);
  jx_array *x = vec(3, 0.5, 2);
  int line;
  jx_array *r = (line = __LINE__, jx_log(jx_sub(x, jx_scalar(JX_F32, 1))));
  assert_true(jx_is_poisoned(r));
  char want[128];
  snprintf(want, sizeof want, "%s:%d: JX_DEBUG_NANS: log produced NaN (inputs f32[3])", __FILE__,
           line);
  assert_error_kept_has(want);
  jx_clear_error();

  jx_fn *f = jx_fn_create("loss", 1, 1, log_body, NULL);
  jx_fn *j = jx_jit(f, NULL);
  jx_array *out[1];
  jx_status st = jx_call(j, &x, out);
  assert_int_equal(st, JX_ERR_INVALID_ARGUMENT);
  snprintf(want, sizeof want,
           "JX_DEBUG_NANS: log produced NaN at %s:%d (inputs f32[3]) in jit of 'loss'", __FILE__,
           log_line);
  assert_error_kept_has(want);
  jx_clear_error();
  /* good inputs pass; and with the checks off, NaNs flow as usual */
  x = vec(3, 1.5, 2);
  check_ok(jx_call(j, &x, out));
  jx_debug_set_checks(0, 0);
  x = vec(3, 0.5, 2);
  check_ok(jx_call(j, &x, out));
  jx_fn_release(j);
  jx_fn_release(f);
}

static void sqrt_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_mul(in[0], jx_scalar(JX_F32, 3));
  jx_array *r = (sqrt_line = __LINE__, jx_sqrt(h));
  out[0] = jx_sum(r, JX_AXES(), 0);
}

static void test_nans_in_gradient(void **state) {
  (void)state;
  jx_debug_set_checks(1, 1);
  jx_fn *f = jx_fn_create("root", 1, 1, sqrt_body, NULL);
  jx_fn *dg = jx_grad(f, JX_AXES(0)), *g = jx_jit(dg, NULL);
  jx_array *x = vec(1, 0, 4), *out[1];
  check_ok(jx_call(f, &x, out)); /* the forward pass is fine: sqrt(0) = 0 */
  jx_status st = jx_call(g, &x, out);
  assert_int_equal(st, JX_ERR_INVALID_ARGUMENT);
  char want[128];
  snprintf(want, sizeof want, "produced inf at %s:%d, in the derivative of sqrt", __FILE__,
           sqrt_line);
  assert_error_kept_has(want);
  assert_error_kept_has("JX_DEBUG_INFS: ");
  jx_clear_error();
  x = vec(1, 2, 4);
  check_ok(jx_call(g, &x, out));
  jx_debug_set_checks(0, 0);
  jx_fn_release(g);
  jx_fn_release(dg);
  jx_fn_release(f);
}

static void sharded_log_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  /* the collective comes first: a device that fails leaves the others waiting in later ones */
  jx_array *s = jx_psum(jx_sum(in[0], JX_AXES(), 0), "i");
  jx_array *l = (log_line = __LINE__, jx_log(in[0]));
  out[0] = jx_add(s, jx_sum(l, JX_AXES(), 0));
}

static void test_nans_sharded(void **state) {
  (void)state;
  jx_debug_set_checks(1, 0);
  const char *names[1] = {"i"}, *in_spec[1] = {"i"}, *out_spec[1] = {""};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), names);
  jx_fn *f = jx_fn_create("blocks", 1, 1, sharded_log_body, NULL);
  jx_fn *sm = jx_shard_map(f, m, in_spec, out_spec);
  float d[8] = {1, 2, 3, 4, -5, 6, 7, 8}; /* the bad value is on device 2 */
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(8), d), *out[1];
  jx_status st = jx_call(sm, &x, out);
  assert_int_equal(st, JX_ERR_INVALID_ARGUMENT);
  char want[128];
  snprintf(want, sizeof want, "on device 2: JX_DEBUG_NANS: log produced NaN at %s:%d", __FILE__,
           log_line);
  assert_error_kept_has(want);
  jx_clear_error();
  d[4] = 5;
  x = jx_array_from(JX_F32, JX_SHAPE(8), d);
  check_ok(jx_call(sm, &x, out));
  jx_debug_set_checks(0, 0);
  jx_fn_release(sm);
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* ---- memory ---- */
static void test_memory_stats_and_oom(void **state) {
  (void)state;
  jx_memory_stats a, b;
  jx_dispatch_wait_all(); /* earlier tests' queued runs free their intermediates when they end */
  check_ok(jx_memory_stats(0, &a));
  jx_scope_begin();
  jx_zeros(JX_F32, JX_SHAPE(256, 1024)); /* 1 MiB, until the scope ends */
  check_ok(jx_memory_stats(0, &b));
  assert_true(b.live_bytes - a.live_bytes >= (1 << 20));
  assert_true(b.peak_bytes >= b.live_bytes);
  assert_true(b.live_buffers > a.live_buffers);
  jx_scope_end();
  check_ok(jx_memory_stats(0, &b));
  assert_true(b.live_bytes == a.live_bytes);
  assert_true(b.peak_bytes >= a.live_bytes + (1 << 20));
  assert_int_equal(jx_memory_stats(99, &b), JX_ERR_INVALID_ARGUMENT);
  assert_error_kept_has("device 99 is out of range");
  jx_clear_error();

  /* an out-of-memory error names the largest live buffers and their makers */
  jx_memstats_track(1);
  jx_array *x = jx_keep(jx_exp(jx_zeros(JX_F32, JX_SHAPE(512, 1024)))); /* 2 MiB by exp */
  jx_memstats_set_limit(0, jx_memstats_live(0) + (3 << 20));
  jx_array *y = jx_zeros(JX_F32, JX_SHAPE(1024, 1024)); /* 4 MiB: over the limit */
  jx_memstats_set_limit(0, 0);
  jx_memstats_track(0);
  assert_true(jx_is_poisoned(y));
  assert_int_equal(jx_last_status(), JX_ERR_OUT_OF_MEMORY);
  assert_error_kept_has("out of memory allocating f32[1024,1024] (4194304 bytes)");
  assert_error_kept_has("largest live buffers: 2.0 MiB by exp on device 0");
  jx_clear_error();
  jx_release(x);
}

/* ---- the mesh's text view ---- */
static void test_mesh_print(void **state) {
  (void)state;
  const char *names[2] = {"data", "model"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), names);
  char *text;
  size_t len;
  FILE *f = open_memstream(&text, &len);
  jx_mesh_print(m, f);
  fclose(f);
  expect_text(text, "mesh data=2 x model=2 (4 devices, 1 process)\n"
                    "        model=0         model=1       \n"
                    "data=0  dev 0 (p0)      dev 1 (p0)    \n"
                    "data=1  dev 2 (p0)      dev 3 (p0)    \n");
  free(text);
  jx_mesh_release(m);
}

int main(void) {
  setenv("JX_COLLECTIVE_TIMEOUT", "20", 0); /* a hang fails the test rather than the suite */
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_print_eager, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_in_unused_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_print_shard_map_pmap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nans_eager_and_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nans_in_gradient, setup, teardown),
      cmocka_unit_test_setup_teardown(test_nans_sharded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_stats_and_oom, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mesh_print, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
