/* The attention calls run as fused CPU kernels (attention_call.h). */
#include "attention_call.h"

#include <math.h>
#include <string.h>

#include <jx/nn.h>

#include "../array/array.h"
#include "../array/dtype.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../prims/decode_attention.h"
#include "../prims/flash_attention.h"
#include "../prims/prims.h"
#include "lower.h"

static int same_type(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && jx_shape_equal(a.shape, b.shape);
}

/* 3 when e is the decode attention call with the types the nn layer gives
 * it (attention_core.h), f32, and JX_DECODE_ATTENTION is on; else 0. */
static int decode_call(const jx_program *p, const jx_eqn *e) {
  if (strcmp(e->sub[0]->name, JX_DECODE_ATTENTION_CALL) || e->nin != 5 || e->nout != 1 ||
      !jx_env_flag("JX_DECODE_ATTENTION"))
    return 0;
  jx_aval q = p->avals[e->in[0]], k = p->avals[e->in[1]];
  if (q.dtype != JX_F32 || q.shape.rank != 3 || k.shape.rank != 4) return 0;
  const int64_t *d = k.shape.dims; /* [n, S, H, dh] */
  jx_aval nhd = {JX_F32, 0, {3, {d[0], d[2], d[3]}}, 0}, range = {JX_I32, 0, {1, {d[0]}}, 0};
  jx_aval want[5] = {nhd, k, k, range, range};
  for (int i = 0; i < 5; i++)
    if (!same_type(p->avals[e->in[i]], want[i])) return 0;
  return same_type(p->avals[e->out[0]], nhd) ? 3 : 0;
}

int jx_cpu_attention_call(const jx_program *p, const jx_eqn *e) {
  if (e->prim != &jx_prim_custom_jvp_call || !jx_lower_is_custom_call(e) || !e->sub[0]->name)
    return 0;
  if (!strcmp(e->sub[0]->name, JX_DECODE_ATTENTION_CALL)) return decode_call(p, e);
  int fwd = !strcmp(e->sub[0]->name, JX_ATTENTION_FWD_CALL) && e->nin == 3 && e->nout == 2;
  int bwd = !strcmp(e->sub[0]->name, JX_ATTENTION_BWD_CALL) && e->nin == 6 && e->nout == 3;
  if ((!fwd && !bwd) || !jx_env_flag("JX_FLASH_ATTENTION")) return 0;
  jx_aval q = p->avals[e->in[0]];
  /* f32 only: bf16 and f16 run the composite, whose scores and probabilities
   * are rounded to the dtype as JAX rounds them (mixed-precision training
   * matches Optax's trajectory) */
  if (q.dtype != JX_F32 || q.shape.rank != 4) return 0;
  const int64_t *d = q.shape.dims; /* [n, T, H, dh] */
  /* the types the calls have (attention_core.h): anything else is not ours */
  jx_aval bhtd = {q.dtype, 0, {4, {d[0], d[2], d[1], d[3]}}, 0};
  jx_aval lse = {JX_F32, 0, {3, {d[0], d[2], d[1]}}, 0};
  jx_aval want_in[6] = {q, q, q, bhtd, lse, bhtd};
  jx_aval want_out[3] = {fwd ? bhtd : q, fwd ? lse : q, q};
  for (int i = 0; i < e->nin; i++)
    if (!same_type(p->avals[e->in[i]], want_in[i])) return 0;
  for (int o = 0; o < e->nout; o++)
    if (!same_type(p->avals[e->out[o]], want_out[o])) return 0;
  return fwd ? 1 : 2;
}

int jx_cpu_attention_kept(const jx_program *p, const jx_eqn *e) {
  return jx_cpu_attention_call(p, e) != 0;
}

static jx_status failed(void) { return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY; }

/* o [n, H, dh] of the decode attention call from in = (q, k, v, lo, hi). */
static jx_status run_decode(const jx_eqn *e, jx_array **in, jx_array **env) {
  const int64_t *d = in[1]->shape.dims; /* [n, S, H, dh] */
  jx_decode_shape s = {d[0], d[1], d[2], d[3], (float)(1 / sqrt((double)d[3]))};
  jx_array *o = jx_array_alloc(JX_F32, in[0]->shape, 0);
  if (o->poisoned) return failed();
  jx_decode_attention(&s, jx_array_data(in[0]), jx_array_data(in[1]), jx_array_data(in[2]),
                      jx_array_data(in[3]), jx_array_data(in[4]), jx_array_data(o));
  env[e->out[0]] = o;
  return JX_OK;
}

jx_status jx_cpu_attention_run(const jx_eqn *e, int which, jx_array **env) {
  jx_array *in[6], *out[3];
  for (int i = 0; i < e->nin; i++) {
    jx_status st = jx_array_ready(env[e->in[i]]);
    if (st) return st;
    in[i] = env[e->in[i]];
  }
  if (which == 3) return run_decode(e, in, env);
  const int64_t *d = in[0]->shape.dims;
  jx_flash_shape s = {d[0], d[1], d[2], d[3], (float)(1 / sqrt((double)d[3]))};
  for (int o = 0; o < e->nout; o++) {
    jx_shape sh = which == 1 && o == 0 ? JX_SHAPE(d[0], d[2], d[1], d[3])
                  : which == 1         ? JX_SHAPE(d[0], d[2], d[1])
                                       : in[0]->shape;
    out[o] = jx_array_alloc(JX_F32, sh, 0);
    if (out[o]->poisoned) return failed();
  }
  const float *q = jx_array_data(in[0]), *k = jx_array_data(in[1]), *v = jx_array_data(in[2]);
  jx_status st =
      which == 1 ? jx_flash_attention_fwd(&s, q, k, v, jx_array_data(out[0]), jx_array_data(out[1]))
                 : jx_flash_attention_bwd(&s, q, k, v, jx_array_data(in[3]), jx_array_data(in[4]),
                                          jx_array_data(in[5]), jx_array_data(out[0]),
                                          jx_array_data(out[1]), jx_array_data(out[2]));
  for (int o = 0; o < e->nout && !st; o++) env[e->out[o]] = out[o];
  return st;
}
