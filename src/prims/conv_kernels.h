/* conv_general_dilated's kernels, for conv.c's eval and for
 * tests/unit/test_conv_blas.c: the reference (the spec, every dtype and
 * layout) and the BLAS path (im2col + sgemm for f32 with feature and batch
 * group counts 1, any number of spatial dims, strides, padding, dilations and
 * layouts). jx_conv_blas returns 0 without touching out where it does not
 * apply (or out of memory); the caller then runs the reference. Both take
 * in[2] and out[1] already checked by the shape rule. */
#ifndef JX_SRC_PRIMS_CONV_KERNELS_H
#define JX_SRC_PRIMS_CONV_KERNELS_H

#include "prim.h"

/* The parameter list slots of conv_general_dilated (see its row's params). */
enum {
  JX_CONV_STRIDES,
  JX_CONV_PAD_LO,
  JX_CONV_PAD_HI,
  JX_CONV_LHS_DIL,
  JX_CONV_RHS_DIL,
  JX_CONV_LHS_SPEC,
  JX_CONV_RHS_SPEC,
  JX_CONV_OUT_SPEC
};
#define JX_CONV_MAX_SP (JX_MAX_RANK - 2)

/* The geometry of one call in canonical order (batch, feature, spatial...). */
typedef struct {
  int nsp;
  int64_t N, C, O, I, G, BG, on; /* on: output batch size N / BG */
  int64_t in[JX_CONV_MAX_SP], k[JX_CONV_MAX_SP], out[JX_CONV_MAX_SP];
  int64_t stride[JX_CONV_MAX_SP], lo[JX_CONV_MAX_SP], ldil[JX_CONV_MAX_SP], rdil[JX_CONV_MAX_SP];
  int64_t in_sp, k_sp, out_sp; /* spatial element counts */
} jx_conv_geom;

void jx_conv_geometry(const jx_params *p, const jx_tensor *in, const jx_shape *out_shape,
                      jx_conv_geom *g);
/* For the output position y (flat over the canonical spatial dims), the
 * kernel positions that touch the lhs and the lhs spatial offsets (flat,
 * canonical) they touch; returns how many. */
int64_t jx_conv_taps(const jx_conv_geom *g, int64_t y, int64_t *kpos, int64_t *lpos);

void jx_conv_reference(const jx_params *p, const jx_tensor *in, jx_tensor *out);
int jx_conv_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out);

#endif
