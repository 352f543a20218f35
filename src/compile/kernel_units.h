/* A program's kernels compiled as translation units over the cores, in two
 * tiers: a cold program of 16 distinct kernels or more compiles them at the
 * first level (-O1: a quarter of -O3's compiler time, so the first call
 * comes back sooner; a smaller one compiles at the final level), and once
 * its runs add up to JX_KERNEL_TIER_UP seconds a thread of its own compiles
 * them at the final level (-O3) while the program keeps running; the next
 * runs take the final kernels. Every level computes the same bits
 * (toolchain.h), so a run's results do not depend on its tier. A program
 * whose final kernels are in a cache (disk or memory) starts with them. */
#ifndef JX_SRC_COMPILE_KERNEL_UNITS_H
#define JX_SRC_COMPILE_KERNEL_UNITS_H

#include "kernel_batch.h"

typedef struct jx_kernel_units jx_kernel_units;

/* Compiles t's kernels as units (one per core, at most one per 8 kernels)
 * and writes the address of names[k] into fns[k] for each k < n with a
 * name ("" for none) and no address yet. *out: the state of a later tier
 * up, or NULL when the kernels are already final; *units: how many units.
 * JX_OK, or an error recorded. */
jx_status jx_kernel_units_build(const jx_kernel_tu *t, int n,
                                const char (*names)[JX_KERNEL_NAME_CAP], void **fns,
                                jx_kernel_units **out, int *units);

/* Counts `seconds` of a run at the first tier; the run that brings the sum
 * to JX_KERNEL_TIER_UP starts the final tier's compile. Thread-safe. */
void jx_kernel_units_ran(jx_kernel_units *u, double seconds);

/* The final tier's address for fns[k], or NULL while it is not compiled
 * (or its compile failed: the first tier's kernels stay). Thread-safe. */
void *jx_kernel_units_final(const jx_kernel_units *u, int k);

/* 1 once the final tier's addresses are in (u not NULL). */
int jx_kernel_units_ready(const jx_kernel_units *u);

/* Waits for a compile under way, then frees u (NULL: nothing). */
void jx_kernel_units_free(jx_kernel_units *u);

#endif
