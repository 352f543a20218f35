/* The automatic sharding planner's alpha-beta model: each collective kind's
 * ring formula against hand-computed figures (one axis, several axes on the
 * slowest link, a kind's own figures, a group of one device), and a
 * calibration through the executor on 4 CPU devices (one axis of 4, a 2x2
 * mesh) giving positive finite figures for every kind; the measured
 * figures the sharded jit plans with are measured once per mesh shape, kept
 * for the process and written to the cache directory as they are; the
 * estimate's roofline prices a kernel by its bytes (at the bandwidth of
 * their size) or its flops, a product at the rate of its layout and
 * arithmetic intensity, a slice by what it writes. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "parallel/auto/comm_model.h"
#include "parallel/auto/machine_model.h"
#include "parallel/auto/report.h"
#include "compile/simplify.h"
#include "nn/attention_core.h"
#include "trace/fn.h"
#include "test_util.h"

static jx_mesh *mesh_2d(int64_t a, int64_t b, const char *na, const char *nb) {
  const char *names[] = {na, nb};
  return jx_mesh_create((jx_shape){2, {a, b}}, names);
}

static void ring_formulas_match_hand_figures(void **state) {
  (void)state;
  jx_mesh *m = mesh_2d(4, 2, "data", "model");
  assert_non_null(m);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, m, 1e-5, 1e9, 1e12); /* 10 us, 1 GB/s */
  const uint32_t data = 1u << 0, model = 1u << 1;
  /* all_reduce over data (n = 4) of 1 MB: 2*3*1e-5 + 2*(3/4)*1e6*1e-9 */
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_REDUCE, data, 1e6), 1.56e-3, 1e-12);
  /* all_gather over model (n = 2): 1e-5 + (1/2)*1e6*1e-9 */
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_GATHER, model, 1e6), 5.1e-4, 1e-12);
  /* reduce_scatter over data: 3e-5 + (3/4)*1e-3 */
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_REDUCE_SCATTER, data, 1e6), 7.8e-4, 1e-12);
  /* permute: one message of the whole block */
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_PERMUTE, data, 1e6), 1.01e-3, 1e-12);
  /* both axes (n = 8) ride the slower link: model at 20 us, 100 MB/s;
   * all_to_all: 7*2e-5 + (7/8)*1e6*1e-8 */
  cm.link[1] = jx_link_uniform(2e-5, 1e-8);
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_TO_ALL, data | model, 1e6), 8.89e-3,
                     1e-12);
  /* a kind's own figures: all_gather over data at 40 us and 2 ns a byte
   * (3*4e-5 + (3/4)*1e6*2e-9); the other kinds keep theirs */
  cm.link[0].alpha_s[JX_COLL_ALL_GATHER] = 4e-5;
  cm.link[0].beta[JX_COLL_ALL_GATHER] = (jx_byte_rate){0, 2e-9, 2e-9};
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_GATHER, data, 1e6), 1.62e-3, 1e-12);
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_REDUCE, data, 1e6), 1.56e-3, 1e-12);
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_PERMUTE, model, 1e6), 1e-2 + 2e-5, 1e-12);
  /* a knee: the first 250 KB at 0.5 ns a byte, the rest at 2 ns:
   * 3*4e-5 + (3/4)*(2.5e5*5e-10 + 7.5e5*2e-9) */
  cm.link[0].beta[JX_COLL_ALL_GATHER] = (jx_byte_rate){2.5e5, 5e-10, 2e-9};
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_GATHER, data, 1e6), 1.33875e-3, 1e-12);
  /* both axes measured together: their own figures, n = 8 (7*1e-5 +
   * (7/8)*1e6*1e-9), not the slower link's */
  cm.group_axes = data | model;
  cm.group = jx_link_uniform(1e-5, 1e-9);
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_TO_ALL, data | model, 1e6), 9.45e-4,
                     1e-12);
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_PERMUTE, model, 1e6), 1e-2 + 2e-5, 1e-12);
  cm.group_axes = 0;
  /* no axes, or an axis of one device: no communication */
  assert_float_equal(jx_comm_model_time(&cm, JX_COLL_ALL_REDUCE, 0, 1e6), 0, 0);
  jx_mesh *one = mesh_2d(4, 1, "data", "model");
  jx_comm_model c1;
  jx_comm_model_uniform(&c1, one, 1e-5, 1e9, 1e12);
  assert_float_equal(jx_comm_model_time(&c1, JX_COLL_ALL_GATHER, model, 1e6), 0, 0);
  jx_mesh_release(one);
  jx_mesh_release(m);
}

/* A link's measured figures, every kind: a latency under a second and a
 * bandwidth over 1 MB/s, below and past the knee (figures of a
 * measurement, not of a broken fit). */
static void check_link(const jx_link_model *l, int axis) {
  for (int k = 0; k < JX_COLL_KINDS; k++) {
    print_message("axis %d (-1: all), kind %d: alpha %.3g s, %.3g GB/s to %.0f bytes, then %.3g\n",
                  axis, k, l->alpha_s[k], 1e-9 / l->beta[k].cached_s_per_byte,
                  l->beta[k].knee_bytes, 1e-9 / l->beta[k].s_per_byte);
    assert_true(isfinite(l->alpha_s[k]) && l->alpha_s[k] > 0 && l->alpha_s[k] < 1);
    assert_true(l->beta[k].knee_bytes > 0);
    assert_true(l->beta[k].cached_s_per_byte > 0 && l->beta[k].cached_s_per_byte < 1e-6);
    assert_true(l->beta[k].s_per_byte > 0 && l->beta[k].s_per_byte < 1e-6);
  }
}

static void check_calibrated(const jx_comm_model *cm, const jx_mesh *m) {
  assert_int_equal(cm->naxes, jx_mesh_ndim(m));
  for (int a = 0; a < cm->naxes; a++)
    if (cm->size[a] > 1) check_link(&cm->link[a], a);
  if (cm->group_axes) check_link(&cm->group, -1);
  /* every axis split, and more than one: measured together */
  uint32_t split = 0;
  for (int a = 0; a < cm->naxes; a++)
    if (cm->size[a] > 1) split |= 1u << a;
  assert_int_equal(cm->group_axes, __builtin_popcount(split) > 1 ? split : 0);
  const jx_byte_rate *r = &cm->reorder;
  assert_true(isfinite(r->cached_s_per_byte) && r->cached_s_per_byte >= 0 &&
              r->cached_s_per_byte < 1e-6);
  assert_true(isfinite(r->s_per_byte) && r->s_per_byte >= 0 && r->s_per_byte < 1e-6);
}

static void calibration_gives_positive_finite_figures(void **state) {
  (void)state;
  const char *names[] = {"x"};
  jx_mesh *line = jx_mesh_create((jx_shape){1, {4}}, names);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, line, 1, 1, 1);
  assert_int_equal(jx_comm_model_calibrate(&cm, line), JX_OK);
  check_calibrated(&cm, line);
  assert_float_equal(cm.flops_per_s, 1, 0); /* the compute rate is the caller's */
  jx_mesh *grid = mesh_2d(2, 2, "data", "model");
  assert_int_equal(jx_comm_model_calibrate(&cm, grid), JX_OK);
  check_calibrated(&cm, grid);
  /* the measured figures price a collective */
  double t = jx_comm_model_time(&cm, JX_COLL_ALL_REDUCE, 3u, 1 << 20);
  assert_true(isfinite(t) && t > 0);
  assert_int_equal(jx_comm_model_calibrate(&cm, NULL), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_comm_model_calibrate"));
  jx_clear_error();
  jx_mesh_release(grid);
  jx_mesh_release(line);
}

static void measured_figures_are_cached(void **state) {
  (void)state;
  char dir[] = "/tmp/jx_comm_model_XXXXXX";
  assert_non_null(mkdtemp(dir));
  setenv("JX_CACHE_DIR", dir, 1);
  jx_mesh *grid = mesh_2d(2, 2, "data", "model");
  jx_comm_model a, b;
  int64_t before = jx_machine_model_measurements();
  check_ok(jx_comm_model_measured(&a, grid));
  assert_int_equal(jx_machine_model_measurements(), before + 1);
  check_calibrated(&a, grid);
  print_message("compute: %.3g GFLOP/s, %.3g GB/s, %.3g us per step per device\n",
                a.flops_per_s * 1e-9, a.mem_bytes_per_s * 1e-9, a.step_s * 1e6);
  assert_true(a.flops_per_s > 1e6 && a.flops_per_s < 1e14);
  assert_true(a.transposed_flops_per_s > 1e6 && a.transposed_flops_per_s < 1e14);
  assert_true(a.small_flops_per_s > 1e6 && a.small_flops_per_s < 1e14);
  assert_true(a.mem_bytes_per_s > 1e6 && a.mem_bytes_per_s < 1e13);
  /* the caches' bandwidth is at least memory's */
  assert_true(a.cached_bytes_per_s >= a.mem_bytes_per_s && a.cached_bytes_per_s < 1e13);
  assert_true(a.step_s >= 0 && a.step_s < 0.1);
  assert_true(a.idle_share >= 0 && a.idle_share <= 0.5);
  if (!jx_devices_per_core(grid)) assert_float_equal(a.idle_share, 0, 0);
  /* the same shape again, under other names: kept, not measured */
  jx_mesh *again = mesh_2d(2, 2, "rows", "cols");
  check_ok(jx_comm_model_measured(&b, again));
  assert_int_equal(jx_machine_model_measurements(), before + 1);
  assert_memory_equal(&a, &b, sizeof a);
  /* the cache file holds the same figures */
  DIR *d = opendir(dir);
  struct dirent *ent;
  char path[512] = "";
  while ((ent = readdir(d)))
    if (!strncmp(ent->d_name, "machine_model_", 14))
      snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
  closedir(d);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  double flops, flops_t, flops_small, bw, bw_cached, step, idle, alpha;
  jx_byte_rate reorder, beta;
  unsigned group;
  assert_int_equal(fscanf(f, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %u", &flops, &flops_t,
                          &flops_small, &bw, &bw_cached, &step, &idle, &reorder.knee_bytes,
                          &reorder.cached_s_per_byte, &reorder.s_per_byte, &group),
                   11);
  assert_float_equal(flops, a.flops_per_s, 1e-9 * a.flops_per_s);
  assert_float_equal(flops_t, a.transposed_flops_per_s, 1e-9 * a.transposed_flops_per_s);
  assert_float_equal(flops_small, a.small_flops_per_s, 1e-9 * a.small_flops_per_s);
  assert_float_equal(bw, a.mem_bytes_per_s, 1e-9 * a.mem_bytes_per_s);
  assert_float_equal(bw_cached, a.cached_bytes_per_s, 1e-9 * a.cached_bytes_per_s);
  assert_float_equal(step, a.step_s, 1e-9 * a.step_s);
  assert_float_equal(idle, a.idle_share, 1e-15);
  assert_memory_equal(&reorder, &a.reorder, sizeof reorder);
  assert_int_equal(group, a.group_axes);
  assert_int_equal(group, 3);       /* a 2x2 mesh: both axes measured together too */
  for (int ax = 0; ax <= 2; ax++) { /* each axis, then both */
    const jx_link_model *l = ax < 2 ? &a.link[ax] : &a.group;
    for (int k = 0; k < JX_COLL_KINDS; k++) {
      assert_int_equal(fscanf(f, "%lf %lf %lf %lf", &alpha, &beta.knee_bytes,
                              &beta.cached_s_per_byte, &beta.s_per_byte),
                       4);
      assert_float_equal(alpha, l->alpha_s[k], 1e-15);
      assert_memory_equal(&beta, &l->beta[k], sizeof beta);
    }
  }
  fclose(f);
  remove(path);
  rmdir(dir);
  unsetenv("JX_CACHE_DIR");
  jx_mesh_release(again);
  jx_mesh_release(grid);
}

static void twice_plus_one(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

static void product(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_matmul(in[0], in[1]);
}

static void product_transposed(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_dot_general(in[0], in[1], JX_AXES(1), JX_AXES(1), JX_AXES(), JX_AXES());
}

static void first_rows(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_slice(in[0], JX_SHAPE(0, 0), JX_SHAPE(8, 512), JX_SHAPE(1, 1));
}

/* The time jx_compute_time gives body on these avals (as the jit runs it). */
static double priced(const jx_comm_model *cm, jx_body body, int nin, const jx_aval *in) {
  jx_fn *f = jx_fn_create("priced", nin, 1, body, NULL);
  jx_program *t = jx_fn_program(f, in), *p = t ? jx_simplify(t) : NULL;
  assert_non_null(p);
  double secs = jx_compute_time(cm, p);
  jx_program_release(t);
  jx_program_release(p);
  jx_fn_release(f);
  return secs;
}

/* The estimate's compute time of a program (jx_compute_time): one fused
 * elementwise kernel is bandwidth-bound, its bytes (read once, written
 * once) at the bandwidth of their size plus a step; one matmul
 * compute-bound, its flops at the rate of its layout and arithmetic
 * intensity plus a step; a slice moves what it writes; figures without a
 * bandwidth price flops alone. */
static void roofline_per_step(void **state) {
  (void)state;
  jx_mesh *line = mesh_2d(4, 1, "d", "e");
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, line, 0, 1, 1e9);
  cm.mem_bytes_per_s = 1e9;
  cm.step_s = 1e-6;
  jx_aval x = {.dtype = JX_F32, .shape = {2, {512, 512}}};
  jx_fn *ew = jx_fn_create("twice_plus_one", 1, 1, twice_plus_one, NULL);
  jx_fn *mm = jx_fn_create("product", 2, 1, product, NULL);
  jx_aval xx[2] = {x, x};
  jx_program *te = jx_fn_program(ew, &x), *tm = jx_fn_program(mm, xx);
  jx_program *pe = jx_simplify(te), *pm = jx_simplify(tm); /* as the jit runs them */
  jx_program_release(te);
  jx_program_release(tm);
  assert_non_null(pe);
  assert_non_null(pm);
  double bytes = 2 * 512 * 512 * 4.0, flops = 2 * 512.0 * 512 * 512;
  assert_float_equal(jx_compute_time(&cm, pe), bytes / 1e9 + 1e-6, 1e-7); /* and 2 scalars */
  /* the product: 2 x 1 MB in, 1 MB out, 0.27 GFLOP: compute-bound */
  assert_float_equal(jx_compute_time(&cm, pm), flops / 1e9 + 1e-6, 1e-12);
  /* read transposed: at the transposed rate */
  cm.transposed_flops_per_s = 5e8;
  assert_float_equal(priced(&cm, product_transposed, 2, xx), flops / 5e8 + 1e-6, 1e-12);
  /* 512x16 by 16x16: 2*512*16*16 flops over 4*(2*512*16 + 16*16) bytes, an
   * intensity under the small products' 12.8: at their rate */
  cm.small_flops_per_s = 2.5e8;
  jx_aval skinny[2] = {{.dtype = JX_F32, .shape = {2, {512, 16}}},
                       {.dtype = JX_F32, .shape = {2, {16, 16}}}};
  assert_float_equal(priced(&cm, product, 2, skinny), 2 * 512 * 16 * 16 / 2.5e8 + 1e-6, 1e-12);
  /* a slice of 8 rows reads and writes 16 KB, not its 1 MB operand; within
   * the caches, at their bandwidth */
  cm.cached_bytes_per_s = 4e9;
  assert_float_equal(priced(&cm, first_rows, 1, &x), 2 * 8 * 512 * 4.0 / 4e9 + 1e-6, 1e-12);
  /* 2 MB, between the 512 KB and the 4 MB the bandwidths were measured on:
   * between their prices, geometrically (two thirds of the way in the log) */
  double mid = bytes / 4e9 * pow(4, 2.0 / 3);
  assert_float_equal(jx_compute_time(&cm, pe), mid + 1e-6, 1e-7); /* and 2 scalars */
  cm.mem_bytes_per_s = 0;
  assert_float_equal(jx_compute_time(&cm, pm), flops / 1e9, 1e-12);
  jx_program_release(pe);
  jx_program_release(pm);
  jx_fn_release(ew);
  jx_fn_release(mm);
  jx_mesh_release(line);
}

static void attention(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = nn_causal_attention_core(in[0], in[1], in[2]);
}

/* An attention call the executable keeps whole (one fused kernel, the
 * scores never in memory) is priced at its composite's flops and its
 * operands' and results' bytes: at least its two products' flops at the
 * rate, under the composite's own price (JX_FLASH_ATTENTION=0: the T x T
 * scores, their softmax and its kernels through memory). */
static void attention_priced_as_its_kernel(void **state) {
  (void)state;
  jx_mesh *line = mesh_2d(4, 1, "d", "e");
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, line, 0, 1, 1e9);
  cm.mem_bytes_per_s = 1e8;
  jx_aval qkv = {.dtype = JX_F32, .shape = {4, {2, 256, 4, 64}}}, in[3] = {qkv, qkv, qkv};
  double kept = priced(&cm, attention, 3, in);
  setenv("JX_FLASH_ATTENTION", "0", 1);
  double composite = priced(&cm, attention, 3, in);
  unsetenv("JX_FLASH_ATTENTION");
  double products = 2 * (2.0 * 2 * 4 * 256 * 256 * 64) / 1e9; /* q k^T, then p v */
  print_message("attention: kept %.3g s, composite %.3g s, its products %.3g s\n", kept, composite,
                products);
  assert_true(kept >= products);
  assert_true(kept < 2 * products); /* the softmax's flops beside the products' */
  assert_true(composite > 2 * kept);
  jx_mesh_release(line);
}

/* The idle share: none measured where each device has a core (2 devices),
 * a share in [0, 0.5] where 8 devices time-share the cores; the estimate
 * adds the idle time it implies to the busy time (busy / (1 - share)), and
 * none for figures without one. */
static void idle_share_prices_time_shared_cores(void **state) {
  (void)state;
  const char *names[] = {"x"};
  jx_mesh *few = jx_mesh_create((jx_shape){1, {2}}, names);
  jx_mesh *many = jx_mesh_create((jx_shape){1, {8}}, names);
  assert_true(few && many);
  jx_comm_model cm;
  jx_comm_model_uniform(&cm, few, 1e-5, 1e9, 1e9);
  cm.idle_share = 1; /* overwritten */
  check_ok(jx_idle_share_calibrate(few, &cm));
  if (!jx_devices_per_core(few)) assert_float_equal(cm.idle_share, 0, 0);
  if (jx_devices_per_core(many)) {
    jx_comm_model_uniform(&cm, many, 1e-5, 1e9, 1e9);
    cm.idle_share = 1;
    check_ok(jx_idle_share_calibrate(many, &cm));
    print_message("idle share of 8 devices on %ld cores: %.3f\n", sysconf(_SC_NPROCESSORS_ONLN),
                  cm.idle_share);
    assert_true(cm.idle_share >= 0 && cm.idle_share <= 0.5);
  }
  /* the estimate of a program (one product) on the time-shared mesh */
  jx_aval x = {.dtype = JX_F32, .shape = {2, {512, 512}}};
  jx_fn *mm = jx_fn_create("product", 2, 1, product, NULL);
  jx_aval xx[2] = {x, x};
  jx_program *p = jx_fn_program(mm, xx);
  assert_non_null(p);
  jx_comm_model_uniform(&cm, many, 1e-5, 1e9, 1e9);
  jx_sharding_estimate busy, idle;
  jx_sharding_estimate_device(&cm, many, p, &busy);
  assert_float_equal(busy.idle_s, 0, 0);
  assert_float_equal(busy.step_s, busy.compute_s + busy.comm_s, 0);
  assert_true(busy.step_s > 0);
  cm.idle_share = 0.2;
  jx_sharding_estimate_device(&cm, many, p, &idle);
  assert_float_equal(idle.compute_s, busy.compute_s, 0);
  assert_float_equal(idle.idle_s, busy.step_s * 0.25, 1e-15);
  assert_float_equal(idle.step_s, busy.step_s / 0.8, 1e-15);
  jx_program_release(p);
  jx_fn_release(mm);
  jx_mesh_release(many);
  jx_mesh_release(few);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ring_formulas_match_hand_figures),
      cmocka_unit_test(calibration_gives_positive_finite_figures),
      cmocka_unit_test(measured_figures_are_cached),
      cmocka_unit_test(roofline_per_step),
      cmocka_unit_test(attention_priced_as_its_kernel),
      cmocka_unit_test(idle_share_prices_time_shared_cores),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
