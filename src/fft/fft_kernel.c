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
 * on threads of its own. A 2-D f32 real transform of at least COLUMNS_MIN
 * elements an image and an even width runs instead columns first, as c2c
 * transforms of pairs of real columns and then of pairs of rows, in blocks
 * of one-thread plans claimed by the pool's threads (rfft2_by_columns). */
#include "fft_kernel.h"

#include <complex.h>
#include <fftw3.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/cache_dir.h"
#include "../base/env.h"
#include "../base/error.h"
#include "../base/spin.h"
#include "../base/threadpool.h"

/* Elements per call from which a plan uses the pool and is measured: below
 * it FFTW's estimate is within microseconds of the measured plan, and
 * measuring would cost more than thousands of calls save. */
enum { PARALLEL_MIN = 1 << 16 };
/* The most one plan may spend measuring; FFTW keeps the best it timed so far.
 * A 2^20-point transform measures for about this long. */
#define PLAN_SECONDS 2.0
/* Elements per image from which a 2-D f32 real transform of an even width
 * runs columns first (rfft2_by_columns) rather than as one FFTW 2-D plan:
 * its passes split over the pool's threads by blocks fixed by the shape, so
 * every core runs them with the same bits, and on one thread they take
 * 0.83-0.88x the CPU time of the rows' r2c then the columns' c2c at 1024^2
 * and 0.88-0.90x at 2048^2 (medians of 31 alternating calls, each after a
 * 2^20-point transform has evicted the caches), where the rows-first
 * passes took 0.94-1.06x the 2-D plan's time at 1024^2 (1.00x at 2048^2
 * and 512^2, 1.3x at 256^2). In f64 the rows-first passes took 1.08-1.10x
 * the 2-D plan at 1024^2, so f64 keeps the 2-D plan, as do odd widths. */
enum { COLUMNS_MIN = 1 << 20 };

/* How a cached plan lays out its arrays: the caller's whole transform
 * (row-major, batched), or a piece of the columns-first 2-D real transform:
 * the out-of-place c2c of `batch` contiguous rows on one thread, or the
 * in-place c2c of a block of `batch` adjacent columns of an image whose
 * rows are `stride` complex numbers long. */
typedef enum { LAYOUT_WHOLE, LAYOUT_ROW, LAYOUT_COLUMNS } plan_layout;

typedef struct plan_entry {
  jx_fft_type type;
  plan_layout layout;
  int dbl, k, aligned;
  int64_t n[3], batch, stride;
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

/* A plan for the transform laid out as `layout` (stride: LAYOUT_COLUMNS's
 * row length), for arrays of FFTW's alignment (aligned) or of any, made on
 * scratch arrays (measuring writes them; the + 1 keeps a zero-sized
 * transform's allocation real); NULL when FFTW cannot make one. The pieces
 * of the columns-first transform run one to a thread of jx's pool, so they
 * are planned for one thread, and measured whatever their size. */
static void *make_plan(jx_fft_type t, plan_layout layout, int dbl, int k, const int64_t *n,
                       int64_t batch, int64_t stride, int aligned) {
  fftw_iodim dims[3];
  int64_t in_dist, out_dist;
  guru_dims(t, k, n, dims, &in_dist, &out_dist);
  fftw_iodim many = {(int)batch, (int)in_dist, (int)out_dist};
  size_t in_bytes = (size_t)(batch * in_dist) * in_size(t, dbl);
  size_t out_bytes = (size_t)(batch * out_dist) * out_size(t, dbl);
  if (layout == LAYOUT_COLUMNS) { /* in place, column j at j, j + stride, ... of n[0] rows */
    dims[0] = (fftw_iodim){(int)n[0], (int)stride, (int)stride};
    many = (fftw_iodim){(int)batch, 1, 1};
    in_bytes = (size_t)(n[0] * stride) * in_size(t, dbl);
  }
  int big =
      batch * (in_dist > out_dist ? in_dist : out_dist) >= PARALLEL_MIN || layout != LAYOUT_WHOLE;
  int nthreads = layout == LAYOUT_WHOLE && big ? jx_pool_threads() : 1;
  fftw_plan_with_nthreads(nthreads);
  fftwf_plan_with_nthreads(nthreads);
  unsigned flags = (big ? plan_flags : FFTW_ESTIMATE) | (aligned ? 0 : FFTW_UNALIGNED);
  void *in = fftw_malloc(in_bytes + 1);
  void *out = layout == LAYOUT_COLUMNS ? in : fftw_malloc(out_bytes + 1);
  void *plan = in && out ? plan_on(t, dbl, k, dims, many, in, out, flags) : NULL;
  fftw_free(in);
  if (out != in) fftw_free(out);
  if (plan && big && plan_flags == FFTW_MEASURE) save_wisdom(dbl);
  return plan;
}

static void *plan_for(jx_fft_type t, plan_layout layout, int dbl, int k, const int64_t *n,
                      int64_t batch, int64_t stride, int aligned) {
  pthread_once(&init_once, init_fftw);
  pthread_mutex_lock(&plans_lock);
  plan_entry *e = plans;
  for (; e; e = e->next)
    if (e->type == t && e->layout == layout && e->dbl == dbl && e->k == k && e->batch == batch &&
        e->stride == stride && e->aligned == aligned && memcmp(e->n, n, sizeof *n * (size_t)k) == 0)
      break;
  if (!e && (e = calloc(1, sizeof *e))) {
    e->plan = make_plan(t, layout, dbl, k, n, batch, stride, aligned);
    if (!e->plan) {
      free(e);
      e = NULL;
    } else {
      e->type = t, e->layout = layout, e->dbl = dbl, e->k = k, e->batch = batch;
      e->stride = stride, e->aligned = aligned;
      memcpy(e->n, n, sizeof *n * (size_t)k);
      e->next = plans;
      plans = e;
    }
  }
  pthread_mutex_unlock(&plans_lock);
  return e ? e->plan : NULL;
}

/* The 2-D f32 real transform of images of an even width n1, columns first
 * (rfft2_by_columns). Read as complex numbers, a row of n1 reals is n1 / 2
 * numbers, each two adjacent real columns 2j, 2j + 1 as z = x_2j + i x_2j+1.
 * The transform along the columns of z (FFTW's c2c, whose SIMD codelets
 * are faster than its real ones: Debian's single-precision FFTW has none
 * for the real transform's leaves) is Z = C_2j + i C_2j+1, where C_c is the
 * transform of the real column c, and the columns' symmetry
 * (C_c[-k] = conj C_c[k]) splits it again:
 *   C_2j[k]   = (Z[k] + conj Z[-k]) / 2,   C_2j+1[k] = (Z[k] - conj Z[-k]) / 2i.
 * Row k of the result is then the c2c along the row of C[k], and row -k the
 * conjugate of the same transform read backwards (the image is real), so
 * one c2c of length n1 gives the rows k and n0 - k of the half spectrum.
 * Three passes, one job of jx's pool, all in the output itself:
 *  1. each image row copied into the output's row (n1 / 2 of its n1 / 2 + 1
 *     numbers), in blocks of ROW_BLOCK rows: FFTW's column plans read the
 *     caller's rows of n1 floats, often a power of two apart, far slower
 *     than the output's odd stride;
 *  2. the in-place c2c of the n1 / 2 columns, in blocks of COL_BLOCK
 *     adjacent columns (FFTW copies a block's columns into a buffer of its
 *     own and back), the last block taking the columns left over;
 *  3. the row pairs (k, n0 - k), k = 0 .. n0 / 2, in blocks of PAIR_BLOCK:
 *     both rows split into a scratch, its c2c into a second scratch, and both
 *     rows written from it (the first and, for an even n0, the middle row
 *     pair with themselves).
 * The blocks are fixed by the shape, never by the thread count, and each
 * block's plan is the same whichever thread runs it: the bits do not
 * depend on the threads. Even block sizes keep the column blocks on the
 * array's alignment (a c64 row of 513 numbers is only 8-byte aligned);
 * when the caller's output or the images' size puts any off FFTW's
 * alignment, every column block runs a plan made for unaligned arrays
 * (new-array execute needs the alignment the plan was made for). */
enum { ROW_BLOCK = 64, COL_BLOCK = 32, PAIR_BLOCK = 8 };
_Static_assert(COL_BLOCK % 2 == 0, "blocks keep the alignment");

/* Blocks 0..n-1 in `pieces` contiguous ranges, one to each thread of a
 * pass: a thread takes its own range's blocks from the front and then,
 * when they run out, the other ranges' from the back. A thread that runs
 * slower (its core busy with interrupts or another process) so hands its
 * last blocks to a faster one, and the blocks that run at the same time
 * stay far apart: two threads on adjacent column blocks would write the
 * cache lines at their edge, row after row, in turn. */
enum { MAX_PIECES = 64 };
typedef struct {
  _Atomic uint64_t range[MAX_PIECES]; /* next block in the low 32 bits, end in the high */
  int pieces;
} block_claims;

/* Splits n blocks (fewer than 2^32) over at most `threads` pieces. */
static void claims_init(block_claims *c, int64_t n, int threads) {
  c->pieces = threads < n ? threads : (int)n;
  if (c->pieces > MAX_PIECES) c->pieces = MAX_PIECES;
  if (c->pieces < 1) c->pieces = 1;
  for (int p = 0; p < c->pieces; p++)
    atomic_init(&c->range[p],
                (uint64_t)((p + 1) * n / c->pieces) << 32 | (uint64_t)(p * n / c->pieces));
}

/* The next block for piece p, or -1 when none is left. */
static int64_t claim(block_claims *c, int p) {
  for (int k = 0; k < c->pieces; k++) {
    int q = (p + k) % c->pieces;
    uint64_t v = atomic_load(&c->range[q]);
    for (;;) {
      uint64_t next = v & 0xffffffffu, end = v >> 32;
      if (next >= end) break;
      uint64_t w = k == 0 ? end << 32 | (next + 1) : (end - 1) << 32 | next;
      if (atomic_compare_exchange_weak(&c->range[q], &v, w))
        return (int64_t)(k == 0 ? next : end - 1);
    }
  }
  return -1;
}

/* The passes, each claimed block by block by every piece of one pool job */
enum { PASS_COPY, PASS_COLUMNS, PASS_PAIRS, PASSES };

typedef struct {
  int64_t n0, n1, half, cols, batch;      /* half = n1 / 2 + 1, cols = n1 / 2 */
  int64_t row_blocks;                     /* of all images' rows, for the copy */
  int64_t col_blocks, pairs, pair_blocks; /* of one image: columns' blocks, row pairs, theirs */
  block_claims claims[PASSES];            /* of all images' blocks */
  int64_t blocks[PASSES];
  _Atomic int64_t finished[PASSES]; /* blocks done */
  const float *in;
  float _Complex *out;
  float _Complex *scratch;      /* 2 n1 numbers for each piece, FFTW-aligned */
  void *col_plan[2], *row_plan; /* a column block's, the last one's; a row's c2c */
} rfft2_job;

/* Blocks of `block` out of m items: m / block, the last taking the rest;
 * one block of m when m < block. */
static int64_t block_count(int64_t m, int64_t block) { return m < block ? 1 : m / block; }
static int64_t last_block(int64_t m, int64_t block) { return m < block ? m : block + m % block; }

/* Pass 1, block b: its rows (of all images) into the output's rows. */
static void rfft2_copy_rows(const rfft2_job *j, int64_t b) {
  int64_t r0 = b * ROW_BLOCK, r1 = b == j->row_blocks - 1 ? j->batch * j->n0 : r0 + ROW_BLOCK;
  for (int64_t r = r0; r < r1; r++)
    memcpy(j->out + r * j->half, j->in + r * j->n1, sizeof *j->in * (size_t)j->n1);
}

/* Pass 2, block b: an in-place c2c of adjacent columns. */
static void rfft2_columns(const rfft2_job *j, int64_t b) {
  int64_t image = b / j->col_blocks, block = b % j->col_blocks;
  fftwf_complex *at = (fftwf_complex *)(j->out + image * j->n0 * j->half + block * COL_BLOCK);
  fftwf_execute_dft(j->col_plan[block == j->col_blocks - 1], at, at);
}

/* Four floats, for the row pairs' split and mirror: GCC's and Clang's
 * vector extension (SSE or NEON where there is one), where the compiler
 * has __builtin_shufflevector (GCC 12, Clang); the scalar loops do all the
 * work elsewhere. Each lane does what the scalar loop would, so the bits
 * are the same (0.89-0.96x the CPU time of the scalar loops' transform on
 * one thread, 0.86-1.00x of its time on two). */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define RFFT2_VECTORS 1
#endif
#endif
#ifdef RFFT2_VECTORS
typedef float v4f __attribute__((vector_size(16)));
static v4f load4(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static void store4(float *p, v4f v) { memcpy(p, &v, sizeof v); }
#endif

/* Pass 3 for rows k and m = (n0 - k) % n0 of an image (zk, zm) with the
 * scratch a, f of n1 numbers each: a = C[k] from the columns' Z (the 1/2
 * is exact), f its c2c, row k = f[0 .. half) and row m = conj f[-k1]. Two
 * numbers of Z at a time: a[2c] = (zk + conj zm) / 2, a[2c + 1] = (zk -
 * conj zm) / 2i, that is (kr + mr, ki - mi, ki + mi, mr - kr) / 2. */
static void rfft2_pair(const rfft2_job *j, float _Complex *zk, float _Complex *zm,
                       float _Complex *a, float _Complex *f) {
  const float *pk = (const float *)zk, *pm = (const float *)zm;
  float *av = (float *)a;
  int64_t c = 0;
#ifdef RFFT2_VECTORS
  const float *fv = (const float *)f;
  const v4f flip = {1, -1, 1, -1}, half = {0.5f, 0.5f, 0.5f, 0.5f};
  for (; c + 2 <= j->cols; c += 2) {
    v4f k = load4(pk + 2 * c), m = load4(pm + 2 * c);
    v4f x0 = __builtin_shufflevector(k, m, 0, 1, 1, 4),
        y0 = __builtin_shufflevector(m, k, 0, 1, 1, 4);
    v4f x1 = __builtin_shufflevector(k, m, 2, 3, 3, 6),
        y1 = __builtin_shufflevector(m, k, 2, 3, 3, 6);
    store4(av + 4 * c, half * (x0 + y0 * flip));
    store4(av + 4 * c + 4, half * (x1 + y1 * flip));
  }
#endif
  for (; c < j->cols; c++) {
    float kr = pk[2 * c], ki = pk[2 * c + 1], mr = pm[2 * c], mi = pm[2 * c + 1];
    av[4 * c] = 0.5f * (kr + mr);
    av[4 * c + 1] = 0.5f * (ki - mi);
    av[4 * c + 2] = 0.5f * (ki + mi);
    av[4 * c + 3] = 0.5f * (mr - kr);
  }
  fftwf_execute_dft(j->row_plan, (fftwf_complex *)a, (fftwf_complex *)f);
  if (zm != zk) {
    zm[0] = conjf(f[0]);
    int64_t c = 1;
#ifdef RFFT2_VECTORS
    float *om = (float *)zm;
    for (; c + 2 <= j->half; c += 2) /* conj f[n1 - c], conj f[n1 - c - 1] */
      store4(om + 2 * c, __builtin_shufflevector(load4(fv + 2 * (j->n1 - c - 1)),
                                                 load4(fv + 2 * (j->n1 - c - 1)), 2, 3, 0, 1) *
                             flip);
#endif
    for (; c < j->half; c++) zm[c] = conjf(f[j->n1 - c]);
  }
  memcpy(zk, f, sizeof *f * (size_t)j->half);
}

/* Pass 3, block b: its row pairs. */
static void rfft2_pairs(const rfft2_job *j, int64_t b, float _Complex *a, float _Complex *f) {
  int64_t image = b / j->pair_blocks, block = b % j->pair_blocks;
  int64_t k0 = block * PAIR_BLOCK, k1 = block == j->pair_blocks - 1 ? j->pairs : k0 + PAIR_BLOCK;
  float _Complex *z = j->out + image * j->n0 * j->half;
  for (int64_t k = k0; k < k1; k++)
    rfft2_pair(j, z + k * j->half, z + (j->n0 - k) % j->n0 * j->half, a, f);
}

/* Until `total` blocks of a pass are done: the ones other threads still
 * run. A thread waits only after it found none left to claim, so it
 * waits for blocks in progress, never for ones nobody took. */
static void wait_finished(_Atomic int64_t *finished, int64_t total) {
  for (int s = 1; atomic_load(finished) < total; s++) {
    jx_cpu_relax();
    if (s % 64 == 0) sched_yield(); /* the thread waited for may need this core */
  }
}

/* Piece p: the blocks of each pass it claims, then the pass's other blocks
 * awaited, as the next pass reads what they write. The three passes are one
 * job of the pool, so a worker that starts late (its core busy) delays the
 * call once, not once a pass: the threads that run claim everything, and
 * the pool's end of job is the only hand-off that needs every thread. */
static void rfft2_piece(void *ctx, int64_t begin, int64_t end) {
  rfft2_job *j = ctx;
  for (int64_t p = begin; p < end; p++) {
    float _Complex *a = j->scratch + 2 * p * j->n1, *f = a + j->n1;
    for (int pass = 0; pass < PASSES; pass++) {
      for (int64_t b; (b = claim(&j->claims[pass], (int)p)) >= 0;) {
        if (pass == PASS_COPY)
          rfft2_copy_rows(j, b);
        else if (pass == PASS_COLUMNS)
          rfft2_columns(j, b);
        else
          rfft2_pairs(j, b, a, f);
        atomic_fetch_add(&j->finished[pass], 1);
      }
      if (pass + 1 < PASSES) wait_finished(&j->finished[pass], j->blocks[pass]);
    }
  }
}

/* 1 when p is on FFTW's SIMD alignment, so that a plan made for aligned
 * arrays may run on it (new-array execute requires the planned alignment). */
static int aligned_at(int dbl, const char *p) {
  return dbl ? fftw_alignment_of((double *)p) == 0 : fftwf_alignment_of((float *)p) == 0;
}
/* 1 when base + i * step is aligned for every i: the first two tell. */
static int steps_aligned(int dbl, const char *base, size_t step) {
  return aligned_at(dbl, base) && aligned_at(dbl, base + step);
}

static int rfft2_by_columns(const int64_t *n, int64_t batch, const float *in, float _Complex *out) {
  rfft2_job j = {.n0 = n[0],
                 .n1 = n[1],
                 .half = n[1] / 2 + 1,
                 .cols = n[1] / 2,
                 .batch = batch,
                 .col_blocks = block_count(n[1] / 2, COL_BLOCK),
                 .pairs = n[0] / 2 + 1,
                 .row_blocks = block_count(batch * n[0], ROW_BLOCK),
                 .pair_blocks = block_count(n[0] / 2 + 1, PAIR_BLOCK),
                 .in = in,
                 .out = out};
  /* every column block starts on the alignment, or all are unaligned ones */
  const char *at = (const char *)out;
  int aligned = steps_aligned(0, at, COL_BLOCK * sizeof *out) &&
                steps_aligned(0, at, (size_t)(j.n0 * j.half) * sizeof *out);
  /* planned here, on the calling thread, before the blocks run */
  int64_t last_cols = last_block(j.cols, COL_BLOCK);
  int64_t first_cols = j.col_blocks > 1 ? COL_BLOCK : last_cols;
  j.col_plan[0] = plan_for(JX_FFT_FFT, LAYOUT_COLUMNS, 0, 1, &n[0], first_cols, j.half, aligned);
  j.col_plan[1] = plan_for(JX_FFT_FFT, LAYOUT_COLUMNS, 0, 1, &n[0], last_cols, j.half, aligned);
  j.row_plan = plan_for(JX_FFT_FFT, LAYOUT_ROW, 0, 1, &n[1], 1, 0, 1);
  if (!j.col_plan[0] || !j.col_plan[1] || !j.row_plan) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: FFTW could not plan the transform");
    return 0;
  }
  int threads = jx_pool_threads(), pieces = threads < MAX_PIECES ? threads : MAX_PIECES;
  j.blocks[PASS_COPY] = j.row_blocks;
  j.blocks[PASS_COLUMNS] = batch * j.col_blocks;
  j.blocks[PASS_PAIRS] = batch * j.pair_blocks;
  for (int pass = 0; pass < PASSES; pass++) {
    claims_init(&j.claims[pass], j.blocks[pass], pieces);
    atomic_init(&j.finished[pass], 0);
  }
  if (!(j.scratch = fftw_malloc(sizeof *j.scratch * (size_t)(2 * pieces * j.n1)))) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: out of memory for the real transform's rows");
    return 0;
  }
  jx_parallel_for(pieces, 1, rfft2_piece, &j);
  fftw_free(j.scratch);
  return 1;
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
  if (t == JX_FFT_RFFT && !dbl && k == 2 && total >= COLUMNS_MIN && n[1] % 2 == 0)
    return rfft2_by_columns(n, batch, in, out);
  int aligned = aligned_at(dbl, src) && aligned_at(dbl, out);
  void *plan = plan_for(t, LAYOUT_WHOLE, dbl, k, n, batch, 0, aligned);
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
