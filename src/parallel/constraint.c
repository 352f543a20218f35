#include "constraint.h"

#include <string.h>

#include <jx/transform.h>

#include "../array/array.h"
#include "../base/error.h"
#include "../prims/rules.h"

static jx_status infer_constraint(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  out[0] = in[0];
  if (!ctx->params->i[0]) return JX_OK; /* JX_AUTO */
  jx_sharding *s = jx_sharding_from_id((int)ctx->params->i[0]);
  if (!s) return jx_error_set(JX_ERR_INTERNAL, "sharding_constraint: unknown sharding");
  return jx_sharding_check(s, in[0].shape, "jx_with_sharding_constraint");
}

static void eval_constraint(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  memcpy(out[0].data, in[0].data, (size_t)jx_shape_numel(in[0].shape) * jx_dtype_size(in[0].dtype));
}

/* Run on concrete values, the constraint is a jx_device_put (JX_AUTO, left
 * unplanned: the value as it is). */
static jx_status impl_constraint(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  if (!ctx->params->i[0]) {
    out[0] = jx_keep_in_scope(in[0]);
    return JX_OK;
  }
  out[0] = jx_device_put(in[0], jx_sharding_from_id((int)ctx->params->i[0]));
  return out[0]->poisoned ? jx_last_status() : JX_OK;
}

/* the cotangent is constrained alike */
static jx_array *constrain(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  return jx_rule_apply1(ctx, &ct);
}
static JX_DEFLINEAR_TRANSPOSE(transpose_constraint, constrain)

    /* Under vmap the batch axis is not split: the spec gets a "None" entry there. */
    static jx_status batch_constraint(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                      int64_t n, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  (void)n;
  if (!p->i[0]) { /* JX_AUTO stays JX_AUTO */
    out[0] = jx_bind1(&jx_prim_sharding_constraint, 1, in, p);
    out_bdim[0] = bdim[0];
    return jx_last_status();
  }
  jx_sharding *s = jx_sharding_from_id((int)p->i[0]);
  int b = bdim[0], nd = 0, naxes[JX_MAX_RANK] = {0}, axis[JX_MAX_RANK][JX_MAX_RANK];
  int rank = in[0]->shape.rank;
  for (int d = 0; d < rank; d++) {
    int src = d < b ? d : d - 1; /* the unbatched dim this one is */
    if (d == b || src >= s->ndims) continue;
    naxes[d] = s->naxes[src];
    memcpy(axis[d], s->axis[src], sizeof axis[d]);
    nd = d + 1;
  }
  jx_sharding *t = jx_sharding_make(s->mesh, nd, naxes, (const int(*)[JX_MAX_RANK])axis,
                                    "jx_with_sharding_constraint");
  if (!t) return jx_last_status();
  jx_params q = *p;
  q.i[0] = t->id;
  jx_sharding_release(t);
  out[0] = jx_bind1(&jx_prim_sharding_constraint, 1, in, &q);
  out_bdim[0] = b;
  return jx_last_status();
}

const jx_prim jx_prim_sharding_constraint = {.name = "sharding_constraint",
                                             .id = JX_PRIM_sharding_constraint,
                                             .nin = 1,
                                             .nout = 1,
                                             .params = "sharding=i0",
                                             .infer = infer_constraint,
                                             .eval = eval_constraint,
                                             .impl = impl_constraint,
                                             .jvp = jx_jvp_linear_first,
                                             .transpose = transpose_constraint,
                                             .batch = batch_constraint};

JX_REGISTER_PRIMS(constraint, &jx_prim_sharding_constraint)

jx_array *jx_sharding_constraint(jx_array *x, jx_sharding *s) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = s == jx_sharding_auto() ? 0 : s->id;
  return jx_bind1(&jx_prim_sharding_constraint, 1, &x, &p);
}

jx_sharding *jx_constraint_sharding(const jx_eqn *e) {
  return e->params.i[0] ? jx_sharding_from_id((int)e->params.i[0]) : NULL;
}
