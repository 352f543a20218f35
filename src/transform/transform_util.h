/* Small helpers shared by the transformation interpreters. */
#ifndef JX_SRC_TRANSFORM_TRANSFORM_UTIL_H
#define JX_SRC_TRANSFORM_TRANSFORM_UTIL_H

#include "../ir/program.h"

/* Operand arrays for applying one equation: in/out, and a second set
 * (tangents, cotangents, batch dims as arrays) alongside. */
typedef struct {
  jx_array **in, **in2, **out, **out2;
  jx_array *small[4][16];
} jx_eqn_io;

jx_status jx_eqn_io_open(jx_eqn_io *io, const jx_eqn *e);
/* The context e's rules run under. */
static inline jx_rule_ctx jx_eqn_rule_ctx(const jx_eqn *e) {
  return (jx_rule_ctx){e->prim, &e->params, e->nin, e->nout, e->nsub, e->sub};
}
void jx_eqn_io_close(jx_eqn_io *io);

/* Checks the argument selection args[0..n) of f (negative counts from the
 * end, as in JAX) and writes it normalized to out[0..n); an argnum out of
 * range or given twice is an error naming op and f. */
jx_status jx_argnums_normalize(const char *op, const char *fname, int nin, int n, const int *args,
                               int *out);

#endif
