/* Fused reductions and epilogues in jitted code: a reduce_sum/max/min over
 * the last axis ends a fused group (its producers are computed per row and
 * reduced in the kernel) and must give the eager kernels' bits, for f32 and
 * f64, ranks 1-3, size-1 and empty dims, long rows (several levels of the
 * pairwise tree) and NaN; a matmul's bias + ReLU epilogue is one kernel that
 * reads the bias through its broadcast. */
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
#include "compile/fusion.h"
#include "cuda/nvrtc.h"
#include "compile/render_c.h"
#include "compile/render_cuda.h"
#include "trace/fn.h"
#include "test_util.h"

enum { OP_SUM, OP_MAX, OP_MIN };

/* out[0] = reduce(x * w - x, -1); out[1] = x * w (a member stored as well) */
static void reduce_body(void *ctx, jx_array *const *in, jx_array **out) {
  int op = *(const int *)ctx;
  jx_array *xw = jx_mul(in[0], in[1]);
  jx_array *d = jx_sub(xw, in[0]);
  out[0] = op == OP_SUM   ? jx_sum(d, JX_AXES(-1), 0)
           : op == OP_MAX ? jx_max(d, JX_AXES(-1), 0)
                          : jx_min(d, JX_AXES(-1), 0);
  out[1] = xw;
}

/* Large waves, with NaNs when asked. */
typedef struct {
  int seed, nans;
} wave_kind;

static double wave(int64_t i, const void *ctx) {
  const wave_kind *w = ctx;
  if (w->nans && i % 97 == 13) return NAN;
  return sin(0.37 * (double)i + w->seed) * (1 + (double)(i % 7)) * 1e3;
}

static jx_array *values(jx_dtype dt, jx_shape s, int seed, int nans) {
  wave_kind w = {seed, nans};
  return test_array_of(dt, s, wave, &w);
}

/* 1 when p has a compiled kernel that ends in a reduction */
static int has_reduce_kernel(const jx_program *p) {
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g), found = 0;
  assert_true(ng >= 0);
  for (int k = 0; k < ng; k++) found |= g[k].reduces && jx_fusion_group_is_kernel(&g[k]);
  free(g);
  return found;
}

static void check_case(jx_dtype dt, jx_shape s, int op, int nans) {
  jx_fn *f = jx_fn_create("fused_reduce", 2, 2, reduce_body, &op);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *in[2] = {jx_keep(values(dt, s, 1, nans)), jx_keep(values(dt, s, 2, 0))};
  jx_array *want[2], *got[2];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  for (int o = 0; o < 2; o++) {
    jx_shape os = jx_shape_of(want[o]);
    assert_true(jx_shape_equal(os, jx_shape_of(got[o])));
    size_t bytes = (size_t)jx_shape_numel(os) * (dt == JX_F64 ? 8 : 4);
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    assert_int_equal(jx_read(want[o], a, bytes), JX_OK);
    assert_int_equal(jx_read(got[o], b, bytes), JX_OK);
    if (memcmp(a, b, bytes) != 0)
      fail_msg("%s op %d rank %d (last dim %lld) output %d: jit differs from eager",
               dt == JX_F64 ? "f64" : "f32", op, s.rank, (long long)s.dims[s.rank - 1], o);
    free(a);
    free(b);
  }
  jx_aval av[2] = {{dt, 0, s, 0}, {dt, 0, s, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  /* non-empty operands reduce inside the kernel; empty ones run as they are */
  assert_int_equal(has_reduce_kernel(p), jx_shape_numel(s) > 0);
  jx_program_release(p);
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void fused_reductions_match_eager(void **state) {
  (void)state;
  const jx_shape shapes[] = {
      JX_SHAPE(3, 5),    JX_SHAPE(4, 1), JX_SHAPE(1, 7), JX_SHAPE(2, 3, 200), JX_SHAPE(5, 1000),
      JX_SHAPE(3, 4099), JX_SHAPE(129),  JX_SHAPE(2, 8), JX_SHAPE(6, 0),      JX_SHAPE(0, 4)};
  const jx_dtype dts[] = {JX_F32, JX_F64};
  for (size_t d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
      for (int op = OP_SUM; op <= OP_MIN; op++)
        if (op == OP_SUM || shapes[k].dims[shapes[k].rank - 1] > 0) /* max/min: no identity */
          check_case(dts[d], shapes[k], op, 0);
}

static void max_min_propagate_nan(void **state) {
  (void)state;
  for (int op = OP_SUM; op <= OP_MIN; op++) {
    check_case(JX_F32, JX_SHAPE(4, 300), op, 1);
    check_case(JX_F64, JX_SHAPE(2, 50), op, 1);
  }
  /* and the result is NaN where a row holds one (rows 0..2 of 4 x 300 do) */
  int op = OP_MAX;
  jx_fn *f = jx_fn_create("nan_max", 2, 2, reduce_body, &op), *jf = jx_jit(f, NULL);
  jx_array *in[2] = {jx_keep(values(JX_F32, JX_SHAPE(4, 300), 1, 1)),
                     jx_keep(values(JX_F32, JX_SHAPE(4, 300), 2, 0))};
  jx_array *out[2];
  assert_int_equal(jx_call(jf, in, out), JX_OK);
  float r[4];
  assert_int_equal(jx_read(out[0], r, sizeof r), JX_OK);
  assert_true(isnan(r[0]) && isnan(r[1]) && isnan(r[2]));
  jx_release(in[0]);
  jx_release(in[1]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* relu(x @ w + b): the bias add and the ReLU are one kernel after the GEMM,
 * reading b through its broadcast (stride 0 down the rows) */
static void mlp_layer(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_relu(jx_add(jx_matmul(in[0], in[1]), in[2]));
}

static void bias_relu_epilogue_is_one_kernel(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("layer", 3, 1, mlp_layer, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *in[3] = {jx_keep(values(JX_F32, JX_SHAPE(64, 96), 1, 0)),
                     jx_keep(values(JX_F32, JX_SHAPE(96, 80), 2, 0)),
                     jx_keep(values(JX_F32, JX_SHAPE(80), 3, 0))};
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  static float a[64 * 80], b[64 * 80];
  assert_int_equal(jx_read(want[0], a, sizeof a), JX_OK);
  assert_int_equal(jx_read(got[0], b, sizeof b), JX_OK);
  assert_f32_close(b, a, 64 * 80, test_gemm_rtol());
  jx_aval av[3] = {
      {JX_F32, 0, {2, {64, 96}}, 0}, {JX_F32, 0, {2, {96, 80}}, 0}, {JX_F32, 0, {1, {80}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  if (TEST_CPU_ONLY("the CPU executable's kernel count"))
    assert_int_equal(jx_executable_kernels(jx_program_executable(p), NULL), 1);
  jx_fusion_group *g = NULL;
  int ng = jx_fuse(p, &g), bias_read = 0, kernels = 0;
  for (int k = 0; k < ng; k++) {
    if (!jx_fusion_group_is_kernel(&g[k])) continue;
    kernels++;
    for (int l = 0; l < g[k].nloads; l++)
      if (g[k].loads[l].var == p->in[2])
        bias_read = g[k].loads[l].strides[0] == 0 && g[k].loads[l].strides[1] == 1;
  }
  free(g);
  assert_int_equal(kernels, 1);
  assert_true(bias_read);
  jx_program_release(p);
  for (int i = 0; i < 3; i++) jx_release(in[i]);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* The CUDA dialect renders the reduction kernels the C dialect does, and
 * NVRTC compiles them (sum, max and min; f32 and f64; with a stored member). */
static void cuda_dialect_renders_reductions(void **state) {
  (void)state;
  char *tu = jx_render_cuda_prelude(), *c_tu = jx_render_c_prelude();
  assert_non_null(tu);
  assert_non_null(c_tu);
  int nk = 0;
  for (int dt = 0; dt < 2; dt++)
    for (int op = OP_SUM; op <= OP_MIN; op++) {
      jx_fn *f = jx_fn_create("fused_reduce", 2, 2, reduce_body, &op);
      jx_aval av[2] = {{dt ? JX_F64 : JX_F32, 0, {2, {3, 300}}, 0},
                       {dt ? JX_F64 : JX_F32, 0, {2, {3, 300}}, 0}};
      jx_program *p = jx_fn_program(f, av);
      assert_non_null(p);
      jx_fusion_group *g = NULL;
      int ng = jx_fuse(p, &g);
      for (int k = 0; k < ng; k++) {
        if (!g[k].reduces || !jx_fusion_group_is_kernel(&g[k])) continue;
        char name[32];
        snprintf(name, sizeof name, "jx_kernel_%d", nk++);
        char *src = jx_render_cuda(p, &g[k], name), *c = jx_render_c(p, &g[k], name);
        assert_non_null(src);
        assert_non_null(c);
        assert_non_null(strstr(src, op == OP_SUM ? "jx_pwi_leaf" : "nan_"));
        tu = realloc(tu, strlen(tu) + strlen(src) + 1);
        strcat(tu, src);
        free(src);
        free(c);
      }
      free(g);
      jx_program_release(p);
      jx_fn_release(f);
    }
  assert_int_equal(nk, 6);
  if (!jx_nvrtc_available()) {
    printf("skipped: NVRTC not found (%s)\n", jx_nvrtc_load_error());
  } else {
    char *image = NULL;
    size_t n = 0;
    jx_nvrtc_options opt = {"sm_80", JX_NVRTC_CUBIN, NULL, 0};
    jx_status st = jx_nvrtc_compile(tu, "reductions.cu", &opt, &image, &n);
    if (st) fail_msg("%s", jx_last_error());
    assert_true(n > 0);
    free(image);
  }
  free(tu);
  free(c_tu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fused_reductions_match_eager),
      cmocka_unit_test(max_min_propagate_nan),
      cmocka_unit_test(bias_relu_epilogue_is_one_kernel),
      cmocka_unit_test(cuda_dialect_renders_reductions),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
