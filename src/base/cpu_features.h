/* What the CPU can run, asked once per process. */
#ifndef JX_BASE_CPU_FEATURES_H
#define JX_BASE_CPU_FEATURES_H

/* 1 when the CPU runs AVX2 and FMA instructions (the hand-vectorized loops
 * of products, attention and the peak-FLOP/s measurement need both); 0 on
 * other CPUs and other architectures. */
int jx_cpu_has_avx2_fma(void);

/* 1 when the CPU also runs AVX-512F (16-lane f32 vectors); 0 elsewhere. */
int jx_cpu_has_avx512f(void);

/* The CPUs online (sysconf's count, at least 1), asked on the first call:
 * for the checks made often (a spin, a collective) whether threads
 * outnumber them. */
int jx_cpu_count(void);

#endif
