#include "pairwise_split.h"

enum { LEAF = 128 };

static int64_t half(int64_t n) {
  int64_t h = n / 2;
  return h - h % 8;
}

int jx_pairwise_depth(int64_t n, int64_t want, int64_t least) {
  int d = 0; /* the nodes at depth d hold about n / 2^d terms each */
  while (d < JX_PAIRWISE_MAX_DEPTH && ((int64_t)1 << d) < want && n >> (d + 1) > LEAF &&
         n >> (d + 1) >= least)
    d++;
  return d;
}

static int pieces(int64_t s, int64_t n, int depth, int64_t *start, int64_t *count, int k) {
  if (depth == 0 || n <= LEAF) {
    start[k] = s;
    count[k] = n;
    return k + 1;
  }
  int64_t h = half(n);
  k = pieces(s, h, depth - 1, start, count, k);
  return pieces(s + h, n - h, depth - 1, start, count, k);
}

int jx_pairwise_pieces(int64_t n, int depth, int64_t *start, int64_t *count) {
  return pieces(0, n, depth, start, count, 0);
}

/* The piece index holding the sum of the node over n terms whose first
 * piece is *k (advanced past the node's pieces); each of its additions
 * appended to pairs. */
static int node(int64_t n, int depth, uint8_t (*pairs)[2], int *np, int *k) {
  if (depth == 0 || n <= LEAF) return (*k)++;
  int64_t h = half(n);
  int a = node(h, depth - 1, pairs, np, k), b = node(n - h, depth - 1, pairs, np, k);
  pairs[*np][0] = (uint8_t)a;
  pairs[*np][1] = (uint8_t)b;
  (*np)++;
  return a;
}

int jx_pairwise_pairs(int64_t n, int depth, uint8_t (*pairs)[2]) {
  int np = 0, k = 0;
  (void)node(n, depth, pairs, &np, &k);
  return np;
}

#define COMBINE(T, NAME)                                                                           \
  void NAME(int64_t n, int depth, T *part, int64_t m) {                                            \
    uint8_t pr[JX_PAIRWISE_MAX_PIECES][2];                                                         \
    int np = jx_pairwise_pairs(n, depth, pr);                                                      \
    for (int i = 0; i < np; i++) {                                                                 \
      T *l = part + (int64_t)pr[i][0] * m, *r = part + (int64_t)pr[i][1] * m;                      \
      for (int64_t j = 0; j < m; j++) l[j] = l[j] + r[j];                                          \
    }                                                                                              \
  }
COMBINE(float, jx_pairwise_combine_f32)
COMBINE(double, jx_pairwise_combine_f64)
