/* pvary: a value invariant over some manual mesh axes made one that varies
 * over them (trace/vma.h). The identity on values; what it changes is the
 * type, and so reverse mode: its transpose sums the cotangent over those
 * axes (psum), as an invariant value used on every device collects every
 * device's cotangent. The trace inserts it where an invariant operand meets a
 * varying one; executables drop it (compile/lower.h). Params: the axes (l0,
 * axis ids). */
#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/vma.h"
#include "collective.h"

static jx_status infer_pvary(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)ctx;
  out[0] = in[0];
  return JX_OK;
}

static jx_status impl_pvary(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_keep_in_scope(in[0]);
  return JX_OK;
}

/* the transpose of a cast to varying is a sum over those axes */
static jx_array *sum_over_axes(const jx_rule_ctx *ctx, jx_array *ct, const jx_aval *aval) {
  (void)aval;
  return jx_bind1(&jx_prim_psum, 1, &ct, ctx->params);
}
static JX_DEFLINEAR_TRANSPOSE(transpose_pvary, sum_over_axes)

    static jx_status batch_pvary(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                 int64_t n, jx_array **out, int *out_bdim) {
  (void)n;
  out[0] = jx_bind1(&jx_prim_pvary, 1, &in[0], ctx->params);
  out_bdim[0] = bdim[0];
  return jx_last_status();
}

const jx_prim jx_prim_pvary = {.name = "pvary",
                               .id = JX_PRIM_pvary,
                               .nin = 1,
                               .nout = 1,
                               .params = "axes=l0",
                               .infer = infer_pvary,
                               .impl = impl_pvary,
                               .jvp = jx_jvp_linear_first,
                               .transpose = transpose_pvary,
                               .batch = batch_pvary,
                               .vma = JX_VMA_CAST};

JX_REGISTER_PRIMS(pvary, &jx_prim_pvary)
