/* Named axes inside transformed functions: jx_axis_size and jx_axis_index
 * (the position along a named vmap axis, as jax.lax.axis_index). The index is
 * the primitive axis_index, recorded while the unbatched body is traced and
 * turned into an iota by the batching of the vmap that binds its axis. The
 * collectives of shard_map and pmap use the same environment. */
#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/axis_env.h"
#include "../trace/trace.h"

static jx_status infer_axis_index(const jx_params *p, int nin, const jx_aval *in, int nout,
                                  jx_aval *out) {
  (void)p;
  (void)nin;
  (void)in;
  (void)nout;
  out[0] = (jx_aval){JX_I32, 0, {0, {0}}};
  return JX_OK;
}

static void eval_axis_index(const jx_params *p, int nin, const jx_tensor *in, int nout,
                            jx_tensor *out) {
  (void)p;
  (void)nin;
  (void)in;
  (void)nout;
  (void)out;
}

static jx_status impl_axis_index(const jx_params *p, int nin, jx_array *const *in, int nout,
                                 jx_array **out, int nsub, struct jx_program *const *subs) {
  (void)nin;
  (void)in;
  (void)nout;
  (void)out;
  (void)nsub;
  (void)subs;
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_axis_index: the axis '%s' is not bound here; call it inside a "
                      "function mapped by jx_vmap_axis with that name",
                      jx_axis_name((int)p->i[0]));
}

static jx_status batch_axis_index(const jx_params *p, int nin, jx_array *const *in, const int *bdim,
                                  int64_t n, int nout, jx_array **out, int *out_bdim, int nsub,
                                  struct jx_program *const *subs) {
  (void)nin;
  (void)in;
  (void)bdim;
  (void)nout;
  (void)nsub;
  (void)subs;
  if (p->i[0] != 0 && p->i[0] == jx_axis_innermost_id()) {
    out[0] = jx_iota(JX_I32, (jx_shape){1, {n}}, 0);
    out_bdim[0] = 0;
  } else { /* another (outer) axis: its own vmap handles it */
    out[0] = jx_bind1(&jx_prim_axis_index, 0, NULL, p);
    out_bdim[0] = JX_NOT_MAPPED;
  }
  return jx_last_status();
}

const jx_prim jx_prim_axis_index = {.name = "axis_index",
                                    .nin = 0,
                                    .nout = 1,
                                    .params = "axis=i0",
                                    .infer = infer_axis_index,
                                    .eval = eval_axis_index,
                                    .impl = impl_axis_index,
                                    .jvp = jx_jvp_zero,
                                    .batch = batch_axis_index,
                                    .uses_axis = 1};

int jx_axis_size(const char *axis) {
  int64_t n = jx_axis_env_size(axis);
  if (n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_axis_size: no enclosing transformation binds an axis named '%s'",
                 axis ? axis : "(null)");
    return -1;
  }
  return (int)n;
}

jx_array *jx_axis_index(const char *axis) {
  if (jx_axis_env_size(axis) < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_axis_index: no enclosing transformation binds an axis named '%s'",
                 axis ? axis : "(null)");
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = jx_axis_id(axis);
  return jx_bind1(&jx_prim_axis_index, 0, NULL, &p);
}
