/* The core of causal self-attention (after the q, k, v projections, before
 * the heads are merged), as one function with its own derivative, so that
 * a backend can run it forward and backward as flash-attention kernels. */
#ifndef JX_NN_ATTENTION_CORE_H
#define JX_NN_ATTENTION_CORE_H

#include <jx/jx.h>

/* The two calls the core is made of (JX_ATTENTION_FWD_CALL and
 * JX_ATTENTION_BWD_CALL, jx/nn.h; the CUDA executor, src/cuda/cuda_fuse.h,
 * recognises them by name and by their types):
 *   forward  (q, k, v) -> (o, lse)
 *   backward (q, k, v, o, lse, do) -> (dq, dk, dv)
 * q, k, v, dq, dk, dv [n, T, H, dh], o and do [n, H, T, dh], all of one
 * float dtype; lse f32 [n, H, T], the logsumexp of each query's scaled,
 * masked scores. Causal; the scores are scaled by 1 / sqrt(dh) (rounded to
 * f32). */

/* softmax(q k^T / sqrt(dh), causal) v for q, k, v [n, T, H, dh]: o [n, H,
 * T, dh], with jx_causal_self_attention's equations (scores in f32 for
 * f16/bf16 inputs). A jx_custom_vjp function: reverse mode saves (q, k, v,
 * o, lse) and runs the backward call. Forward mode (jx_jvp) is an error,
 * as for any jx_custom_vjp function. */
jx_array *nn_causal_attention_core(jx_array *q, jx_array *k, jx_array *v);

/* The decode step's attention: one query per sequence over a key/value
 * cache, the slots lo[b] <= j < hi[b] of sequence b only. q [n, H, dh], k
 * and v [n, S, H, dh] of one float dtype, lo and hi integer [n]: o [n, H,
 * dh], softmax(q k^T / sqrt(dh), masked) v with the core's equations. It is
 * a custom_jvp call named JX_DECODE_ATTENTION_CALL (jx/nn.h) whose JVP is
 * its equations' own: the CPU executor runs it as the kernel of
 * prims/decode_attention.h, which reads only the kept slots; elsewhere
 * (eagerly, on other backends, in bf16 and f16) the equations run, which
 * read every slot. A range that keeps nothing weighs every slot equally in
 * both. */
jx_array *nn_decode_attention_core(jx_array *q, jx_array *k, jx_array *v, jx_array *lo,
                                   jx_array *hi);

#endif
