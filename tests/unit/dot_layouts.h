/* The operand layouts the dot_general tests sweep. */
#ifndef JX_TESTS_UNIT_DOT_LAYOUTS_H
#define JX_TESTS_UNIT_DOT_LAYOUTS_H

#include "prims/dot_kernels.h"

typedef void (*test_dot_visit)(jx_shape ls, jx_shape rs, const jx_params *p, void *ctx);

/* Calls visit for every placement of one batch dim (size B) and one
 * contracting dim (size K) in two rank-3 operands whose third dims are M
 * (left) and N (right). */
static inline void test_dot_rank3_layouts(int64_t B, int64_t K, int64_t M, int64_t N,
                                          test_dot_visit visit, void *ctx) {
  for (int lb = 0; lb < 3; lb++)
    for (int lc = 0; lc < 3; lc++)
      for (int rb = 0; rb < 3; rb++)
        for (int rc = 0; rc < 3; rc++) {
          if (lb == lc || rb == rc) continue;
          jx_params p = {0};
          p.l[JX_DOT_LB] = (jx_ilist){1, {lb}};
          p.l[JX_DOT_LC] = (jx_ilist){1, {lc}};
          p.l[JX_DOT_RB] = (jx_ilist){1, {rb}};
          p.l[JX_DOT_RC] = (jx_ilist){1, {rc}};
          jx_shape ls = {3, {M, M, M}}, rs = {3, {N, N, N}};
          ls.dims[lb] = B, ls.dims[lc] = K, rs.dims[rb] = B, rs.dims[rc] = K;
          visit(ls, rs, &p, ctx);
        }
}

#endif
