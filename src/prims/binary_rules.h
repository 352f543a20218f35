/* The differentiation rules of binary.c's rows (binary_rules.c). */
#ifndef JX_SRC_PRIMS_BINARY_RULES_H
#define JX_SRC_PRIMS_BINARY_RULES_H

#include "prim.h"

#define JX_DECLARE_JVP(name)                                                                       \
  jx_status name(const jx_params *p, int nin, jx_array *const *x, jx_array *const *t, int nout,    \
                 jx_array **y, jx_array **ty, int nsub, struct jx_program *const *s)
#define JX_DECLARE_TRANSPOSE(name)                                                                 \
  jx_status name(const jx_params *p, int nin, jx_array *const *in, const jx_aval *avals,           \
                 const uint8_t *linear, int nout, jx_array *const *ct, jx_array **ct_in, int nsub, \
                 struct jx_program *const *s)

JX_DECLARE_JVP(jx_jvp_add);
JX_DECLARE_JVP(jx_jvp_sub);
JX_DECLARE_JVP(jx_jvp_mul);
JX_DECLARE_JVP(jx_jvp_div);
JX_DECLARE_JVP(jx_jvp_rem);
JX_DECLARE_JVP(jx_jvp_pow);
JX_DECLARE_JVP(jx_jvp_max);
JX_DECLARE_JVP(jx_jvp_min);
JX_DECLARE_JVP(jx_jvp_atan2);
JX_DECLARE_TRANSPOSE(jx_transpose_add);
JX_DECLARE_TRANSPOSE(jx_transpose_sub);
JX_DECLARE_TRANSPOSE(jx_transpose_mul);
JX_DECLARE_TRANSPOSE(jx_transpose_div);

#endif
