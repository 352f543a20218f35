/* An executable: a program split into steps, each a fused loop kernel
 * (compiled C) or one equation applied through its row (reference or BLAS
 * kernels, control flow). Built once per signature by jx_jit and kept beside
 * the program (ir/exec.h), whose evaluation then runs it on concrete inputs. */
#ifndef JX_SRC_COMPILE_EXECUTABLE_H
#define JX_SRC_COMPILE_EXECUTABLE_H

#include "../base/hooks.h"
#include "../ir/exec.h"
#include "../ir/program.h"

typedef struct jx_executable jx_executable;

/* Fuses p and compiles its kernels; NULL with an error recorded on failure.
 * times (or NULL) gets the build's codegen and C compile phases. */
jx_executable *jx_executable_build(const jx_program *p, const char *dump_prefix,
                                   jx_compile_times *times);
jx_status jx_executable_run(const jx_executable *x, const jx_program *p, jx_array *const *in,
                            jx_array **out);
void jx_executable_free(jx_executable *x);
/* Donation (jx_jit_options.donate): per input, 1 = a run may take the
 * caller's buffer, free it after its last use or write an output into it in
 * place, and mark the caller's array donated (to fn_name). */
jx_status jx_executable_set_donation(jx_executable *x, int nin, const int *donate,
                                     const char *fn_name);
/* The donation mask of p's attached executable (per input), or NULL when it
 * donates nothing or p is not compiled by jx_compile_attach. */
const uint8_t *jx_program_donation(const jx_program *p);
/* 1 when x takes donated buffers. */
int jx_executable_donates(const jx_executable *x);
/* 1 when x must run on the calling thread (async_dispatch.c says why). */
int jx_executable_synchronous(const jx_executable *x);
/* Steps that run a compiled kernel, and equations they cover (for tests). */
int jx_executable_kernels(const jx_executable *x, int *fused_eqns);
/* The distinct kernels among those steps: identical groups (a layer's in
 * every layer) run one compiled kernel (kernel_batch.h; for tests). */
int jx_executable_distinct_kernels(const jx_executable *x);
/* Why input i of a run of p cannot give its storage to the run although
 * donated, whatever the backend: it is laid out over devices, passed twice
 * (why: a message written into why[cap]) or held by p as a constant; NULL
 * when nothing stands in the way. */
const char *jx_donation_conflict(const jx_program *p, jx_array *const *in, int i, char *why,
                                 size_t cap);
/* x's nested executables (control_compile.h; for tests). */
const jx_exec_nested *jx_executable_nested(const jx_executable *x);
/* The CPU executable e runs, or NULL when e is another backend's. */
const jx_executable *jx_exec_cpu(jx_exec e);
/* 1 when x's kernels run at their final tier (kernel_units.h; for tests). */
int jx_executable_final_tier(const jx_executable *x);
/* Pairs of GEMM steps that run side by side (for tests). */
int jx_executable_side_by_side(const jx_executable *x);
/* GEMM steps that run the next step's bias or residual sum as their
 * epilogue (for tests). */
int jx_executable_epilogues(const jx_executable *x);

/* Compiles p, its control flow's nested programs with it, into *out, which
 * the caller owns (jx_program_attach or a jx_exec_nested table). dump_prefix
 * names the JX_DUMP files (kernel sources); times (or NULL) gets where the
 * build's time went (the trace and simplify phases are the caller's). */
jx_status jx_compile(const jx_program *p, const char *dump_prefix, jx_exec *out,
                     jx_compile_times *times);
/* jx_compile, the executable then attached to p (jx_program_eval runs it). */
jx_status jx_compile_attach(const jx_program *p, const char *dump_prefix, jx_compile_times *times);

#endif
