/* Varying manual axes (JAX's "vma", shard_map with check_vma=True).
 *
 * Inside a shard_map body each traced value carries the set of the mesh's
 * manual axes it varies over: an input varies over the axes its in spec
 * names, axis_index over its axis, and an operation's result over the union
 * of its operands' axes. An operand that varies over fewer axes than that
 * union is first cast by pvary (identity on values: the invariant value
 * broadcast to every device), and the collectives cast their operand to vary
 * over the axes they reduce. psum then gives a value invariant over its axes.
 *
 * What the types buy is reverse mode: pvary's transpose is psum and psum's is
 * pvary, so a gradient taken inside the body, or through the shard_map from
 * outside, is the gradient of the global function (JAX's default; without the
 * types, psum transposes to psum and overcounts by the axis size).
 *
 * A set is a small number (0: the empty set, invariant everywhere); equal
 * sets get equal numbers. Only axes bound by jx_axis_push_manual are
 * tracked: vmap's named axes and pmap's (and shard_map with check_vma off)
 * keep the untyped rules. */
#ifndef JX_SRC_TRACE_VMA_H
#define JX_SRC_TRACE_VMA_H

#include <stdint.h>

#include "../prims/prim.h"

/* How a row's outputs vary (jx_prim.vma). The collectives name their axes in
 * params l0 (axis ids), axis_index its axis in i0. Rows holding nested
 * programs give their outputs the union of their operands' sets and the sets
 * their outputs rule found, with no casts. */
typedef enum {
  JX_VMA_UNION = 0,  /* the union of the operands' sets; operands cast to it */
  JX_VMA_REDUCE,     /* psum, pmax, pmin: operand cast over the axes; output: less them */
  JX_VMA_COLLECTIVE, /* all_gather, psum_scatter, ppermute, all_to_all: operand cast
                        over the axes; output: the operand's set */
  JX_VMA_CAST,       /* pvary: the operand's set and the axes */
  JX_VMA_AXIS_INDEX  /* the axis itself */
} jx_vma_kind;

/* The set of the manual ones among ids[0..n), added to / removed from a. */
int jx_vma_add(int a, int n, const int64_t *ids);
int jx_vma_remove(int a, int n, const int64_t *ids);
int jx_vma_union(int a, int b);
/* The axis ids of a into ids (room for JX_MAX_RANK); returns the count. */
int jx_vma_axes(int a, int64_t *ids);
/* The manual ones among ids[0..n) that a does not hold, into out; the count. */
int jx_vma_missing(int a, int n, const int64_t *ids, int64_t *out);
/* The ids[0..n) that are manual axes (into manual) and those that are not
 * (into other); the counts go to *nm and *no. */
void jx_vma_split_manual(int n, const int64_t *ids, int64_t *manual, int *nm, int64_t *other,
                         int *no);

/* For jx_trace_record: the operands to record p with (cast by pvary where
 * the row's kind asks; an operand that needs none is in[i] itself). */
jx_status jx_vma_cast_operands(const jx_prim *p, const jx_params *params, int nin,
                               jx_array *const *in, int nsub, jx_array **cast);
/* The outputs' sets from the (cast) operands' avals. */
void jx_vma_outputs(const jx_prim *p, const jx_params *params, int nin, const jx_aval *in, int nsub,
                    int nout, jx_aval *out);

#endif
