/* reduce_window's kernels, for window.c's eval and for
 * tests/unit/test_pool_fast.c: the reference (the spec: every dtype, padding,
 * base and window dilation) and a fast path for the windows pooling layers
 * use: f32/f64, no padding and no base dilation (every window lies inside the
 * operand), any window, stride and window dilation, any layout. The fast
 * path folds each window's elements in the reference's order (float max/min:
 * the first NaN wins, ties keep the first; sums in f64, rounded once), so
 * both give the same bits. */
#ifndef JX_SRC_PRIMS_WINDOW_KERNELS_H
#define JX_SRC_PRIMS_WINDOW_KERNELS_H

#include "prim.h"

typedef enum { JX_WINDOW_SUM, JX_WINDOW_MAX, JX_WINDOW_MIN } jx_window_op;

/* One entry per operand dim of each list (defaults filled in). */
typedef struct {
  int64_t win[JX_MAX_RANK], stride[JX_MAX_RANK], lo[JX_MAX_RANK], hi[JX_MAX_RANK],
      bdil[JX_MAX_RANK], wdil[JX_MAX_RANK];
} jx_window_params;

/* Both take in[0] and out[0] already checked by the shape rule; p is the
 * primitive's parameter list. jx_reduce_window_fast returns 0 without
 * touching out where it does not apply. */
void jx_reduce_window_reference(jx_window_op op, const jx_params *p, const jx_tensor *in,
                                jx_tensor *out);
int jx_reduce_window_fast(jx_window_op op, const jx_window_params *w, const jx_tensor *in,
                          jx_tensor *out);
/* The lists of p with their defaults; JX_OK or the rule's error. */
jx_status jx_window_read_params(const char *name, const jx_params *p, const jx_aval *in,
                                jx_window_params *w);

#endif
