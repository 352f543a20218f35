/* jx/transform.h: functions and their transformations.
 *
 * A jx_fn is a pure function of arrays written as a C body. Calling it traces
 * the body once per input signature (dtypes, shapes, weak flags) into a
 * program of primitives, cached; transformations (jit, grad, vmap, ...) turn
 * programs into programs and compose in any order. The body is called with
 * tracers, abstract arrays known by shape and dtype only: it must not keep
 * them, and it cannot read their values (use jx_cond/jx_while/jx_scan for
 * control flow that depends on data).
 *
 * Ownership: every jx_fn returned here is owned by the caller and released
 * with jx_fn_release; a transformed function holds a reference to the
 * function it transforms, so the caller may release that one at any time.
 * Thread safety: a jx_fn may be called from several threads at once. */
#ifndef JX_TRANSFORM_H
#define JX_TRANSFORM_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jx_fn jx_fn;
typedef struct jx_sharding jx_sharding;

/* in[0..nin) are the inputs; the body must set out[0..nout). */
typedef void (*jx_body)(void *ctx, jx_array *const *in, jx_array **out);

JX_API jx_fn *jx_fn_create(const char *name, int nin, int nout, jx_body body, void *ctx);
/* The same, and the function owns ctx: free_ctx(ctx) runs when it is
 * released (also when creating it fails). */
JX_API jx_fn *jx_fn_create_owning(const char *name, int nin, int nout, jx_body body, void *ctx,
                                  void (*free_ctx)(void *ctx));
JX_API void jx_fn_release(jx_fn *f);
JX_API int jx_fn_nin(const jx_fn *f);
JX_API int jx_fn_nout(const jx_fn *f);
JX_API const char *jx_fn_name(const jx_fn *f);

/* Calls f (also inside other bodies, where it is inlined into the caller's
 * trace). A body may call the function being traced only with inputs of
 * other shapes (a recursion over shapes, which ends): with the same shapes
 * it is an error naming the chain of calls, and traces nest at most 256
 * functions deep. out[i] belong to the innermost scope. On error every out[i] is
 * poisoned and the status says why. A jitted f may return before its run
 * ends (async dispatch; JX_ASYNC_DISPATCH=0 turns it off): reading an
 * output (jx_read, jx_block_until_ready, an op) waits for it, and an error
 * of the run is reported there. */
JX_API jx_status jx_call(jx_fn *f, jx_array *const *in, jx_array **out);

typedef struct jx_mesh jx_mesh;

typedef struct {
  jx_sharding *const *in_shardings;  /* NULL: inferred / as given */
  jx_sharding *const *out_shardings; /* NULL: chosen by propagation */
  const int *donate;                 /* per input, 1 = may reuse its buffer */
  jx_mesh *mesh;        /* the mesh JX_AUTO entries plan for when no other entry names one */
  int64_t memory_limit; /* JX_AUTO: bytes per device the plan may hold; 0: the device's memory */
} jx_jit_options;

/* JX_AUTO as an entry of in_shardings or out_shardings, or as the layout of
 * jx_with_sharding_constraint inside the function, asks jx to choose that
 * layout (automatic sharding, docs/parallel.md). For each input signature
 * the sharded jit traces the function and the planner picks, for the mesh
 * of the other entries (else opts->mesh), the cheapest layouts whose peak
 * memory per device fits memory_limit, priced with the mesh's measured
 * figures; each JX_AUTO input, output and constraint takes the plan's
 * layout, and the per-device program runs the plan's layout of every
 * value. Plans are kept for the process (by program, mesh and limit);
 * JX_LOG_COMPILES=1 prints the layouts chosen, JX_LOG_SHARDING=1 the plan's
 * report (jx_sharding_plan_print in jx/parallel.h). A limit no plan meets
 * is an error at the call naming the smallest peak found and what holds it.
 * JX_AUTO is a marker, valid only there (never released). */
JX_API jx_sharding *jx_sharding_auto(void);
#define JX_AUTO (jx_sharding_auto())
/* Donation (as JAX's donate_argnums): a donated input's buffer may be freed
 * after its last use in the call or become an output's; the caller's array
 * is then marked donated, and every later use of it (jx_read, ops, jx_call)
 * fails with an error naming the function and the input, while jx_release
 * still frees it. An input whose buffer is shared with another array, that
 * is sharded, or that is passed at two positions is not donated (one line
 * under JX_LOG_COMPILES=1). Jit with shardings ignores donation, and so
 * does a run on sharded arguments, but for one thing: a JX_AUTO output a
 * donated input's buffer would go to (the first output of its type not
 * taken by an input before, JAX's pairing) is given back in the input's
 * planned layout, the relaying priced by the plan, so that a training
 * loop feeds the step's updated parameters and moments to the next call
 * as they come.
 *
 * Without shardings, a jitted function called on sharded arguments runs on
 * their mesh, partitioned by their layouts, its outputs sharded as
 * propagation chose (computation follows data, jx/parallel.h); on unsharded
 * arguments it runs on one device. */

JX_API jx_fn *jx_jit(jx_fn *f, const jx_jit_options *opts); /* opts may be NULL */

/* ---- automatic differentiation (argnums JX_AXES() means argument 0) ---- */
/* f's first output: a float scalar; one output per argnum: the gradient of
 * that input, which may be float or complex. For complex inputs the
 * gradient is JAX's: the conjugate of df/dx + i df/dy, i.e. what moves f
 * most when subtracted (docs/dtypes.md, "Complex numbers"). */
JX_API jx_fn *jx_grad(jx_fn *f, jx_axes argnums);
/* JAX's holomorphic=True: f's first output is a complex scalar, the
 * arguments are complex, and the result is the complex derivative f'(z)
 * (jx_grad_holomorphic and jx_value_and_grad_holomorphic). */
JX_API jx_fn *jx_grad_holomorphic(jx_fn *f, jx_axes argnums);
JX_API jx_fn *jx_value_and_grad_holomorphic(jx_fn *f, jx_axes argnums, int has_aux);
/* (value, aux outputs if has_aux, gradients...) */
JX_API jx_fn *jx_value_and_grad(jx_fn *f, jx_axes argnums, int has_aux);
/* The same with argnums as a list of any length (jx_axes holds at most
 * JX_MAX_RANK): argnums[0..n), negative ones counting from the end; n = 0
 * means argument 0. */
JX_API jx_fn *jx_grad_argnums(jx_fn *f, int n, const int *argnums);
JX_API jx_fn *jx_value_and_grad_argnums(jx_fn *f, int n, const int *argnums, int has_aux);
/* value_and_grad with respect to the first n inputs, however many (a
 * parameter tree flattened in front of the data: jx_tree_flatten). */
JX_API jx_fn *jx_value_and_grad_first(jx_fn *f, int n, int has_aux);
JX_API jx_fn *jx_jvp(jx_fn *f); /* (primals..., tangents...) -> (outs..., tangent outs...) */
/* The JVP with tangents for argnums[0..n) only (the others are zero and cost
 * nothing): (primals..., tangents of argnums[0], ..., argnums[n-1]) ->
 * (outs..., tangent outs...). */
JX_API jx_fn *jx_jvp_argnums(jx_fn *f, int n, const int *argnums);
/* (primals..., cotangents...) -> (outs..., input cotangents...); integer inputs get zero
 * cotangents, as JAX's float0 */
JX_API jx_fn *jx_vjp(jx_fn *f);

/* Custom derivatives. jx_custom_vjp: fwd takes f's inputs and returns (f's
 * outputs..., residuals...); bwd takes (residuals..., output cotangents...)
 * and returns the input cotangents; reverse mode uses them, forward mode is
 * an error (as JAX). jx_custom_jvp: jvp takes (primals..., tangents...) and
 * returns (outputs..., tangent outputs...), linear in the tangents; both
 * modes use it. The results hold references to every function given. */
JX_API jx_fn *jx_custom_vjp(jx_fn *f, jx_fn *fwd, jx_fn *bwd);
JX_API jx_fn *jx_custom_jvp(jx_fn *f, jx_fn *jvp);

/* Rematerialization (jax.checkpoint): in reverse mode, values computed inside
 * f are recomputed in the backward pass instead of being stored, except what
 * the policy saves (JX_SAVE_DOTS: dot_general results, the costly ones). */
typedef enum { JX_SAVE_NOTHING, JX_SAVE_DOTS } jx_remat_policy;
JX_API jx_fn *jx_checkpoint(jx_fn *f);
JX_API jx_fn *jx_checkpoint_with_policy(jx_fn *f, jx_remat_policy policy);

/* Jacobians of every output with respect to input argnum: output o's has
 * shape out_o.shape + in.shape (jacfwd: forward mode over the input's basis;
 * jacrev: reverse mode over each output's basis). hessian = jacfwd(jacrev). */
JX_API jx_fn *jx_jacfwd(jx_fn *f, int argnum);
JX_API jx_fn *jx_jacrev(jx_fn *f, int argnum);
/* With respect to several inputs: nout * n outputs, output o's Jacobians
 * together, out[o * n + k] with respect to input argnums[k] (JAX's jacfwd
 * and jacrev with an argnums tuple, flattened). */
JX_API jx_fn *jx_jacfwd_argnums(jx_fn *f, int n, const int *argnums);
JX_API jx_fn *jx_jacrev_argnums(jx_fn *f, int n, const int *argnums);
JX_API jx_fn *jx_hessian(jx_fn *f, int argnum);

/* ---- batching ----
 * in_axes/out_axes: one entry per input/output (or a single entry for all;
 * JX_AXES() means 0 for all); an entry is the mapped axis (negative counts
 * from the end) or JX_NONE. All mapped inputs must agree on the batch size. */
JX_API jx_fn *jx_vmap(jx_fn *f, jx_axes in_axes, jx_axes out_axes);
/* The same with a name for the mapped axis, which the body can use with
 * jx_axis_size and jx_axis_index (and, with the parallel API, collectives). */
JX_API jx_fn *jx_vmap_axis(jx_fn *f, jx_axes in_axes, jx_axes out_axes, const char *axis_name);

/* Inside a function mapped over a named axis: its size (-1 and an error if no
 * enclosing transformation binds it), and this element's position along it
 * (an i32 scalar). */
JX_API int jx_axis_size(const char *axis);
JX_API jx_array *jx_axis_index(const char *axis);

/* ---- control flow ----
 * Bodies are jx_fn; all of these work eagerly and under jit, grad and vmap.
 * out[] receives the results (owned by the innermost scope).
 *   cond/switch: branches take ops... and give outs... of the same types in
 *     every branch; switch clamps the index into range, as lax.switch.
 *   while: cond_fn: carry... -> bool scalar; body_fn: carry... -> carry...
 *     (forward-mode differentiable; reverse mode needs jx_scan or jx_fori).
 *   scan: body: (carry..., x slices...) -> (new carry..., y slices...);
 *     out: (final carry..., ys stacked on a new leading axis...); xs are
 *     sliced along their leading axis, which must equal length; reverse runs
 *     from the end (ys keep their positions).
 *   fori: body: (i as an i32 scalar, carry...) -> carry..., for i in [lo, hi). */
JX_API jx_status jx_cond(jx_array *pred, jx_fn *then_fn, jx_fn *else_fn, int n,
                         jx_array *const *ops, jx_array **out);
JX_API jx_status jx_switch(jx_array *index, int nbranches, jx_fn *const *branches, int n,
                           jx_array *const *ops, jx_array **out);
JX_API jx_status jx_while(jx_fn *cond_fn, jx_fn *body_fn, int n, jx_array *const *init,
                          jx_array **out);
JX_API jx_status jx_scan(jx_fn *body, int ncarry, jx_array *const *init, int nxs,
                         jx_array *const *xs, int64_t length, int reverse, jx_array **out);
JX_API jx_status jx_fori(int64_t lo, int64_t hi, jx_fn *body, int n, jx_array *const *init,
                         jx_array **out);

/* lax.map, lax.associative_scan and lax.reduce with a generic monoid, built on
 * jx_scan, slices and jx_vmap, so that they differentiate, batch and jit
 * wherever their functions do.
 *   map: f applied to each slice of xs[0..nxs) along their leading axis (one
 *     length), its outputs stacked along a new leading axis in out.
 *   associative_scan: fn: (a[0..n), b[0..n)) -> c[0..n), associative and
 *     applied to whole arrays (each element of a with the same element of b,
 *     as lax.associative_scan needs); out[i] has elems[i]'s shape, element k
 *     the combination of elements 0..k along axis (k..end when reverse).
 *   reduce: fn the same shape of monoid on scalars (vmapped over the other
 *     axes), init[i] its identity (a scalar of operand i's dtype); operands
 *     reduced over axes (JX_AXES(): none) by a pairwise tree, JAX's order
 *     for its derivative. */
JX_API jx_status jx_map(jx_fn *f, int nxs, jx_array *const *xs, jx_array **out);
/* map with lax.map's batch_size: f vmapped over batches of batch_size slices,
 * the batches in a scan, the remainder after them (the same outputs as jx_map) */
JX_API jx_status jx_map_batched(jx_fn *f, int64_t batch_size, int nxs, jx_array *const *xs,
                                jx_array **out);
JX_API jx_status jx_associative_scan(jx_fn *fn, int n, jx_array *const *elems, int reverse,
                                     int axis, jx_array **out);
JX_API jx_status jx_reduce(jx_fn *fn, int n, jx_array *const *operands, jx_array *const *init,
                           jx_axes axes, jx_array **out);

/* The printed program of f for the signature of example_in (optimizations
 * applied as a call would), or NULL with the error recorded. Caller frees. */
JX_API char *jx_fn_ir(jx_fn *f, jx_array *const *example_in);

/* Ahead of time, without running f: flops (one per elementwise result,
 * 2*M*N*K per contraction), bytes moved between memory and kernels, and the
 * peak of live buffers with every intermediate freed after its last use, for
 * the program the jit runs for inputs like example_in. A jx_checkpoint
 * region counts its own work where it runs, and its recomputation in the
 * backward pass where that runs. The peak sees into a jx_cond/jx_switch
 * (its hungriest branch) and a jx_shard_map (the body each device runs, so
 * a pipeline's per-stage peak); their work is not in flops and bytes. */
typedef struct {
  double flops, bytes_accessed, peak_bytes_per_device;
} jx_cost;
JX_API jx_status jx_fn_cost(jx_fn *f, jx_array *const *example_in, jx_cost *out);

/* jax.eval_shape: traces f for inputs like example_in (arrays, or shapes and
 * dtypes from jx_shape_dtype_struct) without running it, and gives its
 * outputs' shapes and dtypes as jx_shape_dtype_struct arrays in out
 * (f's nout of them). */
JX_API jx_status jx_eval_shape(jx_fn *f, jx_array *const *example_in, jx_array **out);

/* How many times f's bodies were traced and its programs transformed, for
 * tests and for JX_LOG_COMPILES. */
JX_API int64_t jx_fn_trace_count(const jx_fn *f);

#ifndef JX_NO_LOCATION_MACROS
#define jx_call(...)             JX_LOCATED_STATUS(jx_call, __VA_ARGS__)
#define jx_cond(...)             JX_LOCATED_STATUS(jx_cond, __VA_ARGS__)
#define jx_switch(...)           JX_LOCATED_STATUS(jx_switch, __VA_ARGS__)
#define jx_while(...)            JX_LOCATED_STATUS(jx_while, __VA_ARGS__)
#define jx_scan(...)             JX_LOCATED_STATUS(jx_scan, __VA_ARGS__)
#define jx_fori(...)             JX_LOCATED_STATUS(jx_fori, __VA_ARGS__)
#define jx_map(...)              JX_LOCATED_STATUS(jx_map, __VA_ARGS__)
#define jx_map_batched(...)      JX_LOCATED_STATUS(jx_map_batched, __VA_ARGS__)
#define jx_associative_scan(...) JX_LOCATED_STATUS(jx_associative_scan, __VA_ARGS__)
#define jx_reduce(...)           JX_LOCATED_STATUS(jx_reduce, __VA_ARGS__)

#define jx_fn_create(...)        JX_LOCATED_PTR(jx_fn *, jx_fn_create, __VA_ARGS__)
#define jx_fn_create_owning(...) JX_LOCATED_PTR(jx_fn *, jx_fn_create_owning, __VA_ARGS__)
#define jx_jit(...)              JX_LOCATED_PTR(jx_fn *, jx_jit, __VA_ARGS__)
#define jx_grad(...)             JX_LOCATED_PTR(jx_fn *, jx_grad, __VA_ARGS__)
#define jx_grad_holomorphic(...) JX_LOCATED_PTR(jx_fn *, jx_grad_holomorphic, __VA_ARGS__)
#define jx_value_and_grad_holomorphic(...)                                                         \
  JX_LOCATED_PTR(jx_fn *, jx_value_and_grad_holomorphic, __VA_ARGS__)
#define jx_value_and_grad(...)       JX_LOCATED_PTR(jx_fn *, jx_value_and_grad, __VA_ARGS__)
#define jx_value_and_grad_first(...) JX_LOCATED_PTR(jx_fn *, jx_value_and_grad_first, __VA_ARGS__)
#define jx_jvp(...)                  JX_LOCATED_PTR(jx_fn *, jx_jvp, __VA_ARGS__)
#define jx_vjp(...)                  JX_LOCATED_PTR(jx_fn *, jx_vjp, __VA_ARGS__)
#define jx_custom_vjp(...)           JX_LOCATED_PTR(jx_fn *, jx_custom_vjp, __VA_ARGS__)
#define jx_custom_jvp(...)           JX_LOCATED_PTR(jx_fn *, jx_custom_jvp, __VA_ARGS__)
#define jx_checkpoint(...)           JX_LOCATED_PTR(jx_fn *, jx_checkpoint, __VA_ARGS__)
#define jx_checkpoint_with_policy(...)                                                             \
  JX_LOCATED_PTR(jx_fn *, jx_checkpoint_with_policy, __VA_ARGS__)
#define jx_jacfwd(...)     JX_LOCATED_PTR(jx_fn *, jx_jacfwd, __VA_ARGS__)
#define jx_jacrev(...)     JX_LOCATED_PTR(jx_fn *, jx_jacrev, __VA_ARGS__)
#define jx_hessian(...)    JX_LOCATED_PTR(jx_fn *, jx_hessian, __VA_ARGS__)
#define jx_vmap(...)       JX_LOCATED_PTR(jx_fn *, jx_vmap, __VA_ARGS__)
#define jx_vmap_axis(...)  JX_LOCATED_PTR(jx_fn *, jx_vmap_axis, __VA_ARGS__)
#define jx_fn_ir(...)      JX_LOCATED_PTR(char *, jx_fn_ir, __VA_ARGS__)
#define jx_axis_index(...) JX_LOCATED(jx_axis_index, __VA_ARGS__)
#define jx_fn_cost(...)    JX_LOCATED_STATUS(jx_fn_cost, __VA_ARGS__)
#define jx_eval_shape(...) JX_LOCATED_STATUS(jx_eval_shape, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
