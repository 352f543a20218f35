/* Fusion: runs of consecutive elementwise equations of one output shape
 * (with broadcasts of their inputs and scalar operands) become one loop
 * kernel, so intermediate values stay in registers instead of memory. */
#ifndef JX_SRC_COMPILE_FUSION_H
#define JX_SRC_COMPILE_FUSION_H

#include "../ir/program.h"

#define JX_FUSION_MAX_LOADS  32
#define JX_FUSION_MAX_STORES 16

/* One value the kernel reads: variable var of the program, indexed with
 * strides (in elements, per output dimension; 0 where it is broadcast). */
typedef struct {
  int var;
  int64_t strides[JX_MAX_RANK];
} jx_fusion_load;

typedef struct {
  int first, count; /* equations [first, first + count) of the program */
  jx_shape shape;   /* the shape every member produces */
  int nloads, nstores;
  jx_fusion_load loads[JX_FUSION_MAX_LOADS];
  int stores[JX_FUSION_MAX_STORES]; /* variables written out (used after the group) */
  int compute;                      /* members that compute (not broadcasts) */
} jx_fusion_group;

/* Splits p's equations into groups; a group of one equation, or one that
 * cannot be fused, is run as it is. Returns the number of groups written to
 * *out (malloc'ed), or -1 with an error recorded. */
int jx_fuse(const jx_program *p, jx_fusion_group **out);

/* 1 when g runs as one compiled kernel: it computes something worth a kernel
 * (two or more equations) and writes a result; else its equations run one by one. */
static inline int jx_fusion_group_is_kernel(const jx_fusion_group *g) {
  return g->compute >= 2 && g->nstores > 0;
}

/* The load index of var with these strides in g, or -1. */
int jx_fusion_find_load(const jx_fusion_group *g, int var, const int64_t *strides);

/* 1 when the renderer can compute this primitive inside a kernel. */
int jx_fusion_renderable(const jx_eqn *e, const jx_program *p);

#endif
