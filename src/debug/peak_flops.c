/* Peak f32 FLOP/s of this machine, the denominator of MFU: JX_PEAK_FLOPS
 * when set, else a file in the kernel cache directory keyed by CPU model and
 * pool threads, else measured by an FMA loop (and written to that file).
 *
 * The loop runs on every pool thread at once: each piece keeps twelve
 * independent chains of 8-lane FMAs in registers (two FMA units with a
 * latency of four need eight in flight), so it reaches the core's issue
 * rate with no loads. A piece's rate is its best of several rounds: on a
 * shared machine a round that lost its core to another process says nothing
 * about the hardware. Peak = the sum of the pieces' best rates. Beside it,
 * jx_gemm_flops measures what jx's f32 GEMM reaches (never more than the
 * peak: a GEMM is FMAs plus loads). */
#include "peak_flops.h"

#include <jx/jx.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/cpu_features.h"
#include "../base/env.h"
#include "../base/hash.h"
#include "../base/spin.h"
#include "../base/threadpool.h"
#include "../base/cache_dir.h"

enum {
  CHAINS = 12,         /* independent FMA chains per piece (fma_loop_avx2's c0..c11) */
  ITERATIONS = 500000, /* per round: 6M FMAs, ~1 ms on a 3 GHz core */
  ROUNDS = 40,         /* ~50 ms in all */
  MAX_PIECES = 1024
};

static atomic_llong measurements;

int64_t jx_peak_flops_measurements(void) { return (int64_t)atomic_load(&measurements); }

typedef struct {
  double best_s[MAX_PIECES]; /* a piece's fastest round */
  float sink[MAX_PIECES];    /* the chains' sum, so the loop is not dropped */
} fma_job;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/* FLOPs done: CHAINS x 8 lanes x 2 per iteration. The chains are named
 * variables, not an array, so that they stay in registers at any -O. */
__attribute__((target("avx2,fma"))) static float fma_loop_avx2(void) {
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-6f);
  __m256 c0 = _mm256_set1_ps(1.00f), c1 = _mm256_set1_ps(1.01f), c2 = _mm256_set1_ps(1.02f);
  __m256 c3 = _mm256_set1_ps(1.03f), c4 = _mm256_set1_ps(1.04f), c5 = _mm256_set1_ps(1.05f);
  __m256 c6 = _mm256_set1_ps(1.06f), c7 = _mm256_set1_ps(1.07f), c8 = _mm256_set1_ps(1.08f);
  __m256 c9 = _mm256_set1_ps(1.09f), c10 = _mm256_set1_ps(1.10f), c11 = _mm256_set1_ps(1.11f);
  for (int i = 0; i < ITERATIONS; i++) {
    c0 = _mm256_fmadd_ps(c0, m, a);
    c1 = _mm256_fmadd_ps(c1, m, a);
    c2 = _mm256_fmadd_ps(c2, m, a);
    c3 = _mm256_fmadd_ps(c3, m, a);
    c4 = _mm256_fmadd_ps(c4, m, a);
    c5 = _mm256_fmadd_ps(c5, m, a);
    c6 = _mm256_fmadd_ps(c6, m, a);
    c7 = _mm256_fmadd_ps(c7, m, a);
    c8 = _mm256_fmadd_ps(c8, m, a);
    c9 = _mm256_fmadd_ps(c9, m, a);
    c10 = _mm256_fmadd_ps(c10, m, a);
    c11 = _mm256_fmadd_ps(c11, m, a);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#endif

/* Without AVX2 + FMA: the same chains on 8-float arrays, which the compiler
 * vectorises for the target it builds for (a lower bound of that CPU's peak). */
static float fma_loop_portable(void) {
  float acc[CHAINS][8];
  for (int c = 0; c < CHAINS; c++)
    for (int l = 0; l < 8; l++) acc[c][l] = 1.0f + 1e-3f * (float)c;
  for (int i = 0; i < ITERATIONS; i++)
    for (int c = 0; c < CHAINS; c++)
      for (int l = 0; l < 8; l++) acc[c][l] = acc[c][l] * 0.999999f + 1e-6f;
  float s = 0;
  for (int c = 0; c < CHAINS; c++) s += acc[c][0] + acc[c][7];
  return s;
}

static void fma_pieces(void *ctx, int64_t begin, int64_t end) {
  fma_job *job = ctx;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  int avx2 = jx_cpu_has_avx2_fma();
#endif
  for (int64_t p = begin; p < end; p++) {
    int64_t t0 = jx_now_ns();
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    float s = avx2 ? fma_loop_avx2() : fma_loop_portable();
#else
    float s = fma_loop_portable();
#endif
    double dt = 1e-9 * (double)(jx_now_ns() - t0);
    job->sink[p] += s;
    if (dt > 0 && dt < job->best_s[p]) job->best_s[p] = dt;
  }
}

static double measure(void) {
  atomic_fetch_add(&measurements, 1);
  int pieces = jx_pool_threads();
  if (pieces < 1) pieces = 1;
  if (pieces > MAX_PIECES) pieces = MAX_PIECES;
  fma_job *job = calloc(1, sizeof *job);
  if (!job) return 0;
  for (int p = 0; p < pieces; p++) job->best_s[p] = 1e30;
  for (int r = 0; r < ROUNDS; r++) jx_parallel_for(pieces, 1, fma_pieces, job);
  double flops_per_piece = (double)CHAINS * 8 * 2 * ITERATIONS, peak = 0;
  for (int p = 0; p < pieces; p++) peak += flops_per_piece / job->best_s[p];
  free(job);
  return peak;
}

/* The CPU's model name ("model name" in /proc/cpuinfo), "" when unknown. */
static void cpu_model(char *out, size_t n) {
  out[0] = '\0';
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    for (v++; *v == ' ' || *v == '\t'; v++) {
    }
    snprintf(out, n, "%s", v);
    out[strcspn(out, "\n")] = '\0';
    break;
  }
  fclose(f);
}

/* DIR/peak_flops_<hash of model and threads>; 0 when there is no cache dir. */
static int cache_path(char *out, size_t n, const char *model, int threads) {
  char dir[4096];
  if (!jx_kernel_cache_dir(dir, sizeof dir)) return 0;
  uint64_t h = jx_hash_u64(jx_hash_str(JX_HASH_SEED, model), (uint64_t)threads);
  snprintf(out, n, "%s/peak_flops_%016llx", dir, (unsigned long long)h);
  return 1;
}

double jx_peak_flops(void) {
  double given;
  int got = jx_env_double("JX_PEAK_FLOPS", &given);
  if (got > 0 && given > 0) return given;
  if (got)
    fprintf(stderr, "jx: JX_PEAK_FLOPS=%s is not a positive number of FLOP/s; measuring instead\n",
            jx_env_string("JX_PEAK_FLOPS"));
  char model[256], path[4400];
  int threads = jx_pool_threads();
  cpu_model(model, sizeof model);
  int cached = cache_path(path, sizeof path, model, threads);
  if (cached) {
    FILE *f = fopen(path, "r");
    double v = 0;
    int ok = f && fscanf(f, "%lf", &v) == 1 && v > 0;
    if (f) fclose(f);
    if (ok) return v;
  }
  double peak = measure();
  if (cached && peak > 0) {
    /* written whole then renamed: a reader never sees half a number */
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f) {
      int ok = fprintf(f, "%.17g\n%s\n%d threads\n", peak, model, threads) > 0;
      ok = (fclose(f) == 0) && ok;
      if (!ok || rename(tmp, path) != 0) remove(tmp);
    }
  }
  return peak;
}

double jx_gemm_flops(void) {
  enum { N = 1024 };
  jx_scope_begin();
  jx_array *a = jx_ones(JX_F32, JX_SHAPE(N, N));
  int64_t best = INT64_MAX;
  for (int r = 0; r < 5; r++) {
    int64_t t0 = jx_now_ns();
    jx_block_until_ready(jx_matmul(a, a));
    int64_t t = jx_now_ns() - t0;
    if (t < best) best = t;
  }
  jx_scope_end();
  return 2.0 * N * N * N / (1e-9 * (double)best);
}
