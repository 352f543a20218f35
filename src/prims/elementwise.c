#include "elementwise.h"

#include "../base/error.h"

int jx_accepts(jx_accept acc, jx_dtype dt) {
  switch (acc) {
  case JX_ACCEPT_NUMERIC: return dt != JX_BOOL;
  case JX_ACCEPT_FLOAT: return jx_is_float(dt);
  case JX_ACCEPT_INEXACT: return jx_is_inexact(dt);
  case JX_ACCEPT_INT: return jx_is_int(dt);
  case JX_ACCEPT_INT_OR_BOOL: return jx_is_int(dt) || dt == JX_BOOL;
  case JX_ACCEPT_ANY: return 1;
  }
  return 0;
}

const char *jx_accept_desc(jx_accept acc) {
  switch (acc) {
  case JX_ACCEPT_NUMERIC: return "a numeric (non-bool) dtype";
  case JX_ACCEPT_FLOAT: return "a floating dtype";
  case JX_ACCEPT_INEXACT: return "a floating or complex dtype";
  case JX_ACCEPT_INT: return "an integer dtype";
  case JX_ACCEPT_INT_OR_BOOL: return "an integer or bool dtype";
  case JX_ACCEPT_ANY: return "any dtype";
  }
  return "?";
}

jx_status jx_accept_check(const char *op, jx_accept acc, int i, jx_dtype dt, jx_shape s) {
  char a[JX_AVAL_STR_CAP];
  if (jx_accepts(acc, dt)) return JX_OK;
  return jx_error_set(JX_ERR_DTYPE, "%s: operand %d is %s but needs %s", op, i,
                      jx_aval_str(dt, s, a), jx_accept_desc(acc));
}

jx_status jx_infer_same(const char *name, jx_accept acc, int out_dtype, int nin, const jx_aval *in,
                        jx_aval *out) {
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  int weak = 1;
  for (int i = 0; i < nin; i++) {
    jx_status st = jx_accept_check(name, acc, i, in[i].dtype, in[i].shape);
    if (st) return st;
    if (in[i].dtype != in[0].dtype || !jx_shape_equal(in[i].shape, in[0].shape))
      return jx_error_set(JX_ERR_SHAPE, "%s: operands must have one dtype and shape, got %s and %s",
                          name, jx_aval_str(in[0].dtype, in[0].shape, a),
                          jx_aval_str(in[i].dtype, in[i].shape, b));
    weak = weak && in[i].weak;
  }
  out->dtype = out_dtype < 0 ? in[0].dtype : (jx_dtype)out_dtype;
  out->shape = in[0].shape;
  out->weak = (uint8_t)(out_dtype < 0 && weak);
  return JX_OK;
}
