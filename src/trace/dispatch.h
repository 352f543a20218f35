/* Applying a primitive (prims/bind.h declares jx_bind; this layer's
 * dispatcher decides how: into the innermost trace, or eagerly) and the
 * checks of every op's inputs. */
#ifndef JX_SRC_TRACE_DISPATCH_H
#define JX_SRC_TRACE_DISPATCH_H

#include "../prims/bind.h"

/* Installs the dispatcher behind jx_bind; runs at load. A static link takes
 * it by name (CMakeLists.txt: JX_STARTUP_SYMBOLS). */
void jx_dispatch_install(void);

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
