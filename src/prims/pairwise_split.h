/* NumPy's pairwise sum split into subtrees that threads sum apart. The
 * tree over n terms (reduce.c's pairwise sums, and the fused column
 * reductions render_c.c emits) depends on n alone: a node of at most 128
 * terms is a leaf, a larger one of n terms splits at half(n) = n / 2 rounded
 * down to a multiple of 8. So the subtree over terms [s, s + k) is the tree
 * over k terms starting at s, and adding the subtrees' sums back up in the
 * tree's own order (left + right at every node) gives the unsplit sum's
 * bits, for any number of pieces and threads. */
#ifndef JX_SRC_PRIMS_PAIRWISE_SPLIT_H
#define JX_SRC_PRIMS_PAIRWISE_SPLIT_H

#include <stdint.h>

enum { JX_PAIRWISE_MAX_DEPTH = 6, JX_PAIRWISE_MAX_PIECES = 64 };

/* The smallest depth (at most JX_PAIRWISE_MAX_DEPTH) at which the tree over
 * n terms has at least `want` nodes, short of nodes under about `least`
 * terms or leaves; 0: one piece, the whole tree. */
int jx_pairwise_depth(int64_t n, int64_t want, int64_t least);

/* The tree's nodes at `depth`, or the leaves above it, left to right: their
 * first terms and counts. Returns how many (at most 2^depth). */
int jx_pairwise_pieces(int64_t n, int depth, int64_t *start, int64_t *count);

/* The additions that combine the pieces' sums as the tree adds them, in
 * order: pairs[i][0] += pairs[i][1] (piece indices; the total lands in
 * piece 0). Returns how many (one fewer than the pieces). */
int jx_pairwise_pairs(int64_t n, int depth, uint8_t (*pairs)[2]);

/* Adds the pieces' sums as the tree adds them: piece k's m partial sums
 * (m columns) at part + k * m; the total lands in piece 0's. */
void jx_pairwise_combine_f32(int64_t n, int depth, float *part, int64_t m);
void jx_pairwise_combine_f64(int64_t n, int depth, double *part, int64_t m);

#endif
