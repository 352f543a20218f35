/* The CUDA executor: a jitted, simplified program run on one CUDA device,
 * the counterpart of the CPU's executable (src/compile/executable.h).
 *
 * Built once per program:
 *  - the program is lowered (custom calls inlined, lower.h) and fused
 *    (fusion.h) exactly as for the CPU;
 *  - every group that is a kernel (jx_fusion_group_is_kernel) is rendered
 *    in the CUDA dialect (render_cuda.h); all of them form one translation
 *    unit, compiled once through the cubin cache (cuda_module.h) and loaded;
 *  - every other equation runs on the host: its operands are copied down,
 *    its eager implementation runs (as the CPU executable's equation steps
 *    do: reference kernels, BLAS, control flow, gather, sort, ...), and its
 *    result is copied up when a kernel reads it. So every program runs; the
 *    kernels are where it is fast.
 *
 * Which equations run where:
 *  - on the device: the fused elementwise chains, with their broadcasts read
 *    through, and the row and column reductions (sum/max/min) that end them,
 *    i.e. everything the CPU executable would run as a compiled kernel, and
 *    a lone elementwise equation the CPU would run eagerly (too small for a
 *    kernel call there; on the host it would cost a copy each way);
 *  - on the device through cuBLASLt (jx_cuda_gemm): a dot_general that is
 *    one (batched) GEMM (jx_cuda_dot_as_gemm), on a real GPU with cuBLASLt
 *    installed; its sums are cuBLASLt's, not bit for bit the CPU's BLAS;
 *  - on the host: everything else, and dot_general where there is no GEMM
 *    (cuBLASLt missing, the fake driver of the tests, a layout that is not
 *    one GEMM, integer operands), control flow (scan, while, cond: their
 *    bodies run eagerly), gather/scatter, sort, random bits, shard_map and
 *    collectives (except in a per-device program on a CUDA mesh, where the
 *    collectives are device steps: jx_cuda_executable_build_collective).
 *
 * Memory (cuda_resident.h): arrays stay on the device between calls. An
 * output the device made is returned device-resident: its block (from the
 * device's caching allocator) belongs to the array, which has no host buffer
 * until something reads it (jx_array_ready copies it down once) and returns
 * the block when freed. An input or constant that has a copy on the device
 * is read in place; a host one is copied up the first time a kernel reads it
 * and the copy stays with the (immutable) array, so a training loop that
 * feeds its parameters back copies each one up once in all. Intermediates
 * live in allocator blocks returned after their last reader (every kernel
 * and copy is queued on the device's compute stream, so a block reused by a
 * later step, or by another array, is only written after the earlier
 * readers ran). Donation (jx_jit_options.donate, jx_cuda_set_donation): a
 * donated input's block is taken by the run (the array is marked donated,
 * as on the CPU), and an elementwise kernel that reads it last writes its
 * output into it, so an update step allocates nothing.
 * Asynchronous: a run returns once its work is queued (unless a host
 * equation needs a value on the host); its new outputs are ready after an
 * event recorded behind the last kernel, which jx_block_until_ready waits
 * for. Launch geometry as render_cuda.h describes: blocks of up to 256
 * threads over the columns, rows over gridDim.y; a row reduction runs one
 * row per block of 256 threads, a column reduction tiles of 32 columns per
 * block of 256 threads; a reduction with few such blocks and many reduced
 * terms splits its terms across blocks (jx_cuda_reduction_split).
 *
 * Not done here: the NaN checker and the step profiler (base/hooks.h). */
#ifndef JX_SRC_CUDA_CUDA_EXEC_H
#define JX_SRC_CUDA_CUDA_EXEC_H

#include "../base/hooks.h"
#include "../ir/exec.h"
#include "../ir/program.h"
#include "cuda_blaslt.h"
#include "../compile/render_cuda.h"
#include "cuda_device.h"
#include "kernels_combine.h"

typedef struct jx_cuda_executable jx_cuda_executable;

/* A reduction kernel split across blocks (render_cuda.h): gridDim.z =
 * pieces blocks share each row or tile, block z reducing the terms
 * [start[z], start[z + 1]) into a scratch buffer, and the combining kernel
 * (kernels_combine.h) adds the partial results up as the pairwise tree does
 * (sums) or keeps the first extreme value (max/min): the unsplit kernel's
 * bits. */
typedef struct {
  int pieces;      /* 1: unsplit */
  int op;          /* 1 sum, 2 max, 3 min */
  int kind;        /* jx_cuda_combine_kind: the partial results' and the result's type */
  int npairs;      /* a sum's additions, in order (prims/pairwise_split.h) */
  int64_t outputs; /* the reduction's results */
  int64_t start[JX_CUDA_MAX_PIECES + 1];
  uint8_t pairs[JX_CUDA_MAX_PIECES][2];
} jx_cuda_split;

/* How kernel group g, which ends in a reduction, runs on a device of sms
 * SMs; returns s->pieces. The rule: an f32, f64 or bf16 reduction that fills
 * fewer than 2 x sms blocks (its rows for a row reduction; its kept rows x
 * tiles of 32 columns for a column reduction) splits its reduced terms
 * into subtrees of their pairwise tree (jx_pairwise_depth: at most 64), so
 * that about 2 x sms blocks run, each piece at least 2048 terms (512 rows
 * of a column reduction, whose block reads 32 columns of each). So a
 * 50,257-wide vocabulary over a few rows, a sum of 10^6 elements into one
 * scalar, or a column sum over many rows uses the whole device. */
int jx_cuda_reduction_split(const jx_program *p, const jx_fusion_group *g, int sms,
                            jx_cuda_split *s);

/* For tests, so that small shapes split: the rule's least terms per piece
 * and the blocks it aims at (0: 2048 or 512 and 2 x sms). Applies to executables
 * built afterwards. */
void jx_cuda_set_reduction_split(int64_t least, int64_t blocks);

/* Builds p's executable for device d (lowers, fuses, compiles and loads the
 * kernels); NULL with an error recorded. dump_prefix names the JX_DUMP file
 * of the kernels' source ("<prefix>.kernels.cu"). */
jx_cuda_executable *jx_cuda_executable_build(jx_cuda_device *d, const jx_program *p,
                                             const char *dump_prefix);
/* Collective equations as device steps (cuda_mesh.h gives them to an
 * executable that runs one mesh position of a per-device program): where
 * takes(ctx, p, e) is 1, equation e of p is a step of its own whose operands
 * are device buffers (in[i] for e->in[i], out[o] for e->out[o], the outputs
 * allocated, dense) and run() does it on the device (the NCCL engine); the
 * others run as host equations, as without ops. */
typedef struct {
  void *ctx;
  int (*takes)(void *ctx, const jx_program *p, const jx_eqn *e);
  jx_status (*run)(void *ctx, const jx_program *p, const jx_eqn *e, const CUdeviceptr *in,
                   const CUdeviceptr *out);
} jx_cuda_collective_ops;

/* jx_cuda_executable_build with collective equations run by ops (copied;
 * ops->ctx must outlive the executable). */
jx_cuda_executable *jx_cuda_executable_build_collective(jx_cuda_device *d, const jx_program *p,
                                                        const char *dump_prefix,
                                                        const jx_cuda_collective_ops *ops);
/* Steps that run a collective equation on the device (for tests). */
int jx_cuda_executable_collectives(const jx_cuda_executable *x);

/* Runs x on inputs that are on the host or on x's device; out[k] are owned by
 * the caller's innermost scope, as jx_executable_run's: new device-resident
 * arrays, or the input, constant or host equation's array the program
 * returns. */
jx_status jx_cuda_executable_run(jx_cuda_executable *x, const jx_program *p, jx_array *const *in,
                                 jx_array **out);
void jx_cuda_executable_free(jx_cuda_executable *x);
/* jx_jit_options.donate for p's attached CUDA executable: per input,
 * nonzero = the run may take its device block; fn_name names the jitted
 * function in the donated arrays' errors. */
jx_status jx_cuda_set_donation(const jx_program *p, int nin, const int *donate,
                               const char *fn_name);

/* Steps that launch a kernel; *host_eqns: equations that run on the host;
 * *gemms: dot_generals run by cuBLASLt (for tests; either may be NULL). */
int jx_cuda_executable_kernels(const jx_cuda_executable *x, int *host_eqns, int *gemms);
/* The steps that run the gather kernel (gather, dynamic_slice,
 * dynamic_update_slice, and a slice or reshape no kernel reads through:
 * kernels_gather.h). */
int jx_cuda_executable_gathers(const jx_cuda_executable *x);
/* Its reduction kernels split across blocks (jx_cuda_reduction_split). */
int jx_cuda_executable_splits(const jx_cuda_executable *x);
/* The kernels x's module holds: one per distinct kernel step (identical
 * groups, such as a layer's in every layer, share one; kernel_batch.h). */
int jx_cuda_executable_distinct_kernels(const jx_cuda_executable *x);
/* The cuBLASLt handle that CUDA device `ordinal`'s executables run their
 * GEMMs on, or NULL where none was made: its heuristic calls, cache hits
 * and autotuned problems (cuda_blaslt.h), for benches. */
jx_cuda_blas *jx_cuda_device_gemm_handle(int ordinal);
/* x's nested executables (control flow compiled for the host; for tests). */
const jx_exec_nested *jx_cuda_executable_nested(const jx_cuda_executable *x);
/* The device x runs on (its allocator's statistics, for tests). */
jx_cuda_device *jx_cuda_executable_device(const jx_cuda_executable *x);

/* 1 when dot_general e of p is one row-major (batched) GEMM: f32, bf16 or
 * f16 operands and result of one dtype, one contracting dim on each side,
 * the batch dims (if any) leading and in order on both sides and m, n, k >
 * 0; then *desc describes it (operands dense, as executor buffers are). */
int jx_cuda_dot_as_gemm(const jx_program *p, const jx_eqn *e, jx_cuda_gemm_desc *desc);

/* Compiles p for CUDA device 0 and attaches the executable to p, so that
 * evaluating p runs it (the CUDA backend's attach, cuda_backend.c). When
 * CUDA is unusable the error says what is missing (jx_cuda_status()'s text);
 * there is no silent fall-back to the CPU. */
jx_status jx_cuda_compile_attach(const jx_program *p, const char *dump_prefix);

#endif
