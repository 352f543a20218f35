/* The attention calls of the nn layer's attention core (forward (q, k, v)
 * -> (o, lse) and backward (q, k, v, o, lse, do) -> (dq, dk, dv), custom_jvp
 * calls named JX_ATTENTION_FWD_CALL and JX_ATTENTION_BWD_CALL in jx/nn.h,
 * with the types src/nn/attention_core.h gives them) run on the CPU as the
 * fused kernels of prims/flash_attention.h: the executable's lowering keeps
 * each such call whole instead of inlining its program (the plain
 * composite, which materializes the T x T scores), and the step that holds
 * it calls the kernel. The calls are found by name and by their types, as
 * the CUDA executor finds them (cuda/cuda_fuse.h); f32, and bf16 through
 * f32 copies (other dtypes run their programs). JX_FLASH_ATTENTION=0, read
 * when a program is compiled, keeps the composite.
 *
 * The decode step's attention call (JX_DECODE_ATTENTION_CALL, (q, k, v,
 * lo, hi) -> o) runs the same way as prims/decode_attention.h's kernel,
 * which reads only the slots lo <= j < hi of the cache; f32 only, and
 * JX_DECODE_ATTENTION=0 keeps its composite. */
#ifndef JX_SRC_COMPILE_ATTENTION_CALL_H
#define JX_SRC_COMPILE_ATTENTION_CALL_H

#include "../ir/program.h"

/* 1 when equation e of p is a forward attention call the kernel runs, 2 a
 * backward one, 3 a decode attention call, 0 anything else
 * (JX_FLASH_ATTENTION=0 or JX_DECODE_ATTENTION=0 included). */
int jx_cpu_attention_call(const jx_program *p, const jx_eqn *e);

/* The lowering's keep predicate (lower.h): jx_cpu_attention_call != 0. */
int jx_cpu_attention_kept(const jx_program *p, const jx_eqn *e);

/* Runs call e (one jx_cpu_attention_call recognised) on env's values,
 * writing its outputs into env (arrays of the innermost scope). */
jx_status jx_cpu_attention_run(const jx_eqn *e, int which, jx_array **env);

#endif
