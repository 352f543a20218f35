/* Tracing: running a C body on tracers records the primitives it applies into
 * a program. Traces form a per-thread stack; jx_bind records into the trace
 * that owns the innermost tracer among its inputs. A tracer used after its
 * trace ended, or one of an enclosing trace used inside an inner function, is
 * an error that says what to do instead. */
#ifndef JX_SRC_TRACE_TRACE_H
#define JX_SRC_TRACE_TRACE_H

#include "../ir/program.h"

typedef struct jx_trace jx_trace;

/* Starts a trace building a program called name; it becomes the innermost. */
jx_trace *jx_trace_begin(const char *name);
/* A new input variable of the trace, returned as a tracer. */
jx_array *jx_trace_input(jx_trace *t, jx_aval aval);
/* Ends the innermost trace t with outputs outs (tracers of t, concrete arrays
 * that become constants, or inputs) and returns its program (the caller owns
 * a reference), or NULL with the error recorded. Always pops t. */
jx_program *jx_trace_end(jx_trace *t, int nout, jx_array *const *outs);
/* Pops and frees t without a program (after an error in the body). */
void jx_trace_abort(jx_trace *t);

/* 1 while a trace is open on this thread: then every primitive is recorded. */
int jx_trace_active(void);

/* Records p applied to in[] into the right trace (see jx_trace_active) and
 * makes out[] tracers of its results; nsub nested programs go with it. */
jx_status jx_trace_record(const jx_prim *p, const jx_params *params, int nin, jx_array *const *in,
                          int nout, jx_array **out, int nsub, jx_program *const *subs);

/* The location equations recorded from now on carry when no located call of
 * the user's tags them (set while a program is inlined). Returns the old one. */
const char *jx_trace_set_default_loc(const char *loc);

/* The name of the innermost function being traced, or NULL. */
const char *jx_trace_current_name(void);

#endif
