#include <stdio.h>

#include "../base/error.h"
#include "array.h"

int64_t jx_shape_numel(jx_shape s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n *= s.dims[i];
  return n;
}

int jx_shape_equal(jx_shape a, jx_shape b) {
  if (a.rank != b.rank) return 0;
  for (int i = 0; i < a.rank; i++)
    if (a.dims[i] != b.dims[i]) return 0;
  return 1;
}

/* "[2,3]" into buf (JX_AVAL_STR_CAP bytes) */
static const char *dims_str(jx_shape s, char *buf) {
  int n = snprintf(buf, JX_AVAL_STR_CAP, "[");
  for (int i = 0; i < s.rank && n < JX_AVAL_STR_CAP - 24; i++)
    n += snprintf(buf + n, JX_AVAL_STR_CAP - (size_t)n, i ? ",%lld" : "%lld", (long long)s.dims[i]);
  snprintf(buf + n, JX_AVAL_STR_CAP - (size_t)n, "]");
  return buf;
}

/* As NumPy: the product of the non-zero dims must fit (here: in 2^60
 * elements, so that a size in bytes of any dtype fits in int64), even when
 * a zero dim makes the array empty, since reductions and slices of it
 * drop that zero dim. */
jx_status jx_shape_check(jx_shape s, const char *op, const char *what) {
  if (s.rank < 0 || s.rank > JX_MAX_RANK)
    return jx_error_set(JX_ERR_SHAPE, "%s: %s has more than %d dimensions", op, what, JX_MAX_RANK);
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) {
    if (s.dims[i] < 0)
      return jx_error_set(JX_ERR_SHAPE, "%s: %s has a negative dimension %lld at axis %d", op, what,
                          (long long)s.dims[i], i);
    if (s.dims[i] == 0) continue;
    if (n > INT64_MAX / 8 / s.dims[i]) {
      char sb[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: %s %s has too many elements (its non-zero dims multiply past 2^60)",
                          op, what, dims_str(s, sb));
    }
    n *= s.dims[i];
  }
  return JX_OK;
}

char *jx_aval_str(jx_dtype dt, jx_shape s, char *buf) {
  int n = snprintf(buf, JX_AVAL_STR_CAP, "%s[", jx_dtype_name(dt));
  for (int i = 0; i < s.rank && n < JX_AVAL_STR_CAP - 24; i++)
    n += snprintf(buf + n, JX_AVAL_STR_CAP - n, i ? ",%lld" : "%lld", (long long)s.dims[i]);
  snprintf(buf + n, JX_AVAL_STR_CAP - n, "]");
  return buf;
}

void jx_shape_strides(jx_shape s, int64_t *strides) {
  int64_t st = 1;
  for (int i = s.rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= s.dims[i];
  }
}
