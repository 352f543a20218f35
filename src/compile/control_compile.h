/* Control flow in compiled programs (control_compile.c): the nested programs
 * of scan, while, cond and the wrappers (remat, custom_vjp_call,
 * custom_jvp_call) are compiled with their program, and an executable runs
 * scan and while loops itself over those compiled bodies. */
#ifndef JX_SRC_COMPILE_CONTROL_COMPILE_H
#define JX_SRC_COMPILE_CONTROL_COMPILE_H

#include "../ir/exec.h"
#include "../ir/program.h"

/* Compiles the nested programs p's equations run (recursively, once each: a
 * program that has an executable of its own is left alone) into out, the
 * table of the executable being built for p: they are its own, so a program
 * that something else also holds (a traced function's cached program) runs
 * compiled only under this executable and is not touched. dump_prefix names
 * the JX_DUMP files (NULL: p's name). The outermost call compiles the
 * kernels of p and of every nested program below it in one compiler run
 * (one translation unit, kernel_batch.h); the builds of those programs then
 * take their kernels from it. */
jx_status jx_compile_nested(const jx_program *p, const char *dump_prefix, jx_exec_nested *out);

/* 1 when an executable runs equation e with jx_control_run: a scan or a
 * while whose nested programs are compiled. */
int jx_control_runs(const jx_eqn *e);

/* Runs scan or while equation e on concrete inputs (results in the innermost
 * scope, as jx_bind_sub's): the same values as the primitive's impl, with
 * the xs sliced by row copies into reused buffers, the ys written into their
 * stacked results as they come, and each carry released as soon as the next
 * one exists (its buffer goes back to the allocator's cache and serves the
 * next iteration). */
jx_status jx_control_run(const jx_eqn *e, jx_array *const *in, jx_array **out);

#endif
