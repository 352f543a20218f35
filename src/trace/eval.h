/* Evaluating a program by applying each equation with jx_bind: on concrete
 * arrays this runs it; on tracers it inlines it into their trace. */
#ifndef JX_SRC_TRACE_EVAL_H
#define JX_SRC_TRACE_EVAL_H

#include "../ir/program.h"

/* in: p->nin arrays; out: p->nout results (owned by the innermost scope). */
jx_status jx_program_eval(const jx_program *p, jx_array *const *in, jx_array **out);

#endif
