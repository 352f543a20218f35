/* The shard_map primitive: a per-device program run on every device of a
 * mesh. Operands: the global inputs; subs[0]: the body, mapping each
 * device's blocks to its blocks of the outputs. Params: mesh=i0 (mesh id),
 * in_shardings=i1 and out_shardings=i2 (jx_intern_ints numbers of the
 * sharding ids, one per input / output), nout=i3, check_vma=f0 (1: the
 * mesh's axes are manual axes whose varying values the body's types track,
 * trace/vma.h; 0: untracked, JAX's check_vma=False, as pmap).
 *
 * Shared by the row (shard_map.c), its transformation rules
 * (shard_map_rules.c) and pmap (pmap.c). */
#ifndef JX_SRC_PARALLEL_SHARD_MAP_H
#define JX_SRC_PARALLEL_SHARD_MAP_H

#include "../ir/program.h"
#include "sharding.h"

extern const jx_prim jx_prim_shard_map;

/* The row's transformation rules (shard_map_rules.c). */
jx_status jx_smap_jvp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t, jx_array **y,
                      jx_array **ty);
jx_status jx_smap_transpose(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *in_avals,
                            const uint8_t *linear, jx_array *const *ct, jx_array **ct_in);
jx_status jx_smap_batch(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim, int64_t n,
                        jx_array **out, int *out_bdim);
jx_status jx_smap_partial_eval(const jx_eqn *e, const jx_aval *in_avals, const uint8_t *unknown_in,
                               uint8_t *unknown_out, struct jx_pe_eqn *known,
                               struct jx_pe_eqn *unknown, int *nres, jx_aval **res_avals);

/* The mesh and the n shardings named by slot (1: inputs, 2: outputs) of p,
 * borrowed; an internal error when they do not fit. */
jx_status jx_smap_decode(const jx_params *p, int slot, int n, jx_mesh **mesh, jx_sharding **sh);

/* Applies shard_map: body on m's devices, inputs laid out by in_sh, outputs
 * by out_sh; in may be tracers (recorded) or concrete (run now). */
jx_status jx_smap_bind(jx_mesh *m, int nin, jx_array *const *in, jx_sharding *const *in_sh,
                       int nout, jx_sharding *const *out_sh, jx_program *body, int check_vma,
                       jx_array **out);

/* Whether the equation with params p tracks varying axes (check_vma). */
int jx_smap_checks_vma(const jx_params *p);

/* Binds m's axes (their names and sizes) for tracing a body, as manual axes
 * when check_vma; returns how many were pushed (pop them with
 * jx_smap_pop_axes). */
int jx_smap_push_axes(const jx_mesh *m, int check_vma);

/* The set of manual axes (trace/vma.h) s names: what a block laid out by s
 * varies over; 0 unless m's axes are bound as manual. */
int jx_smap_named_vma(const jx_sharding *s);
void jx_smap_pop_axes(int n);

/* s with `by` unsplit dims inserted at dim `at` (vmap's batch dim); the
 * caller releases it. NULL with an error naming op when the rank overflows. */
jx_sharding *jx_smap_insert_dims(jx_sharding *s, int at, int by, const char *op);

/* The sharding that splits dim 0 over every axis of m, in order: how
 * shard_map hands per-device values (residuals) from one program to
 * another. Borrowed (interned). */
jx_sharding *jx_smap_per_device(jx_mesh *m);

/* The ids (jx_axis_id) of m's axes that s does not name; returns the count. */
int jx_smap_unnamed_axes(const jx_sharding *s, int64_t *ids);

#endif
