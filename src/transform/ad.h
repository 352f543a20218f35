/* Automatic differentiation as JAX does it: JVP rules give forward mode;
 * reverse mode is the JVP program split by partial evaluation into a forward
 * (known) part and a linear (tangent) part, whose transpose runs backward. */
#ifndef JX_SRC_TRANSFORM_AD_H
#define JX_SRC_TRANSFORM_AD_H

#include "../ir/program.h"

/* Evaluates p on primals x with tangents t (t[i] NULL: zero) through the
 * JVP rules, recording into the current trace. y and ty get p->nout arrays
 * (ty[o] NULL: a zero tangent). */
jx_status jx_jvp_eval(const jx_program *p, jx_array *const *x, jx_array *const *t, jx_array **y,
                      jx_array **ty);

/* The JVP program of p: inputs (x..., t_i for each i with wrt[i]), outputs
 * (y..., ty_o for each o with out_sel[o]); zero tangents are materialized. */
jx_program *jx_jvp_program(const jx_program *p, const uint8_t *wrt, const uint8_t *out_sel);

/* A linearization: fwd maps the primal inputs to (y..., residuals...); lin is
 * linear in its tangent inputs and maps (residuals..., tangents...) to the
 * selected output tangents. */
typedef struct {
  jx_program *fwd, *lin;
  int nres;
} jx_linearized;

/* Linearizes p with respect to the inputs with wrt[i] set, for the outputs
 * with out_sel[o] set. Returns JX_OK and fills *out (release both programs). */
jx_status jx_linearize(const jx_program *p, const uint8_t *wrt, const uint8_t *out_sel,
                       jx_linearized *out);

/* The transpose of lin (from jx_linearize): inputs (residuals..., output
 * cotangents...), outputs the cotangents of lin's tangent inputs. */
jx_program *jx_transpose_program(const jx_program *lin, int nres);
/* The same with the linear inputs marked: inputs (the other inputs in order...,
 * output cotangents...), outputs the cotangents of the linear inputs. */
jx_program *jx_transpose_program_mask(const jx_program *lin, const uint8_t *linear);

#endif
