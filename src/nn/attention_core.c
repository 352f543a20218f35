/* The attention core as a jx_custom_vjp function made of two named calls
 * (attention_core.h).
 *
 * Why this shape: the CUDA executor runs attention as flash kernels, which
 * need the forward's logsumexp and a backward of their own. Matching what
 * jx_grad makes of the plain equations (the forward keeping the T x T
 * probabilities as residuals, the backward a chain of transposed
 * dot_generals and softmax-backward equations, then rearranged by
 * common-subexpression elimination) would be fragile. Instead the core's
 * derivative is given (jx_custom_vjp) in terms of two calls, forward (q, k,
 * v) -> (o, lse) and backward (q, k, v, o, lse, do) -> (dq, dk, dv), each a
 * custom_jvp call whose function carries a fixed name: a call survives
 * jit, grad (its equation is kept whole by partial evaluation and by the
 * transposition, which evaluate the forward and backward programs) and
 * simplification, so the executor finds one equation, before it inlines
 * custom calls, with everything the kernels need.
 *
 * What the calls compute elsewhere (the CPU, or CUDA where the kernels do
 * not apply) is the plain composite, so results do not change: the forward
 * call's body is jx_causal_self_attention's equations plus the logsumexp
 * (dead, and removed, where nothing reads it), and the backward call's body
 * is the automatic VJP of those equations (recomputing the forward, which
 * common-subexpression elimination shares with the forward's own), reading
 * neither o nor lse. The calls' derivatives (for second order) are the
 * automatic ones of their bodies. */
#include "attention_core.h"

#include <math.h>
#include <pthread.h>

#include "nn_util.h"

/* The plain equations: o [n, H, T, dh] and, when lse is not NULL, the
 * logsumexp of the scaled, masked scores. */
static jx_array *plain_core(jx_array *q, jx_array *k, jx_array *v, jx_array **lse) {
  jx_shape qs = jx_shape_of(q);
  int64_t T = qs.dims[1], dh = qs.dims[3];
  jx_dtype dt = jx_dtype_of(q);
  /* scores [n, H, Tq, Tk] = q . k over dh, batched over (n, H) */
  jx_array *s = jx_dot_general(q, k, JX_AXES(3), JX_AXES(3), JX_AXES(0, 2), JX_AXES(0, 2));
  s = jx_mul(jx_astype(s, JX_F32), jx_scalar(JX_F32, 1 / sqrt((double)dh)));
  jx_array *causal = jx_ge(jx_iota(JX_I32, JX_SHAPE(T, T), 0), jx_iota(JX_I32, JX_SHAPE(T, T), 1));
  /* the lowest f32, as Flax's masks: exp of it minus the row max is 0 */
  s = jx_where(causal, s, jx_scalar(JX_F32, -3.4028234663852886e38));
  if (lse) *lse = jx_logsumexp(s, JX_AXES(3), 0);
  jx_array *p = jx_astype(jx_softmax(s, 3), dt);
  /* [n, H, Tq, dh] = p . v over Tk, batched over (n, H) */
  return jx_dot_general(p, v, JX_AXES(3), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2));
}

static void plain_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = plain_core(in[0], in[1], in[2], NULL);
}

/* JX_ATTENTION_FWD_CALL's function: (q, k, v) -> (o, lse) */
static void fwd_call_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = plain_core(in[0], in[1], in[2], &out[1]);
}

/* JX_DECODE_ATTENTION_CALL's function: (q [n, H, dh], k, v [n, S, H, dh],
 * lo, hi [n]) -> o [n, H, dh], the masked softmax over the slots lo <= j <
 * hi with the core's equations (f32 scores, the lowest f32 where masked). */
static void decode_call_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *q = in[0], *k = in[1], *v = in[2];
  jx_shape ks = jx_shape_of(k);
  int64_t n = ks.dims[0], S = ks.dims[1], dh = ks.dims[3];
  /* scores [n, H, S] = q . k over dh, batched over (n, H) */
  jx_array *s = jx_dot_general(q, k, JX_AXES(2), JX_AXES(3), JX_AXES(0, 1), JX_AXES(0, 2));
  s = jx_mul(jx_astype(s, JX_F32), jx_scalar(JX_F32, 1 / sqrt((double)dh)));
  jx_array *j = jx_iota(JX_I32, JX_SHAPE(1, 1, S), 2);
  jx_array *keep = jx_logical_and(jx_ge(j, jx_reshape(in[3], JX_SHAPE(n, 1, 1))),
                                  jx_lt(j, jx_reshape(in[4], JX_SHAPE(n, 1, 1))));
  s = jx_where(keep, s, jx_scalar(JX_F32, -3.4028234663852886e38));
  jx_array *p = jx_astype(jx_softmax(s, 2), jx_dtype_of(q));
  /* [n, H, dh] = p . v over S, batched over (n, H) */
  out[0] = jx_dot_general(p, v, JX_AXES(2), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2));
}

static struct {
  pthread_once_t once;
  jx_fn *plain_vjp; /* (q, k, v, do) -> (o, dq, dk, dv) */
  jx_fn *fwd_call, *bwd_call;
  jx_fn *core;
  jx_fn *decode_call;
} fns = {PTHREAD_ONCE_INIT, NULL, NULL, NULL, NULL, NULL};

/* JX_ATTENTION_BWD_CALL's function: (q, k, v, o, lse, do) -> (dq, dk, dv) */
static void bwd_call_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *args[4] = {in[0], in[1], in[2], in[5]}, *res[4] = {NULL, NULL, NULL, NULL};
  jx_status st = jx_call(fns.plain_vjp, args, res);
  for (int i = 0; i < 3; i++) out[i] = st ? nn_fail() : res[1 + i];
}

/* The custom_vjp's parts: f (q, k, v) -> o; fwd (q, k, v) -> (o, residuals
 * q, k, v, o, lse); bwd (q, k, v, o, lse, do) -> (dq, dk, dv). */
static void core_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *r[2] = {NULL, NULL};
  jx_status st = jx_call(fns.fwd_call, in, r);
  out[0] = st ? nn_fail() : r[0];
}

static void core_fwd_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *r[2] = {NULL, NULL};
  jx_status st = jx_call(fns.fwd_call, in, r);
  out[0] = out[4] = st ? nn_fail() : r[0];
  out[5] = st ? nn_fail() : r[1];
  for (int i = 0; i < 3; i++) out[1 + i] = in[i];
}

static void core_bwd_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_status st = jx_call(fns.bwd_call, in, out);
  for (int i = 0; i < 3 && st; i++) out[i] = nn_fail();
}

/* A custom_jvp function named `name` whose JVP is its body's own. */
static jx_fn *named_call(const char *name, int nin, int nout, jx_body body) {
  jx_fn *f = jx_fn_create(name, nin, nout, body, NULL);
  jx_fn *jvp = f ? jx_jvp(f) : NULL;
  jx_fn *call = jvp ? jx_custom_jvp(f, jvp) : NULL;
  jx_fn_release(jvp);
  jx_fn_release(f);
  return call;
}

/* Made once and kept for the process (traced programs are cached per
 * function, so every layer and every call shares them). */
static void create_fns(void) {
  jx_fn *plain = jx_fn_create("jx.causal_attention", 3, 1, plain_body, NULL);
  fns.plain_vjp = plain ? jx_vjp(plain) : NULL;
  fns.fwd_call = named_call(JX_ATTENTION_FWD_CALL, 3, 2, fwd_call_body);
  fns.bwd_call = named_call(JX_ATTENTION_BWD_CALL, 6, 3, bwd_call_body);
  fns.decode_call = named_call(JX_DECODE_ATTENTION_CALL, 5, 1, decode_call_body);
  jx_fn *f = jx_fn_create("jx.causal_attention", 3, 1, core_body, NULL);
  jx_fn *fwd = jx_fn_create("jx.causal_attention_vjp_fwd", 3, 6, core_fwd_body, NULL);
  jx_fn *bwd = jx_fn_create("jx.causal_attention_vjp_bwd", 6, 3, core_bwd_body, NULL);
  if (f && fwd && bwd) fns.core = jx_custom_vjp(f, fwd, bwd);
  jx_fn_release(plain);
  jx_fn_release(f);
  jx_fn_release(fwd);
  jx_fn_release(bwd);
}

jx_array *nn_causal_attention_core(jx_array *q, jx_array *k, jx_array *v) {
  pthread_once(&fns.once, create_fns);
  if (!fns.core || !fns.plain_vjp || !fns.fwd_call || !fns.bwd_call) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY,
                    "jx_causal_self_attention: out of memory making the attention core");
    return nn_fail();
  }
  jx_array *in[3] = {q, k, v}, *o = NULL;
  if (jx_call(fns.core, in, &o)) return nn_fail();
  return o;
}

jx_array *nn_decode_attention_core(jx_array *q, jx_array *k, jx_array *v, jx_array *lo,
                                   jx_array *hi) {
  pthread_once(&fns.once, create_fns);
  if (!fns.decode_call) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_gpt_decode_step: out of memory making the attention");
    return nn_fail();
  }
  jx_array *in[5] = {q, k, v, jx_astype(lo, JX_I32), jx_astype(hi, JX_I32)}, *o = NULL;
  if (jx_call(fns.decode_call, in, &o)) return nn_fail();
  return o;
}
