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
#include "../base/threadpool.h"

#ifndef JX_HAVE_BLAS
int jx_conv_blas(const jx_params *p, const jx_tensor *in, jx_tensor *out) {
  (void)p;
  (void)in;
  (void)out;
  return 0;
}
#else
#include <cblas.h>

#define COL_BYTES   ((size_t)32 << 20)  /* column matrix per chunk of batch elements */
#define T_COL_BYTES ((size_t)256 << 20) /* the transposed column matrix, whole */

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

/* OpenBLAS's own threads off (as dot_blas.c does): the pool splits the work. */
extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));

static int own_threads(void) {
  if (!openblas_set_num_threads || !openblas_get_num_threads) return 0;
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  return 1;
}

typedef struct {
  const jx_conv_geom *g;
  const float *L, *R;
  float *out;
  const int64_t *loff, *yoff, *taps; /* taps: per output position, count then (kpos, lpos) pairs */
  const int64_t *tap_at;             /* per output position: its entry in taps */
  int64_t lsN, lsC, osN, osO, ck, chunk;
  _Atomic int failed;
} conv_job;

/* Chunk c of batch elements: im2col, one sgemm, scatter into out. */
static void conv_chunk(conv_job *j, int64_t c) {
  const jx_conv_geom *g = j->g;
  int64_t n0 = c * j->chunk, nb = g->N - n0 < j->chunk ? g->N - n0 : j->chunk;
  int64_t cols = nb * g->out_sp, ck = j->ck;
  float *col = malloc(sizeof(float) * (size_t)(cols * ck));
  float *res = malloc(sizeof(float) * (size_t)(g->O * cols));
  if (!col || !res) {
    free(col);
    free(res);
    j->failed = 1;
    return;
  }
  memset(col, 0, sizeof(float) * (size_t)(cols * ck));
  for (int64_t y = 0; y < g->out_sp; y++) {
    const int64_t *t = j->taps + j->tap_at[y];
    int64_t ntap = t[0];
    for (int64_t n = 0; n < nb; n++) {
      float *row = col + (n * g->out_sp + y) * ck;
      const float *ln = j->L + (n0 + n) * j->lsN;
      for (int64_t k = 0; k < ntap; k++) {
        const float *l = ln + j->loff[t[2 + 2 * k]];
        float *dst = row + t[1 + 2 * k] * g->C;
        if (j->lsC == 1)
          memcpy(dst, l, sizeof(float) * (size_t)g->C);
        else
          for (int64_t ci = 0; ci < g->C; ci++) dst[ci] = l[ci * j->lsC];
      }
    }
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->O, (int)cols, (int)ck, 1.0f, j->R,
              (int)ck, col, (int)ck, 0.0f, res, (int)cols);
  for (int64_t oc = 0; oc < g->O; oc++)
    for (int64_t n = 0; n < nb; n++) {
      const float *r = res + oc * cols + n * g->out_sp;
      float *dst = j->out + (n0 + n) * j->osN + oc * j->osO;
      for (int64_t y = 0; y < g->out_sp; y++) dst[j->yoff[y]] = r[y];
    }
  free(col);
  free(res);
}

static void conv_chunks(void *ctx, int64_t begin, int64_t end) {
  for (int64_t c = begin; c < end; c++) conv_chunk(ctx, c);
}

/* The column matrix transposed, for an lhs whose batch dim is its
 * contiguous one and whose feature dim is not (the kernel gradient's conv,
 * where batch and feature swap roles: there the features are the forward
 * batch, a whole image apart): colT[k_sp * C][out_sp * N], rows ordered as
 * R's columns, columns (y, n) with n inner, so that each tap copies runs of
 * N contiguous values. res[O][out_sp * N] = R x colT, computed in column
 * blocks over the pool (a fixed split: the same bits for any thread count). */
typedef struct {
  const conv_job *j;
  float *colT, *res;
  int64_t cols, width; /* width: columns per gemm block */
} conv_t_job;

static void build_t(void *ctx, int64_t y0, int64_t y1) {
  const conv_t_job *t = ctx;
  const conv_job *j = t->j;
  const jx_conv_geom *g = j->g;
  for (int64_t y = y0; y < y1; y++) {
    const int64_t *tp = j->taps + j->tap_at[y];
    for (int64_t k = 0; k < tp[0]; k++) {
      const float *l = j->L + j->loff[tp[2 + 2 * k]];
      float *dst = t->colT + tp[1 + 2 * k] * g->C * t->cols + y * g->N;
      for (int64_t c = 0; c < g->C; c++) {
        const float *lc = l + c * j->lsC;
        float *dc = dst + c * t->cols;
        for (int64_t n = 0; n < g->N; n++) dc[n] = lc[n];
      }
    }
  }
}

static void gemm_t(void *ctx, int64_t b0, int64_t b1) {
  const conv_t_job *t = ctx;
  const jx_conv_geom *g = t->j->g;
  for (int64_t b = b0; b < b1; b++) {
    int64_t c0 = b * t->width, c1 = c0 + t->width < t->cols ? c0 + t->width : t->cols;
    if (c0 < c1)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->O, (int)(c1 - c0),
                  (int)t->j->ck, 1.0f, t->j->R, (int)t->j->ck, t->colT + c0, (int)t->cols, 0.0f,
                  t->res + c0, (int)t->cols);
  }
}

enum { T_BLOCK = 32 };

static int conv_transposed(const conv_job *j) {
  const jx_conv_geom *g = j->g;
  int64_t cols = g->N * g->out_sp;
  conv_t_job t = {j, calloc((size_t)(cols * j->ck), sizeof(float)),
                  malloc(sizeof(float) * (size_t)(g->O * cols)), cols, cols};
  int ok = t.colT && t.res;
  if (ok) {
    jx_parallel_for(g->out_sp, 1, build_t, &t);
    int64_t blocks = cols / T_BLOCK < 4 ? cols / T_BLOCK : 4;
    if (blocks > 1) t.width = (cols / blocks + 15) / 16 * 16;
    jx_parallel_for(blocks > 1 ? (cols + t.width - 1) / t.width : 1, 1, gemm_t, &t);
    for (int64_t oc = 0; oc < g->O; oc++)
      for (int64_t y = 0; y < g->out_sp; y++) {
        const float *r = t.res + oc * cols + y * g->N;
        float *dst = j->out + oc * j->osO + j->yoff[y];
        for (int64_t n = 0; n < g->N; n++) dst[n * j->osN] = r[n];
      }
  }
  free(t.colT);
  free(t.res);
  return ok;
}

/* Batch chunks: at most COL_BYTES of columns each, and at least MIN_CHUNKS
 * chunks when the batch allows (so that the pool has pieces to share);
 * the split depends on the shapes only, never on the thread count, so the
 * result's bits do not either. */
enum { MIN_CHUNKS = 4 };

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
  if (chunk > (g.N + MIN_CHUNKS - 1) / MIN_CHUNKS) chunk = (g.N + MIN_CHUNKS - 1) / MIN_CHUNKS;
  if (!fits_int(g.O) || !fits_int(ck) || !fits_int(chunk * g.out_sp)) return 0;

  int64_t ls[JX_MAX_RANK], rs[JX_MAX_RANK], os[JX_MAX_RANK];
  jx_shape_strides(in[0].shape, ls);
  jx_shape_strides(in[1].shape, rs);
  jx_shape_strides(out->shape, os);
  int64_t rsO = rs[rspec->v[0]], rsI = rs[rspec->v[1]];
  /* tables: lhs, rhs and out spatial offsets; every output position's taps */
  size_t ntab = (size_t)(g.in_sp + 3 * g.k_sp + 2 * g.out_sp);
  int64_t *tab = malloc(sizeof(int64_t) * ntab);
  float *R = malloc(sizeof(float) * (size_t)(g.O * ck));
  int64_t *taps = NULL;
  int ok = tab && R;
  if (ok) {
    int64_t *loff = tab, *roff = loff + g.in_sp, *yoff = roff + g.k_sp, *kpos = yoff + g.out_sp,
            *lpos = kpos + g.k_sp, *tap_at = lpos + g.k_sp;
    spatial_offsets(&in[0].shape, lspec, g.nsp, g.in_sp, loff);
    spatial_offsets(&in[1].shape, rspec, g.nsp, g.k_sp, roff);
    spatial_offsets(&out->shape, ospec, g.nsp, g.out_sp, yoff);
    int64_t ntaps = 0;
    for (int64_t y = 0; y < g.out_sp; y++) {
      tap_at[y] = ntaps;
      ntaps += 1 + 2 * jx_conv_taps(&g, y, kpos, lpos);
    }
    taps = malloc(sizeof(int64_t) * (size_t)ntaps);
    ok = taps != NULL;
    for (int64_t y = 0; ok && y < g.out_sp; y++) {
      int64_t *t = taps + tap_at[y], nt = jx_conv_taps(&g, y, kpos, lpos);
      t[0] = nt;
      for (int64_t k = 0; k < nt; k++) t[1 + 2 * k] = kpos[k], t[2 + 2 * k] = lpos[k];
    }
    const float *Rin = in[1].data;
    if (ok && rsO < rsI) /* R as [O][k_sp][C], read along the rhs's shortest stride */
      for (int64_t k = 0; k < g.k_sp; k++)
        for (int64_t c = 0; c < g.C; c++)
          for (int64_t o = 0; o < g.O; o++)
            R[(o * g.k_sp + k) * g.C + c] = Rin[o * rsO + c * rsI + roff[k]];
    else
      for (int64_t o = 0; ok && o < g.O; o++)
        for (int64_t k = 0; k < g.k_sp; k++)
          for (int64_t c = 0; c < g.C; c++)
            R[(o * g.k_sp + k) * g.C + c] = Rin[o * rsO + c * rsI + roff[k]];
    conv_job j = {&g,
                  in[0].data,
                  R,
                  out->data,
                  loff,
                  yoff,
                  taps,
                  tap_at,
                  ls[lspec->v[0]],
                  ls[lspec->v[1]],
                  os[ospec->v[0]],
                  os[ospec->v[1]],
                  ck,
                  chunk,
                  0};
    if (ok) own_threads();
    if (ok && j.lsN == 1 && j.lsC != 1 && g.N > 1 &&
        (double)ck * (double)(g.N * g.out_sp) * sizeof(float) <= (double)T_COL_BYTES) {
      ok = conv_transposed(&j);
    } else if (ok) {
      jx_parallel_for((g.N + chunk - 1) / chunk, 1, conv_chunks, &j);
      ok = !j.failed;
    }
  }
  free(tab);
  free(R);
  free(taps);
  return ok;
}
#endif
