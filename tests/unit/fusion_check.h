/* What the fusion tests of data movement (test_fusion_views.c,
 * test_fusion_pad_concat.c) share: input values, and a check that a jitted
 * function gives the eager bits and compiles to the expected plan. Include
 * after cmocka.h, jx.h and test_util.h. */
#ifndef JX_TESTS_UNIT_FUSION_CHECK_H
#define JX_TESTS_UNIT_FUSION_CHECK_H

#include "compile/executable.h"
#include "compile/fusion.h"
#include "trace/fn.h"

static inline double wave(int64_t i, const void *seed) {
  return sin(0.37 * (double)i + *(const int *)seed) * (1 + (double)(i % 7) * 0.25);
}

static inline jx_array *values(jx_dtype dt, jx_shape s, int seed) {
  return jx_keep(test_array_of(dt, s, wave, &seed));
}

/* What a jitted program compiled to: its kernels, and the equations that
 * run outside them (eagerly; views that every kernel reads through are
 * skipped and do not count). */
typedef struct {
  int kernels, eager;
} plan;

/* jx(f)(in) and f(in) agree bit for bit on every output; the plan of the
 * jitted program (kernels -1: not counted under CUDA). */
static inline plan jit_matches_eager(jx_fn *f, int nin, jx_array **in, int nout) {
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[4], *got[4];
  assert_true(nout <= 4 && nin <= 4);
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  for (int o = 0; o < nout; o++) {
    jx_shape s = jx_shape_of(want[o]);
    assert_true(jx_shape_equal(s, jx_shape_of(got[o])));
    assert_int_equal(jx_dtype_of(want[o]), jx_dtype_of(got[o]));
    size_t bytes = (size_t)jx_shape_numel(s) * jx_dtype_size(jx_dtype_of(want[o]));
    char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
    assert_int_equal(jx_read(want[o], a, bytes), JX_OK);
    assert_int_equal(jx_read(got[o], b, bytes), JX_OK);
    assert_memory_equal(a, b, bytes);
    free(a);
    free(b);
  }
  jx_aval av[4];
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  plan r = {-1, -1};
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    r.kernels = jx_executable_kernels(jx_program_executable(p), NULL);
    jx_fusion_group *g = NULL;
    int ng = jx_fuse(p, &g), kernels = 0;
    assert_true(ng >= 0);
    r.eager = 0;
    for (int k = 0; k < ng; k++) {
      if (jx_fusion_group_is_kernel(&g[k]))
        kernels++;
      else if (!g[k].skip)
        r.eager += g[k].count;
    }
    assert_int_equal(kernels, r.kernels); /* the plan the executable was built from */
    free(g);
  }
  jx_program_release(p);
  jx_fn_release(jf);
  return r;
}

/* One kernel, and nothing else runs. */
static inline void expect_one_kernel(plan r) {
  if (r.kernels < 0) return;
  assert_int_equal(r.kernels, 1);
  assert_int_equal(r.eager, 0);
}

#endif
