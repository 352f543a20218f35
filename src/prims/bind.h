/* Applying a primitive: the entry point every op and every rule goes
 * through. When an input is a tracer the application is recorded into its
 * trace; otherwise (all inputs concrete) it runs the shape rule and the
 * reference kernel, or the row's impl for primitives that hold nested
 * programs. How it applies is the trace layer's (trace/dispatch.c), which
 * installs its dispatcher at load; the rules here call it from below. */
#ifndef JX_SRC_PRIMS_BIND_H
#define JX_SRC_PRIMS_BIND_H

#include "prims.h"

/* Applies p with params to in[0..nin) and stores jx_prim_nout(p, nin, params) results
 * in out (owned by the innermost scope). On error, or when an input is
 * poisoned, every out[i] is the poison value and the status is returned (the
 * error itself is recorded by whoever found it first). params may be NULL. */
jx_status jx_bind(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                  jx_array **out);
/* The general form: with nsub nested programs (control flow). */
jx_status jx_bind_sub(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                      int nsub, struct jx_program *const *subs, jx_array **out);
/* The single-output form; returns the poison value on error. */
jx_array *jx_bind1(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params);

/* What jx_bind_sub calls, with params never NULL. */
typedef jx_status (*jx_bind_fn)(const jx_prim *p, int nin, jx_array *const *in,
                                const jx_params *params, int nsub, struct jx_program *const *subs,
                                jx_array **out);
void jx_bind_install(jx_bind_fn dispatch);

#endif
