/* Shared pieces of the elementwise families (unary.c, binary.c, select.c):
 * dtype predicates for shape rules and the loops over 16-bit floats. */
#ifndef JX_SRC_PRIMS_ELEMENTWISE_H
#define JX_SRC_PRIMS_ELEMENTWISE_H

#include <math.h>

#include "prim.h"

/* Which dtypes an elementwise primitive accepts. Complex passes NUMERIC and
 * ANY; only the rows listed in complex.c are ever bound to complex operands. */
typedef enum {
  JX_ACCEPT_NUMERIC,     /* ints, floats and complex, not bool */
  JX_ACCEPT_FLOAT,       /* floats only */
  JX_ACCEPT_INEXACT,     /* floats and complex */
  JX_ACCEPT_INT,         /* ints only */
  JX_ACCEPT_INT_OR_BOOL, /* ints and bool */
  JX_ACCEPT_ANY          /* everything */
} jx_accept;

int jx_accepts(jx_accept acc, jx_dtype dt);
const char *jx_accept_desc(jx_accept acc); /* "a float dtype", ... for messages */

/* Rule for n operands that must share dtype and shape; the result has that
 * shape, dtype out_dtype (or the operands' when out_dtype < 0) and is weak iff
 * every operand is. */
jx_status jx_infer_same(const char *name, jx_accept acc, int out_dtype, int nin, const jx_aval *in,
                        jx_aval *out);

/* XLA's float max and min: NaN propagates from either side and -0 < +0
 * (max(-0, +0) = +0 and min(+0, -0) = -0 whichever side each is on). */
#define JX_FMAX(a, b) (((a) != (a) || (a) > (b) || ((a) == (b) && signbit(b))) ? (a) : (b))
#define JX_FMIN(a, b) (((a) != (a) || (a) < (b) || ((a) == (b) && signbit(a))) ? (a) : (b))

/* Records "op: operand i is f32[3] but needs an integer dtype" unless acc
 * accepts dt; returns the status. For rules and for the NumPy-level ops. */
jx_status jx_accept_check(const char *op, jx_accept acc, int i, jx_dtype dt, jx_shape s);

/* The rules of select_n, clamp and bitcast_convert_type, with errors named
 * `name`, so that the public ops check their arguments before binding and
 * report under their own names. */
jx_status jx_select_n_rule(const char *name, int nin, const jx_aval *in, jx_aval *out);
jx_status jx_clamp_rule(const char *name, const jx_aval *in, jx_aval *out);
jx_status jx_bitcast_rule(const char *name, jx_dtype target, const jx_aval *in, jx_aval *out);

#endif
