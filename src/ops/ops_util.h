/* Helpers shared by the NumPy-level ops: promotion, broadcasting, axis
 * handling, and binding with errors named after the public function. */
#ifndef JX_SRC_OPS_OPS_UTIL_H
#define JX_SRC_OPS_OPS_UTIL_H

#include <jx/ops.h>
#include <jx/transform.h>
#include <stdatomic.h>

#include "../base/error.h"
#include "../trace/dispatch.h"

/* a converted to dt (weak as given); a itself when nothing changes. */
jx_array *jx_ops_convert(jx_array *a, jx_dtype dt, int weak);
/* NumPy broadcasting of two shapes; records an error naming op on mismatch. */
jx_status jx_ops_broadcast_shapes(const char *op, jx_shape a, jx_shape b, jx_shape *out);
/* a broadcast to s (trailing alignment); a itself when the shape already is s. */
jx_array *jx_ops_broadcast(jx_array *a, jx_shape s);
/* Promotes *a and *b to their common dtype (JAX's lattice with weak types)
 * and broadcasts them to a common shape. */
jx_status jx_ops_promote_broadcast(const char *op, jx_array **a, jx_array **b);
/* op(a, b) through primitive p after promotion and broadcasting. */
jx_array *jx_ops_binary(const char *op, const jx_prim *p, jx_array *a, jx_array *b);
/* Turns a user axis list into sorted, distinct, normalized axes; JX_AXES()
 * gives every axis when empty_is_all is set. Records an error naming op. */
jx_status jx_ops_axes(const char *op, jx_axes ax, int rank, int empty_is_all, jx_ilist *out);

/* idx + n where idx < 0, in idx's dtype (unsigned indices are never
 * negative): the one wrap of a negative index or start that jnp.take and
 * lax.dynamic_slice make before clamping. A weak index (a scalar written
 * as a literal) works the same. */
jx_array *jx_ops_wrap_negative(jx_array *idx, int64_t n);

/* The function f with the custom JVP jvp (jx_custom_jvp), made on first use
 * and kept for the process in *slot (thread-safe): an op with JAX's custom
 * derivative (softmax, relu, gelu) calls it, so reverse mode keeps what the rule
 * needs rather than what the formula's own derivative would. NULL with an
 * error recorded when it cannot be made. */
jx_fn *jx_ops_custom_jvp_once(_Atomic(jx_fn *) *slot, const char *name, int nin, int nout,
                              jx_body f, jx_body jvp, void *ctx);
/* What makes those functions: jx_custom_jvp, the transform layer's, which
 * installs it at load (transform/install.c). */
typedef jx_fn *(*jx_custom_jvp_maker)(jx_fn *f, jx_fn *jvp);
void jx_ops_custom_jvp_install(jx_custom_jvp_maker make);
/* y = f(x) through such a function; the poison value on failure. */
jx_array *jx_ops_call1(jx_fn *f, jx_array *x);

/* ---- for the jax.numpy composites (np_*.c) ---- */
/* v as a scalar of a's dtype, weak when a is: a constant that never changes
 * a's type in a binary op. */
jx_array *jx_ops_const_like(jx_array *a, double v);
/* a[start:stop:step] along axis (0 <= start <= stop, step > 0), the other axes whole. */
jx_array *jx_ops_slice_axis(jx_array *a, int axis, int64_t start, int64_t stop, int64_t step);
/* JX_OK when a has rank `rank`, else an error naming op, what and a's type. */
jx_status jx_ops_need_rank(const char *op, const char *what, jx_array *a, int rank);
/* a converted to the float dtype floating functions compute in (weak kept). */
jx_array *jx_ops_inexact(jx_array *a);
/* jnp's where= of a reduction over a: the bool `where` broadcast to a's shape, or NULL with an
 * error naming op when it is not bool or does not broadcast. */
jx_array *jx_ops_where_mask(const char *op, jx_array *where, jx_array *a);
/* the mean over ax of the float x's elements where the mask (x's shape) holds */
jx_array *jx_ops_mean_where(jx_array *x, jx_axes ax, jx_array *mask, int keepdims);

#endif
