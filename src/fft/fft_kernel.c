/* FFTW3 (fftw3 and fftw3f) runs the transforms: a maintained Debian
 * package (libfftw3-dev) with SIMD codelets for every size, rather than a
 * vendored C copy of PocketFFT (docs/fft.md).
 *
 * Plans of at least PARALLEL_MIN elements are made with FFTW_MEASURE (FFTW
 * times candidate algorithms and keeps the fastest) on scratch arrays, so
 * that measuring never touches the caller's data, within PLAN_SECONDS;
 * smaller ones, and all with JX_FFT_MEASURE=0, with FFTW_ESTIMATE. What
 * measuring finds (FFTW's wisdom) is kept in the cache directory, so a
 * later process makes the same plans without measuring. A plan is cached
 * per (type, precision, lengths, batch, alignment) for the process.
 *
 * Arrays on FFTW's SIMD alignment (jx's buffers are 64-byte aligned) get a
 * plan for aligned arrays; any other get one made with FFTW_UNALIGNED,
 * which runs on any address but without the aligned SIMD codelets. Plans
 * run through FFTW's new-array execute functions, which are thread-safe;
 * FFTW's planner is not, so planning holds a lock. Each plan does all of a
 * call's batch at once (FFTW's guru interface, howmany). c2r transforms
 * overwrite their input, so IRFFT runs on an aligned copy, which carries
 * the inverse's 1 / size (IFFT's is a pass over its output).
 *
 * Transforms of at least PARALLEL_MIN elements are planned for up to
 * jx_pool_threads() threads (FFTW's measuring decides how many pay), and
 * FFTW runs its parallel loops on jx's pool (fftw_threads_set_callback), not
 * on threads of its own. A 2-D f32 real transform of at least TWO_PASS_MIN
 * elements an image runs instead as blocks of rows and then blocks of
 * columns, each block a one-thread plan, split over the pool
 * (rfft2_two_pass). */
#include "fft_kernel.h"

#include <complex.h>
#include <fftw3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/cache_dir.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../base/threadpool.h"

/* Elements per call from which a plan uses the pool and is measured: below
 * it FFTW's estimate is within microseconds of the measured plan, and
 * measuring would cost more than thousands of calls save. */
enum { PARALLEL_MIN = 1 << 16 };
/* The most one plan may spend measuring; FFTW keeps the best it timed so far.
 * A 2^20-point transform measures for about this long. */
#define PLAN_SECONDS 2.0
/* Elements per image from which a 2-D f32 real transform runs in two
 * passes (rfft2_two_pass) rather than as one FFTW 2-D plan. On one thread
 * the two take about the same CPU time (medians of 31-41 alternating calls
 * in one process: 0.94-1.06x the 2-D plan's at 1024^2, as FFTW's measuring
 * picks, 1.00x at 2048^2 and 512^2, 1.3x at 256^2), and the two passes split
 * over the pool's threads by blocks fixed by the shape, so every core runs
 * them with the same bits. In f64 they took 1.08-1.10x at 1024^2, so f64
 * keeps the 2-D plan. */
enum { TWO_PASS_MIN = 1 << 20 };

/* How a cached plan lays out its arrays: the caller's whole transform
 * (row-major, batched), or a piece of the two-pass 2-D real transform:
 * a block of ROW_BLOCK rows' r2c, or the c2c of a block of columns
 * interleaved in a scratch (column j of the block at stride `batch`). */
typedef enum { LAYOUT_WHOLE, LAYOUT_ROWS, LAYOUT_COLUMNS } plan_layout;

typedef struct plan_entry {
  jx_fft_type type;
  plan_layout layout;
  int dbl, k, aligned;
  int64_t n[3], batch;
  void *plan; /* fftw_plan or fftwf_plan */
  struct plan_entry *next;
} plan_entry;

static plan_entry *plans;
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

/* FFTW's parallel loop on jx's pool: work(jobdata + i * elsize) for each job */
typedef struct {
  void *(*work)(char *);
  char *jobdata;
  size_t elsize;
} fftw_loop;
static void run_jobs(void *ctx, int64_t begin, int64_t end) {
  const fftw_loop *l = ctx;
  for (int64_t i = begin; i < end; i++) l->work(l->jobdata + (size_t)i * l->elsize);
}
static void pool_loop(void *(*work)(char *), char *jobdata, size_t elsize, int njobs, void *data) {
  (void)data;
  fftw_loop l = {work, jobdata, elsize};
  jx_parallel_for(njobs, 1, run_jobs, &l);
}

/* FFTW's wisdom (what its measuring found) for one precision: a file in
 * the cache directory, read before the first plan and written again after
 * each measured plan, so that another process plans what was measured
 * before without measuring it again. 0 when there is no cache directory. */
static int wisdom_path(int dbl, char *out, size_t n) {
  char dir[1024];
  if (!jx_kernel_cache_dir(dir, sizeof dir)) return 0;
  return snprintf(out, n, "%s/fftw3-wisdom.%s", dir, dbl ? "f64" : "f32") < (int)n;
}

/* Writes the precision's wisdom through a temporary file and a rename, so
 * that a process reading it never sees half of it. A failure only costs a
 * later process the measuring. */
static void save_wisdom(int dbl) {
  char path[1100], tmp[1200];
  if (!wisdom_path(dbl, path, sizeof path)) return;
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  int ok = dbl ? fftw_export_wisdom_to_filename(tmp) : fftwf_export_wisdom_to_filename(tmp);
  if (!ok || rename(tmp, path) != 0) remove(tmp);
}

static unsigned plan_flags; /* FFTW_MEASURE, or FFTW_ESTIMATE with JX_FFT_MEASURE=0 */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_fftw(void) {
  fftw_init_threads();
  fftwf_init_threads();
  fftw_threads_set_callback(pool_loop, NULL);
  fftwf_threads_set_callback(pool_loop, NULL);
  fftw_set_timelimit(PLAN_SECONDS);
  fftwf_set_timelimit(PLAN_SECONDS);
  plan_flags = jx_env_flag("JX_FFT_MEASURE") ? FFTW_MEASURE : FFTW_ESTIMATE;
  char path[1100];
  if (plan_flags == FFTW_MEASURE && wisdom_path(1, path, sizeof path))
    fftw_import_wisdom_from_filename(path); /* none yet, or unreadable: measure */
  if (plan_flags == FFTW_MEASURE && wisdom_path(0, path, sizeof path))
    fftwf_import_wisdom_from_filename(path);
}

/* The guru dims of k trailing dims with row-major strides, and the batch's. */
static void guru_dims(jx_fft_type t, int k, const int64_t *n, fftw_iodim *dims, int64_t *in_dist,
                      int64_t *out_dist) {
  int64_t is = 1, os = 1;
  for (int d = k - 1; d >= 0; d--) {
    int64_t in_len = n[d], out_len = n[d];
    if (d == k - 1 && t == JX_FFT_RFFT) out_len = n[d] / 2 + 1;
    if (d == k - 1 && t == JX_FFT_IRFFT) in_len = n[d] / 2 + 1;
    dims[d] = (fftw_iodim){(int)n[d], (int)is, (int)os};
    is *= in_len;
    os *= out_len;
  }
  *in_dist = is;
  *out_dist = os;
}

/* Bytes of one real and one complex element of the precision. */
static size_t real_size(int dbl) { return dbl ? sizeof(double) : sizeof(float); }
static size_t in_size(jx_fft_type t, int dbl) {
  return t == JX_FFT_RFFT ? real_size(dbl) : 2 * real_size(dbl);
}
static size_t out_size(jx_fft_type t, int dbl) {
  return t == JX_FFT_IRFFT ? real_size(dbl) : 2 * real_size(dbl);
}

static void *plan_on(jx_fft_type t, int dbl, int k, const fftw_iodim *dims, fftw_iodim many,
                     void *in, void *out, unsigned flags) {
  int sign = t == JX_FFT_IFFT ? FFTW_BACKWARD : FFTW_FORWARD;
  if (dbl) {
    switch (t) {
    case JX_FFT_RFFT: return fftw_plan_guru_dft_r2c(k, dims, 1, &many, in, out, flags);
    case JX_FFT_IRFFT: return fftw_plan_guru_dft_c2r(k, dims, 1, &many, in, out, flags);
    default: return fftw_plan_guru_dft(k, dims, 1, &many, in, out, sign, flags);
    }
  }
  fftwf_iodim fdims[3], fmany = {many.n, many.is, many.os};
  for (int d = 0; d < k; d++) fdims[d] = (fftwf_iodim){dims[d].n, dims[d].is, dims[d].os};
  switch (t) {
  case JX_FFT_RFFT: return fftwf_plan_guru_dft_r2c(k, fdims, 1, &fmany, in, out, flags);
  case JX_FFT_IRFFT: return fftwf_plan_guru_dft_c2r(k, fdims, 1, &fmany, in, out, flags);
  default: return fftwf_plan_guru_dft(k, fdims, 1, &fmany, in, out, sign, flags);
  }
}

/* A plan for the transform laid out as `layout`, for arrays of FFTW's
 * alignment (aligned) or of any, made on scratch arrays (measuring writes
 * them; the + 1 keeps a zero-sized transform's allocation real); NULL when
 * FFTW cannot make one. The pieces of the two-pass transform run one to a
 * thread of jx's pool, so they are planned for one thread. */
static void *make_plan(jx_fft_type t, plan_layout layout, int dbl, int k, const int64_t *n,
                       int64_t batch, int aligned) {
  fftw_iodim dims[3];
  int64_t in_dist, out_dist;
  guru_dims(t, k, n, dims, &in_dist, &out_dist);
  fftw_iodim many = {(int)batch, (int)in_dist, (int)out_dist};
  if (layout == LAYOUT_COLUMNS) { /* in place, column j at j, j + batch, ... */
    dims[0] = (fftw_iodim){(int)n[0], (int)batch, (int)batch};
    many = (fftw_iodim){(int)batch, 1, 1};
  }
  int64_t elems = batch * (in_dist > out_dist ? in_dist : out_dist);
  int big = elems >= PARALLEL_MIN || layout != LAYOUT_WHOLE;
  int nthreads = layout == LAYOUT_WHOLE && big ? jx_pool_threads() : 1;
  fftw_plan_with_nthreads(nthreads);
  fftwf_plan_with_nthreads(nthreads);
  unsigned flags = (big ? plan_flags : FFTW_ESTIMATE) | (aligned ? 0 : FFTW_UNALIGNED);
  void *in = fftw_malloc((size_t)(batch * in_dist) * in_size(t, dbl) + 1);
  void *out = layout == LAYOUT_COLUMNS
                  ? in
                  : fftw_malloc((size_t)(batch * out_dist) * out_size(t, dbl) + 1);
  void *plan = in && out ? plan_on(t, dbl, k, dims, many, in, out, flags) : NULL;
  fftw_free(in);
  if (out != in) fftw_free(out);
  if (plan && big && plan_flags == FFTW_MEASURE) save_wisdom(dbl);
  return plan;
}

static void *plan_for(jx_fft_type t, plan_layout layout, int dbl, int k, const int64_t *n,
                      int64_t batch, int aligned) {
  pthread_once(&init_once, init_fftw);
  pthread_mutex_lock(&plans_lock);
  plan_entry *e = plans;
  for (; e; e = e->next)
    if (e->type == t && e->layout == layout && e->dbl == dbl && e->k == k && e->batch == batch &&
        e->aligned == aligned && memcmp(e->n, n, sizeof *n * (size_t)k) == 0)
      break;
  if (!e && (e = calloc(1, sizeof *e))) {
    e->plan = make_plan(t, layout, dbl, k, n, batch, aligned);
    if (!e->plan) {
      free(e);
      e = NULL;
    } else {
      e->type = t, e->layout = layout, e->dbl = dbl, e->k = k, e->batch = batch;
      e->aligned = aligned;
      memcpy(e->n, n, sizeof *n * (size_t)k);
      e->next = plans;
      plans = e;
    }
  }
  pthread_mutex_unlock(&plans_lock);
  return e ? e->plan : NULL;
}

/* The 2-D real transform in two passes over jx's pool: the r2c of each row,
 * in blocks of ROW_BLOCK rows, then the c2c of each column of the half
 * spectrum, in blocks of COL_BLOCK columns copied into a scratch where the
 * block's columns interleave (each row of the block one contiguous run), so
 * that FFTW's SIMD codelets run across the block's columns. The blocks are
 * fixed by the shape, never by the thread count, and each block's plan is
 * the same whichever thread runs it: the bits do not depend on the threads.
 * An even ROW_BLOCK keeps each row block on the caller's alignment (a
 * c64 row of 513 numbers is only 8-byte aligned). */
enum { ROW_BLOCK = 16, COL_BLOCK = 32 };

typedef struct {
  int dbl, aligned;
  int64_t n0, n1, half, batch; /* half = n1 / 2 + 1 */
  const char *in;
  char *out;
  void *row_plan[2], *col_plan[2]; /* a whole block's, the last block's */
  int failed;
} rfft2_job;

static void rfft2_rows(void *ctx, int64_t begin, int64_t end) {
  rfft2_job *j = ctx;
  size_t rs = real_size(j->dbl);
  for (int64_t b = begin; b < end; b++) {
    int64_t r0 = b * ROW_BLOCK, rows = j->batch * j->n0 - r0;
    if (rows > ROW_BLOCK) rows = ROW_BLOCK;
    void *plan = j->row_plan[rows < ROW_BLOCK];
    const void *src = j->in + (size_t)(r0 * j->n1) * rs;
    void *dst = j->out + (size_t)(r0 * j->half) * 2 * rs;
    if (j->dbl)
      fftw_execute_dft_r2c(plan, (double *)src, dst);
    else
      fftwf_execute_dft_r2c(plan, (float *)src, dst);
  }
}

static void rfft2_columns(void *ctx, int64_t begin, int64_t end) {
  rfft2_job *j = ctx;
  size_t cs = 2 * real_size(j->dbl), row = (size_t)j->half * cs;
  int64_t blocks = (j->half + COL_BLOCK - 1) / COL_BLOCK;
  char *buf = fftw_malloc((size_t)(j->n0 * COL_BLOCK) * cs);
  if (!buf) {
    j->failed = 1;
    return;
  }
  for (int64_t b = begin; b < end; b++) {
    int64_t c0 = b % blocks * COL_BLOCK, cols = j->half - c0;
    if (cols > COL_BLOCK) cols = COL_BLOCK;
    char *image = j->out + (size_t)(b / blocks * j->n0) * row + (size_t)c0 * cs;
    void *plan = j->col_plan[cols < COL_BLOCK];
    size_t run = (size_t)cols * cs;
    for (int64_t r = 0; r < j->n0; r++) memcpy(buf + (size_t)r * run, image + (size_t)r * row, run);
    if (j->dbl)
      fftw_execute_dft(plan, (fftw_complex *)buf, (fftw_complex *)buf);
    else
      fftwf_execute_dft(plan, (fftwf_complex *)buf, (fftwf_complex *)buf);
    for (int64_t r = 0; r < j->n0; r++) memcpy(image + (size_t)r * row, buf + (size_t)r * run, run);
  }
  fftw_free(buf);
}

static int rfft2_two_pass(int dbl, const int64_t *n, int64_t batch, const void *in, void *out,
                          int aligned) {
  rfft2_job j = {dbl, aligned, n[0], n[1], n[1] / 2 + 1, batch, in, out, {0}, {0}, 0};
  /* planned here, on the calling thread, before the blocks run */
  int64_t rows = batch * n[0], last_rows = rows % ROW_BLOCK, last_cols = j.half % COL_BLOCK;
  j.row_plan[0] = plan_for(JX_FFT_RFFT, LAYOUT_ROWS, dbl, 1, &n[1], ROW_BLOCK, aligned);
  j.row_plan[1] = last_rows ? plan_for(JX_FFT_RFFT, LAYOUT_ROWS, dbl, 1, &n[1], last_rows, aligned)
                            : j.row_plan[0];
  j.col_plan[0] = plan_for(JX_FFT_FFT, LAYOUT_COLUMNS, dbl, 1, &n[0], COL_BLOCK, 1);
  j.col_plan[1] =
      last_cols ? plan_for(JX_FFT_FFT, LAYOUT_COLUMNS, dbl, 1, &n[0], last_cols, 1) : j.col_plan[0];
  j.failed = !j.row_plan[0] || !j.row_plan[1] || !j.col_plan[0] || !j.col_plan[1];
  if (!j.failed) jx_parallel_for((batch * n[0] + ROW_BLOCK - 1) / ROW_BLOCK, 1, rfft2_rows, &j);
  if (!j.failed)
    jx_parallel_for(batch * ((j.half + COL_BLOCK - 1) / COL_BLOCK), 1, rfft2_columns, &j);
  if (j.failed) jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: FFTW could not plan the transform");
  return !j.failed;
}

/* dst[i] = src[i] * s for m floats of the precision, over jx's pool: the
 * inverses' normalization, one pass over memory split between the cores. */
typedef struct {
  int dbl;
  const void *src;
  void *dst;
  double s;
} scale_job;
static void scale_range(void *ctx, int64_t begin, int64_t end) {
  const scale_job *j = ctx;
  if (j->dbl) {
    const double *x = j->src;
    double *y = j->dst;
    for (int64_t i = begin; i < end; i++) y[i] = x[i] * j->s;
  } else {
    const float *x = j->src;
    float *y = j->dst, s = (float)j->s;
    for (int64_t i = begin; i < end; i++) y[i] = x[i] * s;
  }
}
static void scale(int dbl, const void *src, void *dst, int64_t m, double s) {
  scale_job j = {dbl, src, dst, s};
  jx_parallel_for(m, PARALLEL_MIN, scale_range, &j);
}

int jx_fft_run(jx_fft_type t, int dbl, int k, const int64_t *n, int64_t batch, const void *in,
               void *out) {
  int64_t total = 1, in_elems = batch;
  for (int d = 0; d < k; d++) {
    total *= n[d];
    in_elems *= (d == k - 1 && t == JX_FFT_IRFFT) ? n[d] / 2 + 1 : n[d];
  }
  if (batch == 0) return 1;
  /* lax.fft's inverses are normalized by 1 / total: IRFFT's input is
   * copied anyway (c2r destroys its input), so the copy scales it, and the
   * transform of the scaled spectrum is the scaled image (the DFT is
   * linear) without a pass over the output; IFFT scales its output */
  double inv = (float)(1.0 / (double)total);
  if (dbl) inv = 1.0 / (double)total;
  void *src = (void *)in, *copy = NULL;
  if (t == JX_FFT_IRFFT) {
    size_t bytes = (size_t)in_elems * in_size(t, dbl);
    if (!(copy = fftw_malloc(bytes ? bytes : 1))) {
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: out of memory for the inverse real transform");
      return 0;
    }
    scale(dbl, in, copy, 2 * in_elems, inv);
    src = copy;
  }
  int aligned = dbl ? fftw_alignment_of(src) == 0 && fftw_alignment_of(out) == 0
                    : fftwf_alignment_of(src) == 0 && fftwf_alignment_of(out) == 0;
  if (t == JX_FFT_RFFT && !dbl && k == 2 && total >= TWO_PASS_MIN)
    return rfft2_two_pass(dbl, n, batch, in, out, aligned);
  void *plan = plan_for(t, LAYOUT_WHOLE, dbl, k, n, batch, aligned);
  if (!plan) {
    fftw_free(copy);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: FFTW could not plan the transform");
    return 0;
  }
  if (dbl) {
    switch (t) {
    case JX_FFT_RFFT: fftw_execute_dft_r2c(plan, src, out); break;
    case JX_FFT_IRFFT: fftw_execute_dft_c2r(plan, src, out); break;
    default: fftw_execute_dft(plan, src, out);
    }
  } else {
    switch (t) {
    case JX_FFT_RFFT: fftwf_execute_dft_r2c(plan, src, out); break;
    case JX_FFT_IRFFT: fftwf_execute_dft_c2r(plan, src, out); break;
    default: fftwf_execute_dft(plan, src, out);
    }
  }
  fftw_free(copy);
  if (t == JX_FFT_IFFT) scale(dbl, out, out, 2 * batch * total, inv);
  return 1;
}
