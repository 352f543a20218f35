/* The differentiation rules of binary.c's rows (binary_rules.c). */
#ifndef JX_SRC_PRIMS_BINARY_RULES_H
#define JX_SRC_PRIMS_BINARY_RULES_H

#include "prim.h"

JX_JVP_RULE(jx_jvp_add);
JX_JVP_RULE(jx_jvp_sub);
JX_JVP_RULE(jx_jvp_div);
JX_JVP_RULE(jx_jvp_rem);
JX_JVP_RULE(jx_jvp_pow);
JX_JVP_RULE(jx_jvp_max);
JX_JVP_RULE(jx_jvp_min);
JX_JVP_RULE(jx_jvp_atan2);
JX_TRANSPOSE_RULE(jx_transpose_add);
JX_TRANSPOSE_RULE(jx_transpose_sub);
JX_TRANSPOSE_RULE(jx_transpose_mul);
JX_TRANSPOSE_RULE(jx_transpose_div);

#endif
