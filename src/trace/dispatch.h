/* Applying a primitive: the single entry point every op goes through.
 * When an input is a tracer the application is recorded into its trace;
 * otherwise (all inputs concrete) it runs the shape rule and the reference
 * kernel, or the row's impl for primitives that hold nested programs. */
#ifndef JX_SRC_TRACE_DISPATCH_H
#define JX_SRC_TRACE_DISPATCH_H

#include "../prims/prims.h"

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

/* Checks that none of in[0..n) is NULL, poisoned, released or donated;
 * records an error naming op and the argument and returns non-zero for any
 * (a poisoned one marks the call failed with JX_ERR_POISONED and records no
 * message: the earlier error's is the one kept). */
jx_status jx_check_inputs(const char *op, int n, jx_array *const *in);
/* in[0..nin), or, when that list shares entries with out[0..nout), a copy
 * of it that *copy owns (the caller frees *copy, NULL otherwise): entry
 * points write their outputs (poisoned first) before they have read every
 * input, and f(&w, &w) updates w in place. With no memory for the copy,
 * in itself and an error recorded. */
jx_array *const *jx_inputs_apart(const char *op, jx_array *const *in, int nin, jx_array *const *out,
                                 int nout, jx_array ***copy);

#endif
