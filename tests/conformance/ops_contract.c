/* Conformance adapters for the contractions (tests/golden/gen_contract.py).
 *
 * conv_prim binds the conv_general_dilated primitive itself, for what the
 * public op does not expose (batch_group_count, preferred element type). */
#include "conformance.h"

#include "../../src/trace/dispatch.h"

static jx_status dot_general(const conf_case *c, int nin, jx_array *const *in, int *nout,
                             jx_array **out) {
  (void)nin;
  jx_axes lc = conf_axes(c, "lc", JX_AXES()), rc = conf_axes(c, "rc", JX_AXES());
  jx_axes lb = conf_axes(c, "lb", JX_AXES()), rb = conf_axes(c, "rb", JX_AXES());
  *nout = 1;
  out[0] = conf_has(c, "pref")
               ? jx_dot_general_typed(in[0], in[1], lc, rc, lb, rb, conf_dtype(c, "pref", JX_F32))
               : jx_dot_general(in[0], in[1], lc, rc, lb, rb);
  return jx_last_status();
}

CONF_ONE(matmul, jx_matmul(in[0], in[1]))
CONF_ONE(einsum, jx_einsum(conf_str(c, "spec", ""), nin, in))
CONF_ONE(conv, jx_conv(in[0], in[1], conf_shape(c, "strides", JX_SHAPE()),
                       conf_shape(c, "pad_lo", JX_SHAPE()), conf_shape(c, "pad_hi", JX_SHAPE()),
                       conf_str(c, "layout", NULL)))
CONF_ONE(conv_general_dilated,
         jx_conv_general_dilated(in[0], in[1], conf_shape(c, "strides", JX_SHAPE()),
                                 conf_shape(c, "pad_lo", JX_SHAPE()),
                                 conf_shape(c, "pad_hi", JX_SHAPE()),
                                 conf_shape(c, "lhs_dil", JX_SHAPE()),
                                 conf_shape(c, "rhs_dil", JX_SHAPE()), conf_str(c, "layout", NULL),
                                 (int)conf_int(c, "groups", 1)))

static void list_param(const conf_case *c, const char *key, jx_ilist *l) {
  jx_shape s = conf_shape(c, key, JX_SHAPE());
  l->n = s.rank;
  for (int i = 0; i < s.rank; i++) l->v[i] = s.dims[i];
}

static jx_status conv_prim(const conf_case *c, int nin, jx_array *const *in, int *nout,
                           jx_array **out) {
  static const char *const keys[8] = {"strides", "pad_lo",   "pad_hi",   "lhs_dil",
                                      "rhs_dil", "lhs_spec", "rhs_spec", "out_spec"};
  jx_params p = JX_PARAMS_INIT;
  for (int k = 0; k < 8; k++) list_param(c, keys[k], &p.l[k]);
  p.i[0] = conf_int(c, "groups", 1);
  p.i[1] = conf_int(c, "batch_groups", 1);
  if (conf_has(c, "pref")) {
    p.i[2] = 1;
    p.dtype = conf_dtype(c, "pref", JX_F32);
  }
  *nout = 1;
  out[0] = jx_bind1(&jx_prim_conv_general_dilated, nin, in, &p);
  return jx_last_status();
}

const conf_op conf_ops_contract[] = {{"dot_general", dot_general},
                                     {"matmul", matmul},
                                     {"einsum", einsum},
                                     {"conv", conv},
                                     {"conv_general_dilated", conv_general_dilated},
                                     {"conv_prim", conv_prim},
                                     {NULL, NULL}};
