/* Program simplification, the compiler's first passes: algebraic identities,
 * constant folding of small values, common-subexpression elimination and
 * dead-code elimination, applied to nested programs too. Every rewrite keeps
 * results bit for bit (no reassociation, no sign-of-zero changes). */
#ifndef JX_SRC_COMPILE_SIMPLIFY_H
#define JX_SRC_COMPILE_SIMPLIFY_H

#include "../ir/program.h"

/* A simplified copy of p (a new reference), or NULL with the error recorded. */
jx_program *jx_simplify(const jx_program *p);

#endif
