/* Shared pieces of the elementwise families (unary.c, binary.c, select.c):
 * dtype predicates for shape rules and the loops over 16-bit floats. */
#ifndef JX_SRC_PRIMS_ELEMENTWISE_H
#define JX_SRC_PRIMS_ELEMENTWISE_H

#include "prim.h"

/* Which dtypes an elementwise primitive accepts. */
typedef enum {
  JX_ACCEPT_NUMERIC,     /* ints and floats, not bool */
  JX_ACCEPT_FLOAT,       /* floats only */
  JX_ACCEPT_INT,         /* ints only */
  JX_ACCEPT_INT_OR_BOOL, /* ints and bool */
  JX_ACCEPT_ANY          /* everything */
} jx_accept;

int jx_accepts(jx_accept acc, jx_dtype dt);
const char *jx_accept_desc(jx_accept acc); /* "a float dtype", ... for messages */

/* Rule for n operands that must share dtype and shape; the result has that
 * shape, dtype out_dtype (or the operands' when out_dtype < 0) and is weak iff
 * every operand is. */
jx_status jx_infer_same(const char *name, jx_accept acc, int out_dtype, int nin,
                        const jx_aval *in, jx_aval *out);

#endif
