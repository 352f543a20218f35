/* conv_general_dilated as im2col + sgemm, for f32 operands and result with
 * feature_group_count = batch_group_count = 1 (the common convolution).
 *
 * For a chunk of batch elements, each output position y gets a row of the
 * column matrix holding the lhs values its kernel taps read, laid out as
 * [kernel spatial][C] (channels inner: one run per tap in NHWC) (zero where a tap falls into
 * padding or between dilated lhs elements: jx_conv_taps gives the taps that do read). Then
 *   res[O][chunk * out_sp] = R[O][k_sp * C] x Col[chunk * out_sp][k_sp * C]^T
 * is one sgemm, and res is scattered into the out spec's layout. Sums are
 * f32 (BLAS's), as XLA's on CPU. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "conv_kernels.h"

#ifndef JX_HAVE_BLAS
int jx_conv_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  (void)p;
  (void)in;
  (void)out;
  return 0;
}
#else
#include <cblas.h>

#define COL_BYTES ((size_t)32 << 20) /* column matrix per chunk of batch elements */

/* Element offsets, in t's layout, of every canonical spatial position of the
 * spec's spatial dims (row-major over them). */
static void spatial_offsets(const jx_shape *s, const jx_ilist *spec, int nsp, int64_t count,
                            int64_t *out) {
  int64_t st[JX_MAX_RANK], idx[JX_MAX_RANK] = {0}, off = 0;
  jx_shape_strides(*s, st);
  for (int64_t i = 0; i < count; i++) {
    out[i] = off;
    for (int d = nsp - 1; d >= 0; d--) {
      int64_t dim = spec->v[2 + d];
      off += st[dim];
      if (++idx[d] < s->dims[dim]) break;
      off -= st[dim] * s->dims[dim];
      idx[d] = 0;
    }
  }
}

static int fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

int jx_conv_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  if (in[0].dtype != JX_F32 || out->dtype != JX_F32 || p->i[0] != 1 || p->i[1] != 1) return 0;
  jx_conv_geom g;
  jx_conv_geometry(p, in, &out->shape, &g);
  const jx_ilist *lspec = &p->l[JX_CONV_LHS_SPEC], *rspec = &p->l[JX_CONV_RHS_SPEC],
                 *ospec = &p->l[JX_CONV_OUT_SPEC];
  int64_t total = g.N * g.O * g.out_sp, ck = g.C * g.k_sp;
  if (total == 0) return 1;
  if (ck == 0) {
    memset(out->data, 0, sizeof(float) * (size_t)total);
    return 1;
  }
  int64_t row_bytes = (int64_t)sizeof(float) * ck * g.out_sp;
  int64_t chunk = (int64_t)COL_BYTES / row_bytes;
  if (chunk < 1) chunk = 1;
  if (chunk > g.N) chunk = g.N;
  if (!fits_int(g.O) || !fits_int(ck) || !fits_int(chunk * g.out_sp)) return 0;

  int64_t ls[JX_MAX_RANK], rs[JX_MAX_RANK], os[JX_MAX_RANK];
  jx_shape_strides(in[0].shape, ls);
  jx_shape_strides(in[1].shape, rs);
  jx_shape_strides(out->shape, os);
  int64_t lsN = ls[lspec->v[0]], lsC = ls[lspec->v[1]], rsO = rs[rspec->v[0]],
          rsI = rs[rspec->v[1]], osN = os[ospec->v[0]], osO = os[ospec->v[1]];
  /* tables: lhs, rhs and out spatial offsets; the taps of one output position */
  size_t ntab = (size_t)(g.in_sp + 3 * g.k_sp + g.out_sp);
  int64_t *tab = malloc(sizeof(int64_t) * ntab);
  float *R = malloc(sizeof(float) * (size_t)(g.O * ck));
  float *col = malloc((size_t)(row_bytes * chunk));
  float *res = malloc(sizeof(float) * (size_t)(g.O * chunk * g.out_sp));
  int ok = tab && R && col && res;
  if (ok) {
    int64_t *loff = tab, *roff = loff + g.in_sp, *yoff = roff + g.k_sp, *kpos = yoff + g.out_sp,
            *lpos = kpos + g.k_sp;
    spatial_offsets(&in[0].shape, lspec, g.nsp, g.in_sp, loff);
    spatial_offsets(&in[1].shape, rspec, g.nsp, g.k_sp, roff);
    spatial_offsets(&out->shape, ospec, g.nsp, g.out_sp, yoff);
    const float *L = in[0].data, *Rin = in[1].data;
    for (int64_t o = 0; o < g.O; o++) /* R as [O][k_sp][C] */
      for (int64_t k = 0; k < g.k_sp; k++)
        for (int64_t c = 0; c < g.C; c++)
          R[(o * g.k_sp + k) * g.C + c] = Rin[o * rsO + c * rsI + roff[k]];
    for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
      int64_t nb = g.N - n0 < chunk ? g.N - n0 : chunk, cols = nb * g.out_sp;
      memset(col, 0, sizeof(float) * (size_t)(cols * ck));
      for (int64_t y = 0; y < g.out_sp; y++) {
        int64_t ntap = jx_conv_taps(&g, y, kpos, lpos);
        for (int64_t n = 0; n < nb; n++) {
          float *row = col + (n * g.out_sp + y) * ck;
          for (int64_t j = 0; j < ntap; j++) {
            const float *l = L + (n0 + n) * lsN + loff[lpos[j]];
            float *dst = row + kpos[j] * g.C;
            for (int64_t c = 0; c < g.C; c++) dst[c] = l[c * lsC];
          }
        }
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g.O, (int)cols, (int)ck, 1.0f, R,
                  (int)ck, col, (int)ck, 0.0f, res, (int)cols);
      float *o = out->data;
      for (int64_t oc = 0; oc < g.O; oc++)
        for (int64_t n = 0; n < nb; n++) {
          const float *r = res + oc * cols + n * g.out_sp;
          float *dst = o + (n0 + n) * osN + oc * osO;
          for (int64_t y = 0; y < g.out_sp; y++) dst[yoff[y]] = r[y];
        }
    }
  }
  free(tab);
  free(R);
  free(col);
  free(res);
  return ok;
}
#endif
