/* conv_general_dilated as im2col + sgemm, for f32 operands and result with
 * feature_group_count = batch_group_count = 1 (the common convolution).
 * In canonical order (batch n, feature c, spatial), with k a kernel position
 * and y an output position,
 *   out[n, o, y] = sum over c and the taps k of y of lhs[n, c, l(y, k)] * rhs[o, c, k]
 * (jx_conv_taps gives the taps that read the lhs; the others fall into
 * padding or between dilated lhs elements and read 0). Three ways to lay the
 * column matrix out, chosen by the lhs's layout so that its copies are runs:
 *
 *  - rows: the lhs's features are contiguous (NHWC, or one feature). Row
 *    (n, y) of Col holds [k][c]; out[(n, y)][o] = Col x Rk with
 *    Rk[(k, c)][o] = rhs[o, c, k]; the sgemm writes straight into an NHWC
 *    out (any other out layout goes through a scatter).
 *  - kernel gradient: the lhs's batch is contiguous and its features are not
 *    (the kernel gradient's conv, whose "batch" is the forward channels and
 *    whose "features" are the forward batch). Row (c, k) of Col holds
 *    [y][n]; out[(y, n)][o] = Col^T x Rm with Rm[(c, k)][o] = rhs[o, c, k],
 *    a long sum over the rows that is cut into chunks, summed per group in
 *    order and then over the groups in order.
 *  - columns (anything else, NCHW): row (n, y) of Col holds [k][c] gathered
 *    with the feature stride; res[o][(n, y)] = R x Col^T, scattered.
 *
 * Work is cut into chunks of rows whose number depends on the shapes only,
 * never on the thread count, so neither do the result's bits. Sums are f32
 * (BLAS's), as XLA's on CPU; OpenBLAS runs single-threaded inside jx's pool. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "blas_threads.h"
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

enum {
  COL_BYTES = 1 << 20, /* a chunk's column matrix: about this much, to stay in cache */
  MIN_CHUNK_ROWS = 64, /* ... but never fewer rows than this (one sgemm call each) */
  MIN_CHUNKS = 8,      /* chunks wanted, when the rows allow, for the pool to share */
  MAX_GROUPS = 8       /* kernel gradient: partial sums, added up in order at the end */
};

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

/* Rows of `rows` per chunk: about COL_BYTES of row_floats each, at least
 * MIN_CHUNK_ROWS, and no more than a MIN_CHUNKS-th of the rows when that
 * leaves MIN_CHUNK_ROWS. */
static int64_t chunk_rows(int64_t rows, int64_t row_floats) {
  int64_t c = (int64_t)COL_BYTES / ((int64_t)sizeof(float) * row_floats);
  int64_t share = (rows + MIN_CHUNKS - 1) / MIN_CHUNKS;
  if (c > share) c = share;
  if (c < MIN_CHUNK_ROWS) c = MIN_CHUNK_ROWS;
  return c < rows ? c : rows;
}

/* n floats from src to dst: one call of memcpy costs more than a few moves. */
static inline void copy_floats(float *dst, const float *src, int64_t n) {
  if (n == 1)
    *dst = *src;
  else if (n < 8)
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
  else
    memcpy(dst, src, sizeof(float) * (size_t)n);
}

typedef struct {
  const jx_conv_geom *g;
  const float *L, *Rin;
  float *out;
  const int64_t *loff, *roff, *yoff;
  const int64_t *taps, *tap_at;   /* per output position y: count, then (k, l) pairs */
  const int64_t *ktaps, *ktap_at; /* per kernel position k: count, then (y, l) pairs */
  int64_t lsN, lsC, rsO, rsI, osN, osO;
  int64_t ck, rows, chunk;
  const float *B; /* the sgemm's right operand: Rk or Rm, or the rhs itself */
  int64_t ldb;
  float *out_rows; /* rows layout: out itself (ld ldo) or NULL to scatter */
  int64_t ldo;
  float *partial; /* kernel gradient: one [out_sp * N][O] per group */
  int64_t groups, chunks;
  float *R; /* columns layout: R[o][k][c] */
  _Atomic int failed;
} conv_job;

/* One row of a column matrix, the im2col step of every layout: for each
 * tap (pos, l) of t (t[0] of them, then the pairs), the `run` elements at
 * src + loff[l], `stride` apart, go to row + pos * run. A row with fewer
 * than `positions` taps is zeroed first (the rest fall into padding). */
static inline void gather_row(float *row, const int64_t *t, int64_t positions, int64_t run,
                              const float *src, int64_t stride, const int64_t *loff) {
  if (t[0] < positions) memset(row, 0, sizeof(float) * (size_t)(positions * run));
  const int64_t *tap = t + 1, *end = t + 1 + 2 * t[0];
  if (stride == 1) /* the test out of the loop: most runs are a few floats */
    for (; tap < end; tap += 2) copy_floats(row + tap[0] * run, src + loff[tap[1]], run);
  else
    for (; tap < end; tap += 2) {
      float *dst = row + tap[0] * run;
      const float *l = src + loff[tap[1]];
      for (int64_t e = 0; e < run; e++) dst[e] = l[e * stride];
    }
}

/* Rows [r0, r1) of the column matrix of the rows and columns layouts into
 * col: row (n, y) holds [k][c], c `cstride` apart in the lhs. */
static void im2col_rows(const conv_job *j, int64_t r0, int64_t r1, float *col, int64_t cstride) {
  const jx_conv_geom *g = j->g;
  for (int64_t r = r0; r < r1; r++) {
    int64_t n = r / g->out_sp, y = r % g->out_sp;
    gather_row(col + (r - r0) * j->ck, j->taps + j->tap_at[y], g->k_sp, g->C, j->L + n * j->lsN,
               cstride, j->loff);
  }
}

/* The end of the chunk of rows that starts at r0. */
static int64_t chunk_end(const conv_job *j, int64_t r0) {
  return r0 + j->chunk < j->rows ? r0 + j->chunk : j->rows;
}

/* ---- rows layout ---- */

static void rows_chunks(void *ctx, int64_t begin, int64_t end) {
  conv_job *j = ctx;
  const jx_conv_geom *g = j->g;
  int64_t ck = j->ck, O = g->O;
  float *col = malloc(sizeof(float) * (size_t)(j->chunk * ck));
  float *res = j->out_rows ? NULL : malloc(sizeof(float) * (size_t)(j->chunk * O));
  if (!col || (!j->out_rows && !res)) {
    j->failed = 1;
    goto done;
  }
  for (int64_t c = begin; c < end; c++) {
    int64_t r0 = c * j->chunk, r1 = chunk_end(j, r0);
    im2col_rows(j, r0, r1, col, 1); /* the features are contiguous, or one */
    float *dst = j->out_rows ? j->out_rows + r0 * j->ldo : res;
    int64_t ldc = j->out_rows ? j->ldo : O;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(r1 - r0), (int)O, (int)ck, 1.0f,
                col, (int)ck, j->B, (int)j->ldb, 0.0f, dst, (int)ldc);
    if (!j->out_rows)
      for (int64_t r = r0; r < r1; r++) {
        float *o = j->out + (r / g->out_sp) * j->osN + j->yoff[r % g->out_sp];
        const float *s = res + (r - r0) * O;
        for (int64_t oc = 0; oc < O; oc++) o[oc * j->osO] = s[oc];
      }
  }
done:
  free(col);
  free(res);
}

/* ---- kernel-gradient layout ---- */

static void kgrad_groups(void *ctx, int64_t begin, int64_t end) {
  conv_job *j = ctx;
  const jx_conv_geom *g = j->g;
  int64_t width = g->out_sp * g->N, O = g->O;
  float *col = malloc(sizeof(float) * (size_t)(j->chunk * width));
  float *rm = j->B ? NULL : malloc(sizeof(float) * (size_t)(j->chunk * O));
  if (!col || (!j->B && !rm)) {
    j->failed = 1;
    goto done;
  }
  for (int64_t grp = begin; grp < end; grp++) {
    int64_t c0 = grp * j->chunks / j->groups, c1 = (grp + 1) * j->chunks / j->groups;
    float *acc = j->partial + grp * width * O;
    for (int64_t c = c0; c < c1; c++) {
      int64_t r0 = c * j->chunk, r1 = chunk_end(j, r0);
      for (int64_t r = r0; r < r1; r++) {
        int64_t f = r / g->k_sp, k = r % g->k_sp;
        /* row (f, k) holds [y][n]; the batch is contiguous */
        gather_row(col + (r - r0) * width, j->ktaps + j->ktap_at[k], g->out_sp, g->N,
                   j->L + f * j->lsC, 1, j->loff);
        if (rm) {
          const float *src = j->Rin + f * j->rsI + j->roff[k];
          for (int64_t o = 0; o < O; o++) rm[(r - r0) * O + o] = src[o * j->rsO];
        }
      }
      const float *b = rm ? rm : j->B + r0 * j->ldb;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)width, (int)O, (int)(r1 - r0), 1.0f,
                  col, (int)width, b, rm ? (int)O : (int)j->ldb, c == c0 ? 0.0f : 1.0f, acc,
                  (int)O);
    }
  }
done:
  free(col);
  free(rm);
}

static void conv_kgrad(conv_job *j) {
  const jx_conv_geom *g = j->g;
  int64_t width = g->out_sp * g->N;
  j->partial = malloc(sizeof(float) * (size_t)(j->groups * width * g->O));
  if (!j->partial) {
    j->failed = 1;
    return;
  }
  jx_parallel_for(j->groups, 1, kgrad_groups, j);
  if (!j->failed)
    for (int64_t y = 0; y < g->out_sp; y++)
      for (int64_t n = 0; n < g->N; n++)
        for (int64_t o = 0; o < g->O; o++) {
          int64_t at = (y * g->N + n) * g->O + o, step = width * g->O;
          float s = j->partial[at];
          for (int64_t grp = 1; grp < j->groups; grp++) s += j->partial[at + grp * step];
          j->out[n * j->osN + o * j->osO + j->yoff[y]] = s;
        }
  free(j->partial);
}

/* ---- columns layout ---- */

static void columns_chunks(void *ctx, int64_t begin, int64_t end) {
  conv_job *j = ctx;
  const jx_conv_geom *g = j->g;
  int64_t ck = j->ck, O = g->O;
  float *col = malloc(sizeof(float) * (size_t)(j->chunk * ck));
  float *res = malloc(sizeof(float) * (size_t)(j->chunk * O));
  if (!col || !res) {
    j->failed = 1;
    goto done;
  }
  for (int64_t c = begin; c < end; c++) {
    int64_t r0 = c * j->chunk, r1 = chunk_end(j, r0), cols = r1 - r0;
    im2col_rows(j, r0, r1, col, j->lsC);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)O, (int)cols, (int)ck, 1.0f, j->R,
                (int)ck, col, (int)ck, 0.0f, res, (int)cols);
    for (int64_t oc = 0; oc < O; oc++)
      for (int64_t r = r0; r < r1; r++)
        j->out[(r / g->out_sp) * j->osN + oc * j->osO + j->yoff[r % g->out_sp]] =
            res[oc * cols + r - r0];
  }
done:
  free(col);
  free(res);
}

/* ---- setup ---- */

/* ld when the rows (a, b), a < na and b < nb, of a matrix at
 * a * sa + offs[b] are uniformly ld apart (offs[b] = b * ld and, when
 * na > 1, sa = nb * ld) with ld >= least and ld an int; 0 otherwise. */
static int64_t uniform_ld(int64_t sa, int64_t na, const int64_t *offs, int64_t nb, int64_t least) {
  int64_t ld = nb > 1 ? offs[1] : na > 1 ? sa : least;
  if (ld < least || !fits_int(ld) || (na > 1 && sa != nb * ld)) return 0;
  for (int64_t b = 0; b < nb; b++)
    if (offs[b] != b * ld) return 0;
  return ld;
}

/* The taps by output position (tap_at/taps) and by kernel position
 * (ktap_at/ktaps, for the kernel gradient); NULL tables when out of memory. */
static int build_taps(const jx_conv_geom *g, int by_kernel, int64_t *tap_at, int64_t **taps,
                      int64_t *ktap_at, int64_t **ktaps) {
  int64_t *kpos = malloc(sizeof(int64_t) * (size_t)(2 * g->k_sp)), *lpos = kpos + g->k_sp;
  if (!kpos) return 0;
  int64_t ntaps = 0;
  for (int64_t y = 0; y < g->out_sp; y++) {
    tap_at[y] = ntaps;
    ntaps += 1 + 2 * jx_conv_taps(g, y, kpos, lpos);
  }
  *taps = malloc(sizeof(int64_t) * (size_t)ntaps);
  if (by_kernel) *ktaps = malloc(sizeof(int64_t) * (size_t)(ntaps - g->out_sp + g->k_sp));
  int ok = *taps && (!by_kernel || *ktaps);
  if (ok && by_kernel) { /* counts first: entry k starts after the pairs of k' < k */
    memset(ktap_at, 0, sizeof(int64_t) * (size_t)g->k_sp);
    for (int64_t y = 0; y < g->out_sp; y++) {
      int64_t nt = jx_conv_taps(g, y, kpos, lpos);
      for (int64_t i = 0; i < nt; i++) ktap_at[kpos[i]]++;
    }
    for (int64_t k = 0, at = 0; k < g->k_sp; k++) {
      int64_t cnt = ktap_at[k];
      ktap_at[k] = at;
      (*ktaps)[at] = 0;
      at += 1 + 2 * cnt;
    }
  }
  for (int64_t y = 0; ok && y < g->out_sp; y++) {
    int64_t *t = *taps + tap_at[y], nt = jx_conv_taps(g, y, kpos, lpos);
    t[0] = nt;
    for (int64_t i = 0; i < nt; i++) {
      t[1 + 2 * i] = kpos[i], t[2 + 2 * i] = lpos[i];
      if (by_kernel) {
        int64_t *kt = *ktaps + ktap_at[kpos[i]];
        kt[1 + 2 * kt[0]] = y, kt[2 + 2 * kt[0]] = lpos[i];
        kt[0]++;
      }
    }
  }
  free(kpos);
  return ok;
}

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
  int64_t ls[JX_MAX_RANK], rs[JX_MAX_RANK], os[JX_MAX_RANK];
  jx_shape_strides(in[0].shape, ls);
  jx_shape_strides(in[1].shape, rs);
  jx_shape_strides(out->shape, os);
  conv_job j = {.g = &g,
                .L = in[0].data,
                .Rin = in[1].data,
                .out = out->data,
                .lsN = ls[lspec->v[0]],
                .lsC = ls[lspec->v[1]],
                .rsO = rs[rspec->v[0]],
                .rsI = rs[rspec->v[1]],
                .osN = os[ospec->v[0]],
                .osO = os[ospec->v[1]],
                .ck = ck};
  enum { ROWS, KGRAD, COLUMNS } how = j.lsC == 1 || g.C == 1 ? ROWS : j.lsN == 1 ? KGRAD : COLUMNS;
  /* every sgemm dimension and leading dimension must fit an int */
  int64_t width = g.out_sp * g.N;
  if (!fits_int(g.O) || !fits_int(ck) || !fits_int(width)) return 0;

  size_t ntab = (size_t)(g.in_sp + 2 * g.k_sp + 2 * g.out_sp);
  int64_t *tab = malloc(sizeof(int64_t) * ntab), *taps = NULL, *ktaps = NULL;
  float *packed = NULL;
  int ok = tab != NULL;
  if (ok) {
    int64_t *loff = tab, *roff = loff + g.in_sp, *yoff = roff + g.k_sp, *tap_at = yoff + g.out_sp,
            *ktap_at = tap_at + g.out_sp;
    spatial_offsets(&in[0].shape, lspec, g.nsp, g.in_sp, loff);
    spatial_offsets(&in[1].shape, rspec, g.nsp, g.k_sp, roff);
    spatial_offsets(&out->shape, ospec, g.nsp, g.out_sp, yoff);
    j.loff = loff, j.roff = roff, j.yoff = yoff, j.tap_at = tap_at, j.ktap_at = ktap_at;
    ok = build_taps(&g, how == KGRAD, tap_at, &taps, ktap_at, &ktaps);
    j.taps = taps, j.ktaps = ktaps;
  }
  if (ok) jx_blas_own_threads();
  const float *Rin = in[1].data;
  int64_t nchunks = 0;
  if (ok && how == ROWS) {
    /* Rk[(k, c)][o]: the rhs itself when it is HWIO-like, else packed */
    int64_t ld = g.C > 1 ? j.rsI : g.k_sp > 1 ? j.roff[1] : g.O;
    int direct = (j.rsO == 1 || g.O == 1) && ld >= g.O && fits_int(ld);
    for (int64_t k = 0; direct && k < g.k_sp; k++) direct = j.roff[k] == k * g.C * ld;
    if (direct) {
      j.B = Rin, j.ldb = ld;
    } else {
      packed = malloc(sizeof(float) * (size_t)(ck * g.O));
      ok = packed != NULL;
      for (int64_t k = 0; ok && k < g.k_sp; k++)
        for (int64_t c = 0; c < g.C; c++)
          for (int64_t o = 0; o < g.O; o++)
            packed[(k * g.C + c) * g.O + o] = Rin[o * j.rsO + c * j.rsI + j.roff[k]];
      j.B = packed, j.ldb = g.O;
    }
    /* rows (n, y) of an NHWC-like out are uniformly ldo apart */
    j.ldo = j.osO == 1 || g.O == 1 ? uniform_ld(j.osN, g.N, j.yoff, g.out_sp, g.O) : 0;
    j.out_rows = j.ldo ? out->data : NULL;
    j.rows = g.N * g.out_sp;
    j.chunk = chunk_rows(j.rows, ck);
    nchunks = (j.rows + j.chunk - 1) / j.chunk;
    if (ok) jx_parallel_for(nchunks, 1, rows_chunks, &j);
  } else if (ok && how == KGRAD) {
    /* Rm[(c, k)][o]: the rhs itself when its features are outermost and its
     * out features contiguous, else packed per chunk */
    int64_t ld = j.rsO == 1 || g.O == 1 ? uniform_ld(j.rsI, g.C, j.roff, g.k_sp, g.O) : 0;
    if (ld) j.B = Rin, j.ldb = ld;
    j.rows = g.C * g.k_sp;
    j.chunk = chunk_rows(j.rows, width);
    j.chunks = (j.rows + j.chunk - 1) / j.chunk;
    j.groups = j.chunks < MAX_GROUPS ? j.chunks : MAX_GROUPS;
    conv_kgrad(&j);
  } else if (ok) {
    /* R[o][(k, c)], read along the rhs's shortest stride */
    packed = malloc(sizeof(float) * (size_t)(ck * g.O));
    ok = packed != NULL;
    if (ok && j.rsO < j.rsI)
      for (int64_t k = 0; k < g.k_sp; k++)
        for (int64_t c = 0; c < g.C; c++)
          for (int64_t o = 0; o < g.O; o++)
            packed[(o * g.k_sp + k) * g.C + c] = Rin[o * j.rsO + c * j.rsI + j.roff[k]];
    else
      for (int64_t o = 0; ok && o < g.O; o++)
        for (int64_t k = 0; k < g.k_sp; k++)
          for (int64_t c = 0; c < g.C; c++)
            packed[(o * g.k_sp + k) * g.C + c] = Rin[o * j.rsO + c * j.rsI + j.roff[k]];
    j.R = packed;
    j.rows = g.N * g.out_sp;
    j.chunk = chunk_rows(j.rows, ck);
    nchunks = (j.rows + j.chunk - 1) / j.chunk;
    if (ok) jx_parallel_for(nchunks, 1, columns_chunks, &j);
  }
  ok = ok && !j.failed;
  free(tab);
  free(taps);
  free(ktaps);
  free(packed);
  return ok;
}
#endif
