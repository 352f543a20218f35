/* reduce_window's fast path (see window_kernels.h): windows wholly inside
 * an f32/f64 operand. The output is walked as rows along its last dim; for
 * each row the window's taps are folded in the reference's order, each tap
 * one strided pass over the row (for NHWC pooling a contiguous run of
 * channels), so the loops vectorize and no element is loaded through a
 * dtype switch. Rows are independent: large outputs split them over the
 * pool, with the same bits for any thread count. */
#include <math.h>
#include <stdlib.h>

#include "window_kernels.h"
#include "../base/threadpool.h"

enum {
  MAX_TAPS = 1 << 12,      /* larger windows stay on the reference */
  SUM_BLOCK = 256,         /* f64 accumulators of a sum, on the stack */
  PARALLEL_WORK = 1 << 16, /* taps x outputs below which one thread runs it */
  UNIT_WORK = 1 << 14      /* the least taps x outputs handed to one thread */
};

typedef struct {
  jx_window_op op;
  int rank, f64;
  const char *in;
  char *out;
  int64_t ntap, run, step; /* taps; row length; the input stride along a row */
  int64_t odims[JX_MAX_RANK], ostep[JX_MAX_RANK];
  const int64_t *tap; /* element offsets of the window's taps, in window order */
} window_job;

/* Max/min with the reference's rule: a NaN accumulator stays, a NaN element
 * replaces a number, and otherwise only a strictly larger (smaller) element
 * does (so of equal elements, -0.0 and 0.0 included, the first stays). */
#define FOLD_ROWS(NAME, T)                                                                         \
  static void NAME(const window_job *j, T *o, const T *x) {                                        \
    T init = j->op == JX_WINDOW_MAX ? (T)-INFINITY : (T)INFINITY;                                  \
    for (int64_t i = 0; i < j->run; i++) o[i] = init;                                              \
    for (int64_t k = 0; k < j->ntap; k++) {                                                        \
      const T *t = x + j->tap[k];                                                                  \
      if (j->op == JX_WINDOW_MAX)                                                                  \
        for (int64_t i = 0; i < j->run; i++) {                                                     \
          T v = t[i * j->step], a = o[i];                                                          \
          o[i] = a != a ? a : (v != v || v > a) ? v : a;                                           \
        }                                                                                          \
      else                                                                                         \
        for (int64_t i = 0; i < j->run; i++) {                                                     \
          T v = t[i * j->step], a = o[i];                                                          \
          o[i] = a != a ? a : (v != v || v < a) ? v : a;                                           \
        }                                                                                          \
    }                                                                                              \
  }                                                                                                \
  /* Sums: f64 accumulators, in blocks, rounded once into the row. */                              \
  static void NAME##_sum(const window_job *j, T *o, const T *x) {                                  \
    double acc[SUM_BLOCK];                                                                         \
    for (int64_t i0 = 0; i0 < j->run; i0 += SUM_BLOCK) {                                           \
      int64_t n = j->run - i0 < SUM_BLOCK ? j->run - i0 : SUM_BLOCK;                               \
      for (int64_t i = 0; i < n; i++) acc[i] = 0;                                                  \
      for (int64_t k = 0; k < j->ntap; k++) {                                                      \
        const T *t = x + j->tap[k] + i0 * j->step;                                                 \
        for (int64_t i = 0; i < n; i++) acc[i] += (double)t[i * j->step];                          \
      }                                                                                            \
      for (int64_t i = 0; i < n; i++) o[i0 + i] = (T)acc[i];                                       \
    }                                                                                              \
  }
FOLD_ROWS(rows_f32, float)
FOLD_ROWS(rows_f64, double)

static void window_rows(void *ctx, int64_t begin, int64_t end) {
  const window_job *j = ctx;
  int last = j->rank - 1;
  size_t es = j->f64 ? sizeof(double) : sizeof(float);
  int64_t idx[JX_MAX_RANK] = {0}, base = 0;
  for (int64_t q = begin, d = last - 1; d >= 0; d--) { /* the odometer starts at row `begin` */
    idx[d] = q % j->odims[d];
    q /= j->odims[d];
    base += idx[d] * j->ostep[d];
  }
  for (int64_t row = begin; row < end; row++) {
    const char *x = j->in + (size_t)base * es;
    char *o = j->out + (size_t)(row * j->run) * es;
    if (j->f64)
      (j->op == JX_WINDOW_SUM ? rows_f64_sum : rows_f64)(j, (double *)(void *)o,
                                                         (const double *)(const void *)x);
    else
      (j->op == JX_WINDOW_SUM ? rows_f32_sum : rows_f32)(j, (float *)(void *)o,
                                                         (const float *)(const void *)x);
    for (int d = last - 1; d >= 0; d--) { /* the next row */
      base += j->ostep[d];
      if (++idx[d] < j->odims[d]) break;
      base -= idx[d] * j->ostep[d];
      idx[d] = 0;
    }
  }
}

int jx_reduce_window_fast(jx_window_op op, const jx_window_params *w, const jx_tensor *in,
                          jx_tensor *out) {
  int r = in->shape.rank;
  if ((in->dtype != JX_F32 && in->dtype != JX_F64) || r == 0) return 0;
  int64_t ntap = 1, nout = jx_shape_numel(out->shape), istr[JX_MAX_RANK];
  for (int d = 0; d < r; d++) {
    if (w->lo[d] != 0 || w->hi[d] != 0 || w->bdil[d] != 1) return 0;
    ntap *= w->win[d];
    if (ntap > MAX_TAPS) return 0;
  }
  if (nout == 0) return 1;
  jx_shape_strides(in->shape, istr);
  int64_t tap[MAX_TAPS], widx[JX_MAX_RANK] = {0};
  for (int64_t k = 0; k < ntap; k++) { /* window order: row-major over the window's dims */
    tap[k] = 0;
    for (int d = 0; d < r; d++) tap[k] += widx[d] * w->wdil[d] * istr[d];
    for (int d = r - 1; d >= 0; d--) {
      if (++widx[d] < w->win[d]) break;
      widx[d] = 0;
    }
  }
  window_job j = {.op = op,
                  .rank = r,
                  .f64 = in->dtype == JX_F64,
                  .in = in->data,
                  .out = out->data,
                  .ntap = ntap,
                  .run = out->shape.dims[r - 1],
                  .step = w->stride[r - 1] * istr[r - 1],
                  .tap = tap};
  for (int d = 0; d < r; d++) {
    j.odims[d] = out->shape.dims[d];
    j.ostep[d] = w->stride[d] * istr[d];
  }
  int64_t rows = nout / j.run, row_work = j.run * ntap;
  if ((double)nout * (double)ntap < PARALLEL_WORK)
    window_rows(&j, 0, rows);
  else
    jx_parallel_for(rows, 1 + UNIT_WORK / row_work, window_rows, &j);
  return 1;
}
