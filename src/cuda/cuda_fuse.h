/* Fused GEMM epilogues, softmax and attention in the CUDA executor
 * (cuda_exec.h): patterns of the lowered, fused program that run as one
 * cuBLASLt call or one hand-written kernel instead of several steps.
 *
 * Matched (on the lowered program, after fusion; cuda_fuse_match.c):
 *  - epilogue: a dot_general that is one GEMM (jx_cuda_dot_as_gemm) whose
 *    only reader is `add(dot, broadcast_in_dim(bias[n], dims=(last)))`,
 *    optionally followed by an activation read only by itself: ReLU or
 *    tanh-GELU, recognised by evaluating the elementwise chain that follows
 *    on probe points (so `max(x, 0)` and jx_gelu's seven equations are found
 *    however they were written). One jx_cuda_gemm with the bias and
 *    activation in its epilogue; only where cuBLASLt runs the GEMM (a real
 *    GPU): elsewhere the match is counted and the steps run as before.
 *  - softmax: the lowered jx_softmax over the last axis (reduce_max,
 *    stop_gradient, reshape/broadcast back, sub, exp, reduce_sum,
 *    reshape/broadcast, div), f32 or bf16: kernels_softmax.h's kernel.
 *  - attention calls: jx_causal_self_attention's core as src/nn makes it
 *    (attention_core.h): a forward call (q, k, v) -> (o, lse) and, under
 *    jx_grad, a backward call (q, k, v, o, lse, do) -> (dq, dk, dv), f32
 *    or bf16, each kept as one equation by jx_cuda_fused_lower: q, k, v
 *    transposed, kernels_attention.h's flash kernel (also writing lse), or
 *    kernels_attention_bwd.h's three kernels and the gradients transposed
 *    back.
 *  - attention as equations (a hand-written core), f32: scores =
 *    dot_general(q, k) over head_dim batched over (batch, head) with q, k, v
 *    [n, T, H, dh], times a scalar, select_n(ge(iota0, iota1), -big, scores)
 *    (or no mask), softmax as above, dot_general(p, v) -> [n, H, T, dh]:
 *    q, k, v transposed to [n, H, T, dh], then kernels_attention.h's
 *    flash kernel (head_dim 32, 64 or 128).
 *  - softmax cross-entropy over a vocabulary (jx_cuda_match_xent): the
 *    forward's row max and sum in one read of the logits, the label's
 *    logit a thread a row, the gradient in one more read
 *    (kernels_softmax.h).
 * A match must own every equation of the fusion groups it touches, and its
 * intermediates must have no reader outside it; else nothing changes.
 *
 * The hand-written kernels are launched through thin adapters with the
 * executor's kernel signature (render_cuda.h), so the same module runs on a
 * GPU and under the tests' fake driver (tests/cuda_fake), whose emulator
 * runs them. */
#ifndef JX_SRC_CUDA_CUDA_FUSE_H
#define JX_SRC_CUDA_CUDA_FUSE_H

#include <stdint.h>

#include "../compile/fusion.h"
#include "../ir/exec.h"
#include "../ir/program.h"
#include "cuda_blaslt.h"
#include "cuda_device.h"

typedef enum {
  JX_CUDA_FUSED_EPILOGUE = 0,
  JX_CUDA_FUSED_SOFTMAX = 1,
  JX_CUDA_FUSED_ATTENTION = 2,
  JX_CUDA_FUSED_ATTENTION_BWD = 3,
  JX_CUDA_FUSED_XENT = 4,      /* softmax cross-entropy's row max and sum */
  JX_CUDA_FUSED_XENT_PICK = 5, /* its label's logit */
  JX_CUDA_FUSED_XENT_BWD = 6   /* its gradient with respect to the logits */
} jx_cuda_fused_kind;

/* One matched pattern. */
typedef struct {
  jx_cuda_fused_kind kind;
  jx_dtype dtype;
  int nouts;    /* the variables it writes: */
  int outs[3];  /* epilogue, softmax: y; attention: o, and lse when it is the forward call's (o
                 * [n, H, T, dh], lse f32 [n, H, T]); attention backward: dq, dk, dv;
                 * cross-entropy: max, sum (f32, a row's); its label's logit: picked; its
                 * backward: the gradient */
  int nreads;   /* the variables it reads: */
  int reads[6]; /* epilogue: lhs, rhs, bias; softmax: x; attention: q, k, v [n, T, H, dh];
                 * attention backward: q, k, v, o, lse, do; cross-entropy: logits; its
                 * label's logit: logits, label (f32, a row's); its backward: logits,
                 * label, max, scale, at_label */
  jx_cuda_gemm_desc gemm;            /* epilogue: with has_bias and act set */
  int64_t rows, cols;                /* softmax, cross-entropy: x as [rows, cols] */
  int64_t batch, heads, t, head_dim; /* attention */
  float scale;                       /* attention: applied to q . k */
  int causal;                        /* attention */
} jx_cuda_fused_op;

/* What the matchers look up: per variable of p, its readers (program
 * outputs count as readers) and its defining equation (-1: an input or a
 * constant). */
typedef struct {
  int *readers, *def;
} jx_cuda_fuse_index;
jx_status jx_cuda_fuse_index_build(const jx_program *p, jx_cuda_fuse_index *ix);
void jx_cuda_fuse_index_free(jx_cuda_fuse_index *ix);
/* The matchers. Each returns 1 and fills *op and member[] (1 for every
 * equation of p the pattern replaces, absorbed broadcasts and constants
 * included) when the pattern rooted at equation `root` is there and closed
 * (no intermediate read outside it); else 0 and member[] is untouched. */
int jx_cuda_match_epilogue(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                           jx_cuda_fused_op *op, uint8_t *member);
int jx_cuda_match_softmax(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                          jx_cuda_fused_op *op, uint8_t *member);
int jx_cuda_match_attention(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                            jx_cuda_fused_op *op, uint8_t *member);
/* The lowered jx_softmax_cross_entropy (no label smoothing) of f32 logits
 * x [..., V] (or of bf16 logits converted to f32), rooted at x's
 * reduce_max over the last axis: the row max made finite
 * (select_n(is_finite(m), 0, m), stop_gradient) and sum(exp(x - max))
 * (ops[0], JX_CUDA_FUSED_XENT), the label's logit as the sum of
 * select_n(eq(label, iota), 0, x) (ops[1], JX_CUDA_FUSED_XENT_PICK), each a
 * row's f32 that the rest of the program reads. Under jx_grad, also the
 * logits' gradient that reads exp(x - max) and the label mask:
 * scale * exp(x - max) + select_n(mask, 0, at_label) (scale and at_label
 * rows of f32), converted to the logits' dtype (ops[2],
 * JX_CUDA_FUSED_XENT_BWD). Returns how many ops (3, or 2 where nothing
 * else reads exp(x - max) and the mask; 0: no match), member[i][] the
 * equations of ops[i] (each array p->neqns long, written whole on a
 * match). The backward recomputes exp(x - max) and the mask from the
 * logits, so neither [rows, V] array is stored. Three ops, each placed
 * alone: the program may read the row statistics before it makes the
 * label (the order C evaluates a call's arguments in decides). */
int jx_cuda_match_xent(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                       jx_cuda_fused_op ops[3], uint8_t *const member[3]);

/* jx_causal_self_attention's core as the calls src/nn/attention_core.h
 * makes (custom_jvp calls named JX_ATTENTION_FWD_CALL and
 * JX_ATTENTION_BWD_CALL): 1 and *op when equation e of p is one the kernels
 * run (f32 or bf16 with head_dim 32, 64 or 128, f16 with head_dim 64 or
 * 128, batch and heads up to 65535; the plan takes f16 on tensor cores only).
 * Under jx_grad the forward call is what the forward pass keeps of the core
 * (o and the logsumexp as residuals) and the backward call is the whole
 * backward of the core, so both are found before custom calls are inlined
 * (jx_cuda_fused_lower), each as one equation. */
int jx_cuda_attention_call(const jx_program *p, const jx_eqn *e, jx_cuda_fused_op *op);
int jx_cuda_match_attention_call(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                                 jx_cuda_fused_op *op, uint8_t *member);

/* The executor's lowering (lower.h's jx_lower_custom_calls) that keeps the
 * attention calls jx_cuda_attention_call accepts as equations (their own
 * programs still inside, for the host should a call not run fused); all
 * inlined when JX_CUDA_NO_FUSE=1. Returns a new reference (p itself when
 * nothing is inlined), or NULL with the error recorded. The kept calls'
 * programs get interpreted executables in host_calls (the executable's
 * nested table), so that compiling the nested programs for the host leaves
 * them alone. */
jx_program *jx_cuda_fused_lower(const jx_program *p, jx_exec_nested *host_calls);

/* What an executable fused (for tests and logs). */
typedef struct {
  int epilogues_matched; /* epilogues found, whether or not cuBLASLt runs them */
  int epilogues;         /* those planned as one jx_cuda_gemm (cuBLASLt present) */
  int softmaxes, attentions, attention_backwards, xents, xent_backwards;
  /* launches so far, over all runs (a fused step each, whatever kernels it takes) */
  int64_t epilogue_launches, softmax_launches, attention_launches, attention_backward_launches;
  int64_t xent_launches, xent_backward_launches;
} jx_cuda_fused_counts;

typedef struct jx_cuda_fused jx_cuda_fused;

/* How a fused step gets its buffers from the run (cuda_exec.c): a read
 * variable's device copy (uploaded if needed), a written one's new block. */
typedef struct {
  void *ctx;
  jx_status (*input)(void *ctx, int var, CUdeviceptr *ptr);
  jx_status (*output)(void *ctx, int var, CUdeviceptr *ptr);
} jx_cuda_fused_io;

/* Finds the patterns in p's groups (as jx_fuse made them) and rewrites the
 * groups of each one that will run fused: the last becomes the fused step
 * (no equations, its loads the pattern's reads, its store the output: the
 * executor's lifetimes read it as a kernel's), the others skipped.
 * blas(d) is asked only when an epilogue is found; NULL there means the
 * epilogue is only counted. *out is NULL when nothing matched, or when
 * JX_CUDA_NO_FUSE=1 (read when a program is compiled: the unfused steps,
 * for comparisons and for tests that check the executor bit for bit). */
jx_status jx_cuda_fused_plan(jx_cuda_device *d, const jx_program *p, jx_fusion_group *groups,
                             int ngroups, jx_cuda_blas *(*blas)(jx_cuda_device *d),
                             jx_cuda_fused **out);
/* 1 when step (group) k runs a fused op of f (f may be NULL). */
int jx_cuda_fused_at(const jx_cuda_fused *f, int k);
/* Group k's fused operation, or NULL when it has none. */
const jx_cuda_fused_op *jx_cuda_fused_op_at(const jx_cuda_fused *f, int k);
/* Queues step k's fused op on the device's compute stream. */
jx_status jx_cuda_fused_run(jx_cuda_fused *f, int k, const jx_cuda_fused_io *io);
jx_cuda_fused_counts jx_cuda_fused_counts_of(const jx_cuda_fused *f); /* zeros for NULL */
void jx_cuda_fused_free(jx_cuda_fused *f);

/* The executable's plan (defined in cuda_exec.c), or NULL. */
struct jx_cuda_executable;
const jx_cuda_fused *jx_cuda_executable_fused(const struct jx_cuda_executable *x);

#endif
