/* What the tests of complex values in fused kernels (test_fusion_complex.c,
 * test_fusion_complex_special.c) share: JAX's goldens, a closeness check,
 * and jit against eager on the CPU (bits) or CUDA (within cuda_rtol).
 * Include after cmocka.h, jx.h, test_util.h and fusion_check.h. */
#ifndef JX_TESTS_UNIT_COMPLEX_CHECK_H
#define JX_TESTS_UNIT_COMPLEX_CHECK_H

#include <complex.h>
#include <stdio.h>
#include <stdlib.h>

/* dir/<x64 or x32>.name.npy of a generator's output folder */
static inline jx_array *complex_golden(const char *dir, int x64, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s%s.%s.npy", dir, x64 ? "x64" : "x32", name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fail_msg("cannot load %s: %s", path, jx_last_error());
  return a;
}

/* a's elements as c128 (read from wherever a lives), malloc'ed */
static inline double _Complex *elements(jx_array *a) {
  jx_dtype dt = jx_dtype_of(a);
  int64_t n = jx_size(a);
  size_t bytes = (size_t)n * jx_dtype_size(dt);
  char *raw = malloc(bytes + 1);
  double _Complex *z = malloc(sizeof *z * (size_t)(n + 1));
  assert_true(raw && z);
  check_ok(jx_read(a, raw, bytes));
  for (int64_t i = 0; i < n; i++) z[i] = jx_load_c128(raw, dt, i);
  free(raw);
  return z;
}

/* got within rtol of want, relative to the larger of |want| and 1 */
static inline void assert_close(const char *what, jx_array *got, jx_array *want, double rtol) {
  assert_int_equal(jx_dtype_of(got), jx_dtype_of(want));
  assert_true(jx_shape_equal(jx_shape_of(got), jx_shape_of(want)));
  double _Complex *g = elements(got), *w = elements(want);
  for (int64_t i = 0; i < jx_size(got); i++) {
    double scale = cabs(w[i]) > 1 ? cabs(w[i]) : 1;
    if (!(cabs(g[i] - w[i]) <= rtol * scale))
      fail_msg("%s[%lld]: %.9g%+.9gj, want %.9g%+.9gj", what, (long long)i, creal(g[i]),
               cimag(g[i]), creal(w[i]), cimag(w[i]));
  }
  free(g);
  free(w);
}

/* The CUDA dialect's complex arithmetic and functions are formulas over
 * CUDA's real ones, not glibc's <complex.h>: on CUDA (the emulator, or a
 * GPU) a kernel agrees with the CPU's reference kernels to this relative
 * error, where the C dialect gives their bits. */
static inline double cuda_rtol(jx_dtype dt) { return dt == JX_C128 || dt == JX_F64 ? 1e-12 : 2e-5; }

/* jit(f)(in) against f(in), nout outputs (at most 4): bit for bit with the
 * plan on the CPU (fusion_check.h), within cuda_rtol on CUDA (plan not
 * counted) */
static inline plan jit_matches_n(jx_fn *f, int nin, jx_array **in, int nout) {
  if (!test_on_cuda()) return jit_matches_eager(f, nin, in, nout);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[4], *got[4];
  assert_true(nout <= 4);
  check_ok(jx_call(f, in, want));
  check_ok(jx_call(jf, in, got));
  for (int o = 0; o < nout; o++)
    assert_close("cuda jit vs eager", got[o], want[o], cuda_rtol(jx_dtype_of(want[o])));
  jx_fn_release(jf);
  return (plan){-1, -1};
}
static inline plan jit_matches(jx_fn *f, int nin, jx_array **in) {
  return jit_matches_n(f, nin, in, 1);
}

#endif
