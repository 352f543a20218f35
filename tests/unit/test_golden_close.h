/* Helpers shared by the tests that read per-mode JAX goldens (test_complex.c,
 * test_fft.c): the goldens' file names and the closeness of a result to a
 * golden, complex-aware, in two tolerance forms. Include after test_util.h. */
#ifndef JX_TESTS_UNIT_TEST_GOLDEN_CLOSE_H
#define JX_TESTS_UNIT_TEST_GOLDEN_CLOSE_H

#include <complex.h>
#include <stdio.h>

#include "array/array.h"

static inline const char *mode_name(int x64) { return x64 ? "x64" : "x32"; }

/* the golden <dir><x32|x64>.<name>.npy; a missing one fails the test */
static inline jx_array *golden_at(const char *dir, int x64, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s%s.%s.npy", dir, mode_name(x64), name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fail_msg("cannot load %s: %s", path, jx_last_error());
  return a;
}

typedef enum {
  CLOSE_ELEMENTWISE, /* |got_i - want_i| <= rtol * max(|want_i|, 1) */
  CLOSE_TO_MAX,      /* |got_i - want_i| <= rtol * max(max_j |want_j|, 1): for transforms,
                        whose every output mixes every input */
} close_scale;

/* got equals want in dtype and shape, and elementwise within rtol scaled as `scale` says (both
 * parts at once for complex); `what` names the comparison in the failure */
static inline void assert_close_golden(const char *what, jx_array *got, jx_array *want, double rtol,
                                       close_scale scale) {
  if (jx_is_poisoned(got)) fail_msg("%s: poisoned: %s", what, jx_last_error());
  if (jx_dtype_of(got) != jx_dtype_of(want))
    fail_msg("%s: dtype %s, JAX %s", what, jx_dtype_name(jx_dtype_of(got)),
             jx_dtype_name(jx_dtype_of(want)));
  if (!jx_shape_equal(jx_shape_of(got), jx_shape_of(want))) fail_msg("%s: shape differs", what);
  check_ok(jx_block_until_ready(got));
  jx_dtype dt = jx_dtype_of(got);
  double max_want = 1;
  for (int64_t i = 0; scale == CLOSE_TO_MAX && i < jx_size(want); i++) {
    double m = cabs(jx_load_c128(jx_array_data(want), dt, i));
    if (m > max_want) max_want = m;
  }
  for (int64_t i = 0; i < jx_size(got); i++) {
    double _Complex g = jx_load_c128(jx_array_data(got), dt, i);
    double _Complex w = jx_load_c128(jx_array_data(want), dt, i);
    double s = scale == CLOSE_TO_MAX ? max_want : cabs(w) > 1 ? cabs(w) : 1;
    if (!(cabs(g - w) <= rtol * s))
      fail_msg("%s[%lld]: %.9g%+.9gj, JAX %.9g%+.9gj", what, (long long)i, creal(g), cimag(g),
               creal(w), cimag(w));
  }
}

#endif
