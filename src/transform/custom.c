/* Custom derivative rules (jax.custom_vjp, jax.custom_jvp).
 *
 * custom_vjp_call(x...) holds (f, fwd, bwd): it evaluates f; its JVP runs fwd
 * for the outputs and residuals and makes the tangents with custom_lin, a
 * linear primitive whose transpose is bwd. So reverse mode uses bwd, while
 * forward mode of a custom_vjp function is an error, as in JAX. Params: i0
 * residual count, i3 outputs.
 *
 * custom_jvp_call(x...) holds (f, jvp): it evaluates f; its JVP is the jvp
 * program, which must be linear in the tangents (then reverse mode works
 * through it too). */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "ad.h"
#include "build.h"
#include "control.h"

/* Batches every nested program with all inputs and outputs batched at 0. */
static jx_status batch_all(const jx_prim *prim, const jx_params *p, int nin, jx_array *const *in,
                           const int *bdim, int64_t n, int nout, jx_array **out, int *out_bdim,
                           int nsub, jx_program *const *subs) {
  jx_program *bs[JX_EQN_SUBS] = {0};
  jx_array **args = calloc((size_t)nin + 1, sizeof *args);
  jx_status st = args ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", prim->name);
  for (int i = 0; i < nin && !st; i++) args[i] = jx_rule_batch_to_front(in[i], bdim[i], n);
  for (int k = 0; k < nsub && !st; k++) {
    uint8_t *bi = malloc((size_t)subs[k]->nin + 1), *bo = malloc((size_t)subs[k]->nout + 1);
    if (!bi || !bo) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", prim->name);
    if (!st) {
      memset(bi, 1, (size_t)subs[k]->nin);
      memset(bo, 1, (size_t)subs[k]->nout);
      bs[k] = jx_batch_program(subs[k], bi, n, bo);
      if (!bs[k]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    }
    free(bi);
    free(bo);
  }
  if (!st) st = jx_bind_sub(prim, nin, args, p, nsub, bs, out);
  for (int o = 0; o < nout; o++) out_bdim[o] = 0;
  for (int k = 0; k < nsub; k++) jx_program_release(bs[k]);
  free(args);
  return st;
}

/* ---- custom_lin: tangents through bwd ---- */
static jx_status lin_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)in;
  const jx_program *bwd = ctx->subs[0];
  int nres = (int)ctx->params->i[0];
  for (int o = 0; o < ctx->nout; o++) out[o] = bwd->avals[bwd->in[nres + o]];
  return JX_OK;
}

static jx_status impl_lin(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  (void)in;
  (void)out;
  return jx_error_set(JX_ERR_UNIMPLEMENTED,
                      "a jx_custom_vjp function cannot be differentiated in forward mode (jvp); "
                      "give it a jx_custom_jvp rule instead");
}

static jx_status transpose_lin(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,
                               const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  const jx_program *bwd = ctx->subs[0];
  int nres = (int)ctx->params->i[0];
  jx_array **args = calloc((size_t)(nres + ctx->nout) + 1, sizeof *args),
           **res = calloc((size_t)bwd->nout + 1, sizeof *res);
  jx_status st =
      (args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "custom_vjp: out of memory");
  for (int r = 0; r < nres && !st; r++) args[r] = in[r];
  for (int o = 0; o < ctx->nout && !st; o++) {
    jx_aval a = bwd->avals[bwd->in[nres + o]];
    a.weak = 0;
    args[nres + o] = ct[o] ? ct[o] : jx_rule_zeros(a);
  }
  if (!st) st = jx_program_eval(bwd, args, res);
  for (int i = 0; i < ctx->nin && !st; i++) {
    ct_in[i] = i >= nres && linear[i] ? res[i - nres] : NULL;
    if (ct_in[i] &&
        (ct_in[i]->dtype != avals[i].dtype || !jx_shape_equal(ct_in[i]->shape, avals[i].shape))) {
      char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE, "custom_vjp: bwd returns %s for input %d, which is %s",
                        jx_aval_str(ct_in[i]->dtype, ct_in[i]->shape, a), i - nres,
                        jx_aval_str(avals[i].dtype, avals[i].shape, b));
    }
  }
  free(args);
  free(res);
  return st;
}

static jx_status batch_lin(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim, int64_t n,
                           jx_array **out, int *out_bdim) {
  return batch_all(&jx_prim_custom_lin, ctx->params, ctx->nin, in, bdim, n, ctx->nout, out,
                   out_bdim, ctx->nsub, ctx->subs);
}

const jx_prim jx_prim_custom_lin = {.name = "custom_lin",
                                    .id = JX_PRIM_custom_lin,
                                    .nin = JX_VARIADIC,
                                    .nout = JX_NOUT_PARAM,
                                    .params = "num_res=i0",
                                    .infer = jx_wrapper_infer,
                                    .outputs = lin_outputs,
                                    .impl = impl_lin,
                                    .transpose = transpose_lin,
                                    .batch = batch_lin};

/* ---- custom_vjp_call ---- */
static jx_status jvp_custom_vjp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                                jx_array **y, jx_array **ty) {
  int nres = (int)ctx->params->i[0];
  jx_array **fo = calloc((size_t)(ctx->nout + nres) + 1, sizeof *fo);
  jx_array **args = calloc((size_t)(nres + ctx->nin) + 1, sizeof *args),
           **res = calloc((size_t)ctx->nout + 1, sizeof *res);
  jx_status st =
      (fo && args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "custom_vjp: out of memory");
  if (!st) st = jx_program_eval(ctx->subs[1], x, fo); /* fwd: outputs and residuals */
  for (int r = 0; r < nres && !st; r++) args[r] = fo[ctx->nout + r];
  for (int i = 0; i < ctx->nin && !st; i++) {
    jx_aval a = {x[i]->dtype, 0, x[i]->shape, 0};
    args[nres + i] = t[i] ? t[i] : jx_rule_zeros(a);
  }
  if (!st) {
    jx_params q = JX_PARAMS_INIT;
    q.i[0] = nres;
    q.i[3] = ctx->nout;
    st = jx_bind_sub(&jx_prim_custom_lin, nres + ctx->nin, args, &q, 1, &ctx->subs[2], res);
  }
  for (int o = 0; o < ctx->nout && !st; o++) {
    y[o] = fo[o];
    ty[o] = jx_rule_no_tangent(fo[o]->dtype) ? NULL : res[o];
  }
  free(fo);
  free(args);
  free(res);
  return st;
}

static jx_status batch_custom_vjp(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                  int64_t n, jx_array **out, int *out_bdim) {
  return batch_all(&jx_prim_custom_vjp_call, ctx->params, ctx->nin, in, bdim, n, ctx->nout, out,
                   out_bdim, ctx->nsub, ctx->subs);
}

const jx_prim jx_prim_custom_vjp_call = {.name = "custom_vjp_call",
                                         .id = JX_PRIM_custom_vjp_call,
                                         .nin = JX_VARIADIC,
                                         .nout = JX_NOUT_PARAM,
                                         .params = "num_res=i0",
                                         .infer = jx_wrapper_infer,
                                         .outputs = jx_wrapper_outputs,
                                         .impl = jx_wrapper_impl,
                                         .jvp = jvp_custom_vjp,
                                         .batch = batch_custom_vjp};

/* ---- custom_jvp_call ---- */
static jx_status jvp_custom_jvp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                                jx_array **y, jx_array **ty) {
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args),
           **res = calloc(2 * (size_t)ctx->nout + 1, sizeof *res);
  jx_status st =
      (args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "custom_jvp: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) {
    args[i] = x[i];
    args[ctx->nin + i] = t[i] ? t[i] : jx_rule_zeros((jx_aval){x[i]->dtype, 0, x[i]->shape, 0});
  }
  if (!st)
    st = jx_program_eval(ctx->subs[1], args, res); /* inlined: reverse mode sees its equations */
  for (int o = 0; o < ctx->nout && !st; o++) {
    y[o] = res[o];
    ty[o] = jx_rule_no_tangent(res[o]->dtype) ? NULL : res[ctx->nout + o];
  }
  free(args);
  free(res);
  return st;
}

static jx_status batch_custom_jvp(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                  int64_t n, jx_array **out, int *out_bdim) {
  return batch_all(&jx_prim_custom_jvp_call, ctx->params, ctx->nin, in, bdim, n, ctx->nout, out,
                   out_bdim, ctx->nsub, ctx->subs);
}

const jx_prim jx_prim_custom_jvp_call = {.name = "custom_jvp_call",
                                         .id = JX_PRIM_custom_jvp_call,
                                         .nin = JX_VARIADIC,
                                         .nout = JX_NOUT_PARAM,
                                         .params = "",
                                         .infer = jx_wrapper_infer,
                                         .outputs = jx_wrapper_outputs,
                                         .impl = jx_wrapper_impl,
                                         .jvp = jvp_custom_jvp,
                                         .batch = batch_custom_jvp};

JX_REGISTER_PRIMS(custom, &jx_prim_custom_vjp_call, &jx_prim_custom_lin, &jx_prim_custom_jvp_call)

/* ---- the public functions ---- */
typedef struct {
  jx_fn *fwd, *bwd; /* for custom_vjp; fwd is the jvp function for custom_jvp */
} custom_data;

static void free_custom(void *d) {
  custom_data *c = d;
  jx_fn_release(c->fwd);
  jx_fn_release(c->bwd);
  free(c);
}

static jx_status check_types(const char *op, const char *what, int n, const jx_aval *got,
                             const jx_aval *want) {
  for (int i = 0; i < n; i++)
    if (!jx_aval_same_type(got[i], want[i])) {
      char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_SHAPE, "%s: %s %d is %s but must be %s", op, what, i,
                          jx_aval_str(got[i].dtype, got[i].shape, a),
                          jx_aval_str(want[i].dtype, want[i].shape, b));
    }
  return JX_OK;
}

static jx_aval *out_avals(const jx_program *p, int from, int n) {
  jx_aval *a = malloc(sizeof *a * (size_t)(n + 1));
  if (a)
    for (int i = 0; i < n; i++) {
      a[i] = p->avals[p->out[from + i]];
      a[i].weak = 0;
    }
  return a;
}

typedef struct {
  const jx_prim *prim;
  jx_program **subs;
  int nsub, nres, nout;
} call_ctx;

static jx_status one_call(void *ctx, jx_array *const *in, jx_array **out) {
  call_ctx *c = ctx;
  jx_params q = JX_PARAMS_INIT;
  q.i[0] = c->nres;
  q.i[3] = c->nout;
  return jx_bind_sub(c->prim, c->subs[0]->nin, in, &q, c->nsub, c->subs, out);
}

static jx_program *custom_vjp_build(jx_fn *f, const jx_aval *in) {
  const custom_data *d = f->data;
  const char *op = "jx_custom_vjp";
  int nin = f->nin, nout = f->nout;
  jx_program *subs[3] = {jx_fn_program(f->inner, in), NULL, NULL}, *r = NULL;
  jx_aval *fo = NULL, *wo = NULL, *bav = NULL, *bo = NULL;
  jx_status st = subs[0] ? JX_OK : JX_ERR_INTERNAL;
  if (!st) subs[1] = jx_control_trace(op, "fwd", d->fwd, nin, in);
  if (!st && !subs[1]) st = JX_ERR_INTERNAL;
  int nres = st ? 0 : subs[1]->nout - nout;
  if (!st && nres < 0)
    st = jx_error_set(
        JX_ERR_INVALID_ARGUMENT,
        "%s: fwd returns %d values; it must return f's %d outputs and then the residuals", op,
        subs[1]->nout, nout);
  if (!st) {
    fo = out_avals(subs[0], 0, nout);
    wo = out_avals(subs[1], 0, nout + nres);
    bav = malloc(sizeof *bav * (size_t)(nres + nout + 1));
    if (!fo || !wo || !bav) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  if (!st) st = check_types(op, "fwd output", nout, wo, fo);
  if (!st) {
    memcpy(bav, wo + nout, sizeof *bav * (size_t)nres);
    memcpy(bav + nres, fo, sizeof *bav * (size_t)nout);
    subs[2] = jx_control_trace(op, "bwd", d->bwd, nres + nout, bav);
    if (!subs[2]) st = JX_ERR_INTERNAL;
  }
  if (!st && subs[2]->nout != nin)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: bwd returns %d cotangents but f has %d inputs",
                      op, subs[2]->nout, nin);
  if (!st) {
    bo = out_avals(subs[2], 0, nin);
    jx_aval *strong = malloc(sizeof *strong * (size_t)(nin + 1));
    if (!bo || !strong) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    for (int i = 0; i < nin && !st; i++) {
      strong[i] = in[i];
      strong[i].weak = 0;
    }
    if (!st) st = check_types(op, "bwd cotangent", nin, bo, strong);
    free(strong);
  }
  if (!st) {
    call_ctx c = {&jx_prim_custom_vjp_call, subs, 3, nres, nout};
    r = jx_program_build(f->name, nin, in, nout, one_call, &c);
  }
  for (int k = 0; k < 3; k++) jx_program_release(subs[k]);
  free(fo);
  free(wo);
  free(bav);
  free(bo);
  return r;
}

static jx_program *custom_jvp_build(jx_fn *f, const jx_aval *in) {
  const custom_data *d = f->data;
  const char *op = "jx_custom_jvp";
  int nin = f->nin, nout = f->nout;
  jx_program *subs[2] = {jx_fn_program(f->inner, in), NULL}, *r = NULL;
  jx_aval *av = malloc(sizeof *av * (size_t)(2 * nin + 1)), *fo = NULL, *jo = NULL;
  jx_status st = (subs[0] && av) ? JX_OK : JX_ERR_INTERNAL;
  for (int i = 0; i < nin && !st; i++) {
    av[i] = in[i];
    av[nin + i] = in[i];
    av[nin + i].weak = 0;
  }
  if (!st) {
    subs[1] = jx_control_trace(op, "jvp", d->fwd, 2 * nin, av);
    if (!subs[1]) st = JX_ERR_INTERNAL;
  }
  if (!st && subs[1]->nout != 2 * nout)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: the jvp function returns %d values; it must return f's %d outputs and "
                      "their %d tangents",
                      op, subs[1]->nout, nout, nout);
  if (!st) {
    fo = out_avals(subs[0], 0, nout);
    jo = out_avals(subs[1], 0, 2 * nout);
    if (!fo || !jo) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  if (!st) st = check_types(op, "jvp output", nout, jo, fo);
  if (!st) st = check_types(op, "jvp tangent output", nout, jo + nout, fo);
  if (!st) {
    call_ctx c = {&jx_prim_custom_jvp_call, subs, 2, 0, nout};
    r = jx_program_build(f->name, nin, in, nout, one_call, &c);
  }
  jx_program_release(subs[0]);
  jx_program_release(subs[1]);
  free(av);
  free(fo);
  free(jo);
  return r;
}

static const jx_fn_kind custom_vjp_kind = {
    .name = "custom_vjp", .build = custom_vjp_build, .free_data = free_custom};
static const jx_fn_kind custom_jvp_kind = {
    .name = "custom_jvp", .build = custom_jvp_build, .free_data = free_custom};

static jx_fn *make(const jx_fn_kind *kind, const char *op, jx_fn *f, jx_fn *a, jx_fn *b) {
  if (!f || !a || (kind == &custom_vjp_kind && !b)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: a function is NULL", op);
    return NULL;
  }
  custom_data *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->fwd = a;
  d->bwd = b;
  atomic_fetch_add(&a->refs, 1);
  if (b) atomic_fetch_add(&b->refs, 1);
  return jx_fn_new_transform(kind, f, f->nin, f->nout, d);
}

jx_fn *jx_custom_vjp(jx_fn *f, jx_fn *fwd, jx_fn *bwd) {
  return make(&custom_vjp_kind, "jx_custom_vjp", f, fwd, bwd);
}
jx_fn *jx_custom_jvp(jx_fn *f, jx_fn *jvp) {
  return make(&custom_jvp_kind, "jx_custom_jvp", f, jvp, NULL);
}
