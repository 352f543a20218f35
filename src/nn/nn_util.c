/* Helpers of src/nn: parameter lookup with errors that name the layer, and
 * key rows. */
#include <stdio.h>
#include <string.h>

#include "nn_util.h"

jx_array *nn_fail(void) { return jx_stop_gradient(NULL); }

const char *nn_aval(const jx_array *a, char *buf) {
  if (jx_is_poisoned(a)) {
    snprintf(buf, 96, "<poisoned>");
    return buf;
  }
  jx_shape s = jx_shape_of(a);
  int n = snprintf(buf, 96, "%s[", jx_dtype_name(jx_dtype_of(a)));
  for (int i = 0; i < s.rank && n < 80; i++)
    n += snprintf(buf + n, (size_t)(96 - n), "%s%lld", i ? "," : "", (long long)s.dims[i]);
  snprintf(buf + n, (size_t)(96 - n), "]");
  return buf;
}

const char *nn_join(char *buf, const char *prefix, const char *name) {
  if (prefix && *prefix)
    snprintf(buf, 256, "%s.%s", prefix, name);
  else
    snprintf(buf, 256, "%s", name);
  return buf;
}

int nn_is_low_float(jx_dtype dt) { return dt == JX_F16 || dt == JX_BF16; }
int nn_is_float(jx_dtype dt) {
  return dt == JX_F16 || dt == JX_BF16 || dt == JX_F32 || dt == JX_F64;
}

static const char *want_str(int rank, const int64_t *want, char *buf) {
  int n = snprintf(buf, 96, "[");
  for (int i = 0; i < rank && n < 80; i++) {
    if (want[i] < 0)
      n += snprintf(buf + n, (size_t)(96 - n), "%s*", i ? "," : "");
    else
      n += snprintf(buf + n, (size_t)(96 - n), "%s%lld", i ? "," : "", (long long)want[i]);
  }
  snprintf(buf + n, (size_t)(96 - n), "]");
  return buf;
}

jx_array *nn_param(const char *layer, const jx_tree *t, const char *prefix, const char *name,
                   int rank, const int64_t *want, int optional, int *ok) {
  char full[256], got[96], exp[96];
  nn_join(full, prefix, name);
  if (!t) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s '%s': the parameter tree is NULL", layer,
                    prefix ? prefix : "");
    *ok = 0;
    return NULL;
  }
  jx_array *p = jx_tree_get(t, full);
  if (!p) {
    if (!optional) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s '%s': parameter '%s' is missing from the tree",
                      layer, prefix ? prefix : "", full);
      *ok = 0;
    }
    return NULL;
  }
  if (jx_is_poisoned(p)) {
    *ok = 0;
    return NULL;
  }
  jx_shape s = jx_shape_of(p);
  int fits = s.rank == rank && nn_is_float(jx_dtype_of(p));
  for (int i = 0; fits && i < rank; i++)
    if (want[i] >= 0 && s.dims[i] != want[i]) fits = 0;
  if (!fits) {
    jx_report_error(JX_ERR_SHAPE, "%s '%s': parameter '%s' is %s, expected a float array %s", layer,
                    prefix ? prefix : "", full, nn_aval(p, got), want_str(rank, want, exp));
    *ok = 0;
    return NULL;
  }
  return p;
}

int nn_check_input(const char *layer, const char *prefix, jx_array *x, int min_rank) {
  char buf[96];
  if (!x) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s '%s': the input is NULL", layer,
                    prefix ? prefix : "");
    return 0;
  }
  if (jx_is_poisoned(x)) return 0;
  if (jx_ndim(x) < min_rank || !nn_is_float(jx_dtype_of(x))) {
    jx_report_error(jx_ndim(x) < min_rank ? JX_ERR_SHAPE : JX_ERR_DTYPE,
                    "%s '%s': the input is %s, expected a float array of rank >= %d", layer,
                    prefix ? prefix : "", nn_aval(x, buf), min_rank);
    return 0;
  }
  return 1;
}

jx_array *nn_key_at(jx_array *keys, int64_t i) {
  return jx_reshape(jx_slice(keys, JX_SHAPE(i, 0), JX_SHAPE(i + 1, 2), JX_SHAPE()), JX_SHAPE(2));
}
