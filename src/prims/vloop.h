/* JX_VLOOP(n, BODY): for (int64_t i = 0; i < n; i++) BODY, in chunks of a
 * fixed width so that gcc vectorizes simple bodies even at -O2 (its cheap
 * cost model takes only loops of known trip count). Pointers in BODY should
 * be restrict-qualified, or gcc will not vectorize without an alias check. */
#ifndef JX_SRC_PRIMS_VLOOP_H
#define JX_SRC_PRIMS_VLOOP_H

#include <stdint.h>

#define JX_VLOOP_WIDTH 16
#define JX_VLOOP(n, BODY)                                                                          \
  do {                                                                                             \
    int64_t i_ = 0;                                                                                \
    for (; i_ + JX_VLOOP_WIDTH <= (n); i_ += JX_VLOOP_WIDTH)                                       \
      for (int j_ = 0; j_ < JX_VLOOP_WIDTH; j_++) {                                                \
        int64_t i = i_ + j_;                                                                       \
        BODY;                                                                                      \
      }                                                                                            \
    for (int64_t i = i_; i < (n); i++) {                                                           \
      BODY;                                                                                        \
    }                                                                                              \
  } while (0)

#endif
