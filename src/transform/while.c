/* while: repeat a body program while a condition program holds. Operands:
 * the carries; subs: (cond: carry... -> bool[], body: carry... -> carry...).
 * Differentiable in forward mode (the tangents ride along as extra carries);
 * reverse mode would need the trip count in advance, so it is an error that
 * points to jx_scan / jx_fori. Batching with a batched condition runs until
 * every lane is done, freezing the finished lanes, as JAX does. */
#include <stdlib.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/dispatch.h"
#include "ad.h"
#include "build.h"
#include "control.h"
#include "partial_eval.h"

static jx_status infer_while(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  for (int o = 0; o < ctx->nout && o < ctx->nin; o++) out[o] = in[o];
  return JX_OK;
}

static jx_status while_outputs(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  if (ctx->nsub != 2) return jx_error_set(JX_ERR_INTERNAL, "while: needs cond and body programs");
  const jx_program *body = ctx->subs[1];
  for (int o = 0; o < ctx->nin; o++) {
    out[o] = in[o];
    out[o].weak = body->avals[body->out[o]].weak && in[o].weak;
  }
  return JX_OK;
}

static jx_status impl_while(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  jx_array **c = malloc(sizeof *c * (size_t)(ctx->nin + 1)),
           **next = malloc(sizeof *next * (size_t)(ctx->nin + 1));
  jx_status st = (c && next) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) c[i] = in[i];
  for (;;) {
    if (st) break;
    jx_array *pred;
    jx_scope_begin();
    st = jx_program_eval(ctx->subs[0], c, &pred);
    int go = !st && jx_item(pred) != 0;
    jx_scope_end();
    if (st || !go) break;
    st = jx_program_eval(ctx->subs[1], c, next);
    for (int i = 0; i < ctx->nin && !st; i++) c[i] = next[i];
  }
  for (int i = 0; i < ctx->nin && !st; i++) out[i] = c[i];
  free(c);
  free(next);
  return st;
}

/* ---- JVP: tangents as extra carries ---- */
typedef struct {
  const jx_program *cond;
  int n;
} cond_only;

static jx_status cond_on_primals(void *ctx, jx_array *const *in, jx_array **out) {
  cond_only *c = ctx;
  return jx_program_eval(c->cond, in, out);
}

static jx_status jvp_while(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty) {
  uint8_t *nz = calloc((size_t)ctx->nin + 1, 1), *nz_out = calloc((size_t)ctx->nin + 1, 1);
  jx_aval *av = malloc(sizeof *av * (size_t)(2 * ctx->nin + 1));
  jx_array **args = calloc(2 * (size_t)ctx->nin + 1, sizeof *args),
           **res = calloc(2 * (size_t)ctx->nin + 1, sizeof *res);
  jx_program *subs2[2] = {NULL, NULL};
  jx_status st = (nz && nz_out && av && args && res)
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) nz[i] = t[i] != NULL;
  /* a carry's tangent is non-zero if it starts so or the body makes it so */
  if (!st) st = jx_carry_fixpoint(ctx->subs[1], ctx->nin, jx_jvp_nonzero_outputs, NULL, nz, nz_out);
  int n = 0;
  for (int i = 0; i < ctx->nin && !st; i++) av[n++] = ctx->subs[1]->avals[ctx->subs[1]->in[i]];
  for (int i = 0; i < ctx->nin && !st; i++)
    if (nz[i]) {
      jx_aval a = ctx->subs[1]->avals[ctx->subs[1]->in[i]];
      a.weak = 0;
      av[n++] = a;
    }
  if (!st) {
    subs2[1] = jx_jvp_program(ctx->subs[1], nz, nz);
    cond_only cc = {ctx->subs[0], ctx->nin};
    subs2[0] = jx_program_build("while_cond", n, av, 1, cond_on_primals, &cc);
    if (!subs2[0] || !subs2[1]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  int k = 0;
  for (int i = 0; i < ctx->nin && !st; i++) args[k++] = x[i];
  for (int i = 0; i < ctx->nin && !st; i++)
    if (nz[i]) args[k++] = t[i] ? t[i] : jx_rule_zeros_like(x[i]);
  if (!st) st = jx_bind_sub(&jx_prim_while, k, args, ctx->params, 2, subs2, res);
  for (int i = 0, j = ctx->nin; i < ctx->nin && !st; i++) {
    y[i] = res[i];
    ty[i] = nz[i] ? res[j++] : NULL;
  }
  jx_program_release(subs2[0]);
  jx_program_release(subs2[1]);
  free(nz);
  free(nz_out);
  free(av);
  free(args);
  free(res);
  return st;
}

static jx_status pe_while(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                          uint8_t *unknown_out, jx_pe_eqn *known, jx_pe_eqn *unknown, int *nres,
                          jx_aval **res_avals) {
  (void)in_avals;
  (void)unknown_in;
  (void)unknown_out;
  (void)known;
  (void)unknown;
  (void)nres;
  (void)res_avals;
  return jx_error_set(JX_ERR_UNIMPLEMENTED,
                      "%s%sjx_while cannot be differentiated in reverse mode (grad, vjp): its "
                      "trip count is not known in advance; use jx_scan or jx_fori with static "
                      "bounds, or forward mode (jx_jvp)",
                      e->loc ? e->loc : "", e->loc ? ": " : "");
}

/* ---- batching ---- */
typedef struct {
  const jx_program *cond, *body;
  int n;
} batched_loop;

static jx_status any_lane(void *ctx, jx_array *const *in, jx_array **out) {
  batched_loop *b = ctx;
  jx_array *pred;
  jx_status st = jx_program_eval(b->cond, in, &pred);
  if (!st) out[0] = jx_any(pred, JX_AXES(), 0);
  return st ? st : jx_last_status();
}

static jx_status step_live_lanes(void *ctx, jx_array *const *in, jx_array **out) {
  batched_loop *b = ctx;
  jx_array *pred, **next = calloc((size_t)b->n + 1, sizeof *next);
  if (!next) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  jx_status st = jx_program_eval(b->cond, in, &pred);
  if (!st) st = jx_program_eval(b->body, in, next);
  for (int i = 0; i < b->n && !st; i++) {
    jx_array *which = jx_broadcast_in_dim(pred, jx_shape_of(in[i]), JX_AXES(0));
    out[i] = jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){which, in[i], next[i]}, NULL);
  }
  free(next);
  return st ? st : jx_last_status();
}

static jx_status batch_while(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                             int64_t size, jx_array **out, int *out_bdim) {
  uint8_t *b = calloc((size_t)ctx->nin + 1, 1), *b_out = calloc((size_t)ctx->nin + 1, 1),
          pred_b = 0, no = 0;
  jx_array **args = calloc((size_t)ctx->nin + 1, sizeof *args);
  jx_program *subs2[2] = {NULL, NULL}, *cond_b = NULL, *body_b = NULL;
  jx_status st =
      (b && b_out && args) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) b[i] = bdim[i] != JX_NOT_MAPPED;
  for (int changed = 1; changed && !st;) {
    changed = 0;
    st = jx_batched_outputs(ctx->subs[1], b, b_out);
    for (int i = 0; i < ctx->nin && !st; i++)
      if (b_out[i] && !b[i]) b[i] = changed = 1;
    if (!st) st = jx_batched_outputs(ctx->subs[0], b, &pred_b);
    if (!st && pred_b)
      for (int i = 0; i < ctx->nin; i++) b[i] = 1; /* finished lanes are frozen per lane */
  }
  if (!st) {
    cond_b = jx_batch_program(ctx->subs[0], b, size, pred_b ? &pred_b : &no);
    body_b = jx_batch_program(ctx->subs[1], b, size, b);
    if (!cond_b || !body_b) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  }
  jx_aval *av = malloc(sizeof *av * (size_t)(ctx->nin + 1));
  if (!av) st = st ? st : jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  for (int i = 0; i < ctx->nin && !st; i++) av[i] = body_b->avals[body_b->in[i]];
  if (!st && pred_b) {
    batched_loop bl = {cond_b, body_b, ctx->nin};
    subs2[0] = jx_program_build("while_any", ctx->nin, av, 1, any_lane, &bl);
    subs2[1] = jx_program_build("while_step", ctx->nin, av, ctx->nin, step_live_lanes, &bl);
    if (!subs2[0] || !subs2[1]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  } else if (!st) {
    subs2[0] = jx_program_retain(cond_b);
    subs2[1] = jx_program_retain(body_b);
  }
  for (int i = 0; i < ctx->nin && !st; i++)
    args[i] = b[i] ? jx_rule_batch_to_front(in[i], bdim[i], size) : in[i];
  if (!st) st = jx_bind_sub(&jx_prim_while, ctx->nin, args, ctx->params, 2, subs2, out);
  for (int i = 0; i < ctx->nin; i++) out_bdim[i] = b && b[i] ? 0 : JX_NOT_MAPPED;
  jx_program_release(subs2[0]);
  jx_program_release(subs2[1]);
  jx_program_release(cond_b);
  jx_program_release(body_b);
  free(b);
  free(b_out);
  free(args);
  free(av);
  return st;
}

const jx_prim jx_prim_while = {.name = "while",
                               .id = JX_PRIM_while,
                               .nin = JX_VARIADIC,
                               .nout = JX_NOUT_NIN,
                               .params = "",
                               .infer = infer_while,
                               .outputs = while_outputs,
                               .impl = impl_while,
                               .jvp = jvp_while,
                               .batch = batch_while,
                               .partial_eval = pe_while};

JX_REGISTER_PRIMS(while, &jx_prim_while)

static jx_status while_call(jx_fn *cond_fn, jx_fn *body_fn, int n, jx_array *const *init,
                            jx_array **out) {
  const char *op = "jx_while";
  if (!out || (n > 0 && !init))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: init or out is NULL", op);
  for (int i = 0; i < n; i++) out[i] = jx_poison();
  if (n < 1) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs at least one carry", op);
  jx_status st = jx_check_inputs(op, n, init);
  if (st) return st;
  jx_aval *av = malloc(sizeof *av * (size_t)(n + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (int i = 0; i < n; i++)
    av[i] = (jx_aval){init[i]->dtype, init[i]->weak, init[i]->shape, jx_array_vma(init[i])};
  jx_program *subs[2] = {jx_control_trace(op, "cond", cond_fn, n, av),
                         jx_control_trace(op, "body", body_fn, n, av)};
  if (!subs[0] || !subs[1]) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st) {
    jx_aval pa = subs[0]->avals[subs[0]->out[0]];
    if (subs[0]->nout != 1 || pa.shape.rank != 0 || pa.dtype != JX_BOOL) {
      char s[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE, "%s: the cond function must return one bool scalar, got %s",
                        op, jx_aval_str(pa.dtype, pa.shape, s));
    }
  }
  for (int i = 0; i < n && !st; i++) {
    jx_aval o = subs[1]->avals[subs[1]->out[i]];
    if (!jx_aval_same_type(o, av[i])) {
      char s1[JX_AVAL_STR_CAP], s2[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_SHAPE, "%s: the body returns %s for carry %d, which is %s", op,
                        jx_aval_str(o.dtype, o.shape, s1), i,
                        jx_aval_str(av[i].dtype, av[i].shape, s2));
    }
  }
  if (!st) st = jx_bind_sub(&jx_prim_while, n, init, NULL, 2, subs, out);
  jx_program_release(subs[0]);
  jx_program_release(subs[1]);
  free(av);
  return st;
}

jx_status jx_while(jx_fn *cond_fn, jx_fn *body_fn, int n, jx_array *const *init, jx_array **out) {
  jx_array **copy; /* jx_while(c, b, n, x, x) */
  init = jx_inputs_apart("jx_while", init, n, out, n, &copy);
  jx_status st = while_call(cond_fn, body_fn, n, init, out);
  free(copy);
  return st;
}
