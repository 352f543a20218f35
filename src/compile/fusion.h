/* Fusion: runs of consecutive elementwise equations of one output shape
 * (with broadcasts of their inputs and scalar operands) become one loop
 * kernel, so intermediate values stay in registers instead of memory.
 * A reduce_sum/max/min over the last dimension may end a run: its producers
 * are computed row by row and reduced without a trip through memory. So may
 * one over the leading dimensions (a column reduction: a bias gradient's sum
 * over the batch): its producers are computed a block of output columns at
 * a time and accumulated into those columns, never materialized.
 * Views are read through: a kernel loads the operand of a broadcast_in_dim
 * (stride 0 along the new dims), a slice (a base offset and the strides
 * times the steps), a transpose (permuted strides) or a reshape, squeeze or
 * expand_dims whose new dims map onto strides (splitting or merging dims),
 * chains of them included, and a view that nothing else reads as an array
 * is skipped. A pad or concatenate of operands from outside the run is a
 * select over loads with windows (jx_fusion_window). */
#ifndef JX_SRC_COMPILE_FUSION_H
#define JX_SRC_COMPILE_FUSION_H

#include "../ir/program.h"

#define JX_FUSION_MAX_LOADS  32
#define JX_FUSION_MAX_STORES 16

/* A window of a load along one output dim (a pad's or a concatenate's
 * operand): output index i is operand index t = (i - lo) / step when
 * i - lo is a multiple of step in [0, step * count); elsewhere the load is
 * outside its operand and the member selects the padding value (pad) or
 * another operand (concatenate). The kernel reads a clamped in-bounds
 * index outside, so it never loads out of bounds. lo, step and count are
 * constants of the kernel's source. */
typedef struct {
  int dim;
  int64_t lo, step, count;
} jx_fusion_window;

#define JX_FUSION_MAX_WINDOWS 4

/* One value the kernel reads: variable var of the program, indexed with
 * strides (in elements, per output dimension; 0 where it is broadcast) from
 * a base offset (in elements: where a slice starts), through its windows
 * (none for a plain load). The executables add the offset to the buffer's
 * address when they set up a launch, so the kernel's signature does not
 * depend on it. */
typedef struct {
  int var;
  int64_t strides[JX_MAX_RANK];
  int64_t offset;
  int nwin;
  jx_fusion_window win[JX_FUSION_MAX_WINDOWS];
} jx_fusion_load;

typedef struct {
  int first, count; /* equations [first, first + count) of the program */
  jx_shape shape;   /* the shape every member produces */
  int nloads, nstores;
  jx_fusion_load loads[JX_FUSION_MAX_LOADS];
  int stores[JX_FUSION_MAX_STORES]; /* variables written out (used after the group) */
  int compute;                      /* members that compute (not broadcasts) */
  int reduces; /* 1: the last member is a reduce_sum/max/min over the last dimension of
                * `shape` (f32/f64), fed by the others: the kernel produces one row,
                * reduces it as the eager kernel does, and stores one value per row;
                * or, when lead > 0, over the leading dimensions (below) */
  int lead;    /* > 0: the reduction is over dims [0, lead) of `shape` (a column
                * reduction): the kernel reduces every column of the kept dims
                * [lead, rank) as the eager kernel does and stores one value per column */
  int windows; /* 1: a pad or concatenate is a member (its loads have windows) */
  int single;  /* 1: one equation that is a kernel on its own (jx_fusion_single_worth_a_kernel) */
  int skip;    /* 1: nothing runs: a kernel with nothing to store, or a lone view
                * (jx_fusion_is_view) that every reader reads through (the kernels load
                * its operand) */
  /* 1: `shape` is the members' shape with its dims of 1 dropped and the
   * neighbouring dims that every load reads as one merged (an elementwise kernel
   * of jx_fuse over [N, 1] runs as [N]: one vectorized loop, not a row per
   * element); the members and their operands keep their own shape, which
   * jx_fusion_operand maps onto this one (the loads' strides are per dim of
   * `shape`) */
  int collapsed;
} jx_fusion_group;

/* Splits p's equations into groups; a group of one equation, or one that
 * cannot be fused, is run as it is. Returns the number of groups written to
 * *out (malloc'ed), or -1 with an error recorded. With JX_JIT_KERNELS=0 (read
 * at each call) every equation is a group of its own that runs as it is: a
 * jitted program then runs no generated code and needs no C compiler (for a
 * machine without one, to rule the code generator in or out of a bug, and
 * for tests of the layers above that do not need kernels). */
int jx_fuse(const jx_program *p, jx_fusion_group **out);
/* jx_fuse for a dialect that renders integers (the CUDA one): equations of
 * integer dtypes (arithmetic with the reference kernels' semantics,
 * comparisons, selects, converts, views) fuse as the others do. */
int jx_fuse_device(const jx_program *p, jx_fusion_group **out);
/* 0 when JX_JIT_KERNELS=0 asks for no generated code, else 1. */
int jx_fusion_kernels_enabled(void);

/* 1 when g is worth a kernel and fits one (its loads and stores): two or
 * more equations that compute something (one computation reading a
 * broadcast counts: the kernel reads the broadcast's operand in place
 * instead of materializing it); else its equations run one by one. */
static inline int jx_fusion_group_candidate(const jx_fusion_group *g) {
  return g->compute >= 2 || (g->compute == 1 && (g->count >= 2 || g->single));
}

/* 1 when e, alone in its group, is still worth a kernel (a large enough
 * elementwise computation). */
int jx_fusion_single_worth_a_kernel(const jx_program *p, const jx_eqn *e);

/* 1 when g runs as one compiled kernel: a candidate that writes a result. */
static inline int jx_fusion_group_is_kernel(const jx_fusion_group *g) {
  return jx_fusion_group_candidate(g) && g->nstores > 0 && !g->skip;
}

/* 1 when e is a pad or concatenate a kernel may compute from windowed
 * loads of its operands (jx_fusion_windows). */
int jx_fusion_is_window_op(const jx_eqn *e, const jx_program *p);
/* The windows of operand i of window op e (a member of g): 0 when they do
 * not fit JX_FUSION_MAX_WINDOWS, else 1 with *n and win set. */
int jx_fusion_windows(const jx_program *p, const jx_eqn *e, int i, int *n, jx_fusion_window *win);
/* Adds g's load of operand i of window op e through its windows unless g
 * has it; 0 when g has no room. jx_fusion_window_load: its index, or -1. */
int jx_fusion_add_window_operand(const jx_program *p, jx_fusion_group *g, const jx_eqn *e, int i);
int jx_fusion_window_load(const jx_program *p, const jx_fusion_group *g, const jx_eqn *e, int i);

/* The load index of var with these strides and offset 0 in g, or -1. */
int jx_fusion_find_load(const jx_fusion_group *g, int var, const int64_t *strides);
/* The load index of var with these strides and this offset (and no
 * windows) in g, or -1. */
int jx_fusion_find_view(const jx_fusion_group *g, int var, int64_t offset, const int64_t *strides);

/* 1 when e is a view the kernels may read through: a broadcast_in_dim,
 * slice, transpose, reshape, squeeze or expand_dims of a fusible dtype
 * (integers included: only jx_fuse_device's groups have integer members). */
int jx_fusion_is_view(const jx_eqn *e, const jx_program *p);

/* Where a kernel of g reads operand v (a variable from outside g, or a view
 * that is a member of g): var, offset and strides per output dimension.
 * Views are read through, chains of them too (fusion.h's head); a reshape
 * that does not map onto strides is read as the array it makes. */
void jx_fusion_operand(const jx_program *p, const jx_fusion_group *g, int v, int *var,
                       int64_t *offset, int64_t *strides);
/* The load index of operand v in g (as jx_fusion_operand says, else v
 * itself, for groups built by hand), or -1. */
int jx_fusion_operand_load(const jx_program *p, const jx_fusion_group *g, int v);
/* Adds g's load of operand v (as jx_fusion_operand says) unless g has it;
 * 0 when g has no room. */
int jx_fusion_add_operand(const jx_program *p, jx_fusion_group *g, int v);

/* 0 none, else 1 sum, 2 max, 3 min: e reduces the last dimension of its
 * f32/f64 operand, as a fused group may end. */
int jx_fusion_row_reduce(const jx_eqn *e, const jx_program *p);
/* The jx_fusion_*_reduce rules where the group is a kernel of a dialect
 * that renders integers (device = 1, jx_fuse_device's): bf16 sums too. */
int jx_fusion_row_reduce_on(const jx_eqn *e, const jx_program *p, int device);
int jx_fusion_full_reduce_on(const jx_eqn *e, const jx_program *p, int device);
int jx_fusion_col_reduce_on(const jx_eqn *e, const jx_program *p, int device, int *lead);

/* 0 none, else 1 sum, 2 max, 3 min: e reduces every axis of its f32/f64
 * operand of rank 2 or more, which is the row reduction of its flattened
 * elements (the eager kernel's contiguous sum): a lone one is a kernel of
 * the CUDA executor, whose group has the flat shape and reads it flat. */
int jx_fusion_full_reduce(const jx_eqn *e, const jx_program *p);

/* The partial sums a column reduction's kernel keeps per column: one per
 * level of the pairwise tree and one more; 40 covers 2^40 reduced rows. */
#define JX_FUSION_COL_DEPTH 40

/* 0 none, else 1 sum, 2 max, 3 min: e reduces the leading dims [0, *lead)
 * of its f32/f64 operand and keeps at least one (a column reduction), as a
 * fused group may end. */
int jx_fusion_col_reduce(const jx_eqn *e, const jx_program *p, int *lead);

/* The kernel's row count of a group: the flattened dims before the last, or
 * for a column reduction the kept dims before the last (rows and columns of
 * jx_kernel_fn's signature). */
int64_t jx_fusion_kernel_rows(const jx_fusion_group *g);

/* 1 when kernel group g's store o may be written into the buffer of its
 * load l: no reduction, the same element size and count, the load read
 * with the store's row-major strides (each element is read before it is
 * overwritten, and by no other element) and no other load of the same
 * variable. The caller checks that the variable is dead after g and that
 * its buffer is the run's to write (the CPU and CUDA executables). */
int jx_fusion_store_may_reuse(const jx_program *p, const jx_fusion_group *g, int o, int l);

/* Runs BODY with int v set to each variable group g of p reads as an array
 * when it runs: a kernel (as_kernel) reads its loads, a group run equation
 * by equation its equations' inputs, a skipped group nothing. Lifetimes
 * (the CPU and CUDA executables, the cost model) follow these reads. */
#define JX_FUSION_FOR_READS(p, g, as_kernel, v, BODY)                                              \
  do {                                                                                             \
    if ((g)->skip) break;                                                                          \
    if (as_kernel) {                                                                               \
      for (int l_ = 0; l_ < (g)->nloads; l_++) {                                                   \
        int v = (g)->loads[l_].var;                                                                \
        BODY;                                                                                      \
      }                                                                                            \
    } else {                                                                                       \
      for (int e_ = (g)->first; e_ < (g)->first + (g)->count; e_++)                                \
        for (int i_ = 0; i_ < (p)->eqns[e_].nin; i_++) {                                           \
          int v = (p)->eqns[e_].in[i_];                                                            \
          BODY;                                                                                    \
        }                                                                                          \
    }                                                                                              \
  } while (0)

/* 1 when the renderer can compute this primitive inside a kernel (of the
 * C dialect: no integers). jx_fusion_renderable_on: ints = 1 for a dialect
 * that renders integers (jx_fuse_device). */
int jx_fusion_renderable(const jx_eqn *e, const jx_program *p);
int jx_fusion_renderable_on(const jx_eqn *e, const jx_program *p, int ints);

#endif
