/* The one switch for OpenBLAS's own threads. */
#ifndef JX_SRC_PRIMS_BLAS_THREADS_H
#define JX_SRC_PRIMS_BLAS_THREADS_H

/* Switches OpenBLAS's own threads off (once; cheap after that) and returns
 * 1, so that jx's pool is the only set of threads: the pool splits GEMMs
 * (dot_blas.c) and convolutions itself and runs whole LAPACK factorizations
 * on its threads (linalg/), and OpenBLAS threading inside each would put
 * several threads on every core. With both, OpenBLAS's workers spun
 * (sched_yield) for ~0.1 s after every GEMM, competing with the pool's
 * kernels: a fifth of a jitted MLP step went to those hand-offs. Returns 0
 * for a BLAS without OpenBLAS's functions, which keeps its own threading:
 * the caller then leaves the work to it unsplit. */
int jx_blas_own_threads(void);

#endif
