/* One kernel renderer, several dialects. render_c.c holds what every dialect
 * shares: the expression of each primitive (f32/f64 templates that mirror
 * the reference kernels), the prelude's helpers (JX_FMAX, jx_ipow_T, ...),
 * fastmath.h's text and the body of a fused kernel (per-row offsets, loads,
 * the members' expressions, stores). A dialect says only what differs: its
 * header (includes or typedefs, and the qualifier JX_FN that every helper
 * function carries), the kernel's signature, how it names the kernel's
 * arguments, how rows and columns are distributed, and how restrict is
 * spelled. The expressions themselves need no per-dialect spelling: fabsf,
 * sqrtf, powf, exp, log, signbit, ... are CUDA device functions too. */
#ifndef JX_SRC_COMPILE_RENDER_H
#define JX_SRC_COMPILE_RENDER_H

#include "fusion.h"

typedef struct jx_dialect {
  const char *name; /* "C", "CUDA": for messages */
  const char
      *header; /* starts the prelude; defines JX_FN (and, for NVRTC, what fastmath.h needs) */
  /* printf format with one %s, the kernel's name: the signature up to and
   * including the opening brace; the arguments it declares are named by: */
  const char *signature;
  const char *buf;      /* the buffer pointers: "buf" -> buf[k] */
  const char *dims;     /* the group's dims: "dims" -> dims[d] */
  const char *strides;  /* the loads' strides: "strides" -> strides[k * 8 + d] */
  const char *row_loop; /* opens the loop over `row` in [row_begin, row_end) */
  const char *col_loop; /* opens the loop over `j` in [0, inner) */
  const char *restrict_kw;
  /* after the shared helpers: the types jx_c64 and jx_c128 that complex
   * values are computed in, with what the expressions of c64/c128 operands
   * call (prim_lowering.c: cexpf, cabs, CMPLXF, ...) and jx_ipow_T and
   * jx_pw_T for both; NULL: the dialect renders no complex value */
  const char *complex_prelude;
  /* around a kernel that computes complex values (or NULL): the C dialect
   * turns GCC's SLP vectorizer off there, which folds the double -> float
   * -> double round trip of complex parts into a copy (GCC 12) */
  const char *complex_kernel_open, *complex_kernel_close;
  /* A row reduction shared by the threads of a block: row_block opens the
   * code that the row's block runs (the other blocks of the row idle), and
   * the threads of that block split the row's leaves (sums) or strips
   * (max/min), thread 0 combining them in the eager kernel's order. NULL
   * row_block: one thread walks each row (the C dialect, whose rows are
   * split over the pool instead). */
  const char *row_block;
  const char *shared_kw; /* a block-shared array's qualifier: "__shared__" */
  const char *thread_id; /* the thread's index in its block: "threadIdx.x" */
  const char *threads;   /* the threads of a block: "blockDim.x" */
  const char *barrier;   /* every thread of the block waits: "__syncthreads();" */
  /* A column reduction (a group with lead > 0) works on blocks of col_block
   * output columns: col_block_loop opens the loop over the blocks of a row,
   * defining `c0` (the block's first column) and `cw` (its width, at most
   * col_block); vector_hint (or NULL) precedes the loop over a block's
   * columns. col_block 0: the dialect cannot render column reductions. */
  int col_block;
  const char *col_block_loop;
  const char *vector_hint;
  /* 1: a column-reduction sum walks only the reduced rows [dims[JX_MAX_RANK],
   * dims[JX_MAX_RANK + 1]), a subtree of their pairwise tree whose partial
   * sums the caller adds up (prims/pairwise_split.h); 0: all of them */
  int red_range;
  /* A column reduction tiled over a block's threads (NULL: col_block_loop's
   * one thread per column): col_tile_loop opens the loop over the tiles of
   * a row, defining grp_ (the tile's row groups, at most 32), ty_ (the
   * thread's row group; grp_ or more: the thread only meets the barriers),
   * tx_ (its column in the tile, below 32), c0 (that column) and cw (1 when
   * c0 is a column, else 0). Sums split the reduced rows' pairwise tree by
   * leaves, max/min by strips; every column keeps the eager kernel's bits. */
  const char *col_tile_loop;
  /* A reduction split across blocks (NULL: a block reduces the whole
   * range): piece_range is a printf format whose %s is the reduced range's
   * length, declaring rb_ and re_, the terms of this block's piece (a row's
   * columns, a column reduction's rows: a subtree of the pairwise tree, or
   * a strip for max/min); piece_part is the element offset of the piece's
   * partial results in the reduced store, which the caller combines;
   * pieces_flag is nonzero when the launch splits (then a bf16 reduction's
   * partial results are stored as f32, rounded only once combined). */
  const char *piece_range;
  const char *piece_part;
  const char *pieces_flag;
  /* Groups of at least this many elements have their dims written into
   * the kernel as numbers (the kernel serves one shape: its rows' indices
   * divide by constants, a multiply and a shift, where a 64-bit division by
   * a variable is a long software routine on a GPU); smaller ones, and all
   * where it is 0, read them from dims (one kernel serves any shape, so
   * programs traced at several small shapes share their modules). */
  int64_t literal_dims_from;
} jx_dialect;

extern const jx_dialect jx_dialect_c;    /* render_c.c */
extern const jx_dialect jx_dialect_cuda; /* render_cuda.c */

/* malloc'ed prelude of dialect d: its header, the shared helpers and
 * fastmath.h; or NULL with an error recorded. */
char *jx_render_prelude(const jx_dialect *d);
/* malloc'ed source of the kernel `name` for group g of p in dialect d (it
 * needs the prelude before it), or NULL with an error recorded. */
char *jx_render_kernel(const jx_dialect *d, const jx_program *p, const jx_fusion_group *g,
                       const char *name);

#endif
