/* The fused attention kernels alone on a GPU: forward and backward (delta,
 * dq, dkdv) for bf16 q, k, v, do of shape [B, H, T, D] (default B 8, H 12,
 * T 1024, D 64, causal: GPT-2 124M's attention), the tensor-core kernels
 * (kernels_attention_tc.h) next to the f32-arithmetic bf16 kernels
 * (kernels_attention.h, kernels_attention_bwd.h) on the same buffers and
 * stream. Prints one JSON line per kernel set and pass: the median of RUNS
 * event-timed calls and TFLOP/s as FlashAttention counts them (forward
 * 4 B H T^2 D, halved when causal; backward 2.5 times that: the products
 * the math needs, not the ones a kernel recomputes), after checking the
 * tensor cores' o, dq, dk, dv against the f32-arithmetic kernels' within
 * bf16's rounding. --t and --d change T and D. Where there is no GPU it
 * says why and exits 0 (tests/cuda_fake runs only the executor's kernels:
 * this program needs a real driver). */
#include "bench_util.h"
#include "bench_cuda_timing.h"
#include <jx/jx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_copy.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_module.h"
#include "cuda/kernels_attention.h"
#include "cuda/kernels_attention_bwd.h"
#include "cuda/kernels_attention_tc.h"

enum { RUNS = 20, WARMUP = 3 };

static int failed(const char *what) {
  fprintf(stderr, "bench_cuda_attention: %s: %s\n", what, jx_last_error());
  return 1;
}

/* One kernel set: the forward, then the backward's three kernels. */
typedef struct {
  const char *name;
  jx_cuda_module *fwd, *bwd; /* bwd may be fwd's module */
  jx_cuda_launch_dims fdims, bdims[3];
} kernel_set;

static jx_status launch(CUfunction f, const jx_cuda_launch_dims *g, void *args, CUstream s) {
  void *params[1] = {args};
  return jx_cuda_check(jx_cuda_driver()->LaunchKernel(f, g->grid[0], g->grid[1], g->grid[2],
                                                      g->block[0], g->block[1], g->block[2],
                                                      g->shared_bytes, s, params, NULL),
                       "cuLaunchKernel", 0);
}

/* pass 0: the forward; 1: the backward's three launches */
static jx_status run_pass(const kernel_set *k, int pass, jx_cuda_attention_args *fa,
                          jx_cuda_attention_bwd_args *ba, CUstream s) {
  if (pass == 0) return launch(k->fwd->functions[0], &k->fdims, fa, s);
  jx_status st = JX_OK;
  for (int i = 0; i < 3 && !st; i++)
    st = launch(k->bwd->functions[k->bwd == k->fwd ? 1 + i : i], &k->bdims[i], ba, s);
  return st;
}

typedef struct {
  const kernel_set *k;
  int pass;
  jx_cuda_attention_args *fa;
  jx_cuda_attention_bwd_args *ba;
  CUstream s;
} timed_pass;

static jx_status run_timed(const void *ctx) {
  const timed_pass *t = ctx;
  return run_pass(t->k, t->pass, t->fa, t->ba, t->s);
}

/* The largest |a - b| over n bf16 values, and the largest |b|. */
static double max_diff(const uint16_t *a, const uint16_t *b, size_t n, double *scale) {
  double worst = 0;
  *scale = 0;
  for (size_t i = 0; i < n; i++) {
    const double x = jx_bf16_to_f32(a[i]), y = jx_bf16_to_f32(b[i]);
    worst = fmax(worst, fabs(x - y));
    *scale = fmax(*scale, fabs(y));
  }
  return worst;
}

int main(int argc, char **argv) {
  int64_t b = 8, h = 12, t = 1024, d = 64;
  const int causal = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--d") && i + 1 < argc) {
      d = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--t") && i + 1 < argc) {
      t = atoll(argv[++i]);
    } else {
      fprintf(stderr, "usage: bench_cuda_attention [--t N] [--d 64|128]\n");
      return 2;
    }
  }
  if (jx_cuda_probe() == 0) {
    printf("bench_cuda_attention: skipped: no CUDA device (%s)\n", jx_cuda_probe_error());
    return 0;
  }
  jx_cuda_device *dev = NULL;
  if (jx_cuda_device_open(0, &dev)) return failed("opening device 0");
  jx_cubin_cache *cache = jx_cubin_cache_create();
  if (!cache) return failed("the cubin cache");
  /* the modules: the tensor-core kernels, the f32-arithmetic forward, its backward */
  char tc_bwd[3][48], f32_bwd[3][48];
  const char *tc_fwd = jx_cuda_attention_tc_kernel(JX_BF16, d);
  if (!tc_fwd || jx_cuda_attention_tc_bwd_kernels(JX_BF16, d, tc_bwd) ||
      jx_cuda_attention_bwd_kernels(JX_BF16, d, f32_bwd))
    return fprintf(stderr, "bench_cuda_attention: head_dim must be 64 or 128\n"), 2;
  const char *tc_names[4] = {tc_fwd, tc_bwd[0], tc_bwd[1], tc_bwd[2]};
  const char *f32_fwd = jx_cuda_attention_kernel(JX_BF16, d);
  const char *f32_names[3] = {f32_bwd[0], f32_bwd[1], f32_bwd[2]};
  kernel_set sets[2];
  memset(sets, 0, sizeof sets);
  sets[0].name = "tensor_cores";
  sets[1].name = "f32_arithmetic";
  jx_cuda_module *f32_bwd_module = NULL;
  if (jx_cuda_module_load(dev, cache, jx_cuda_attention_tc_src, "attention_tc", tc_names, 4,
                          &sets[0].fwd) ||
      jx_cuda_module_load(dev, cache, jx_cuda_attention_src, "attention", &f32_fwd, 1,
                          &sets[1].fwd) ||
      jx_cuda_module_load(dev, cache, jx_cuda_attention_bwd_src, "attention_bwd", f32_names, 3,
                          &f32_bwd_module))
    return failed("loading the kernels");
  sets[0].bwd = sets[0].fwd;
  sets[1].bwd = f32_bwd_module;
  if (jx_cuda_attention_tc_geometry(b, h, t, d, &sets[0].fdims) ||
      jx_cuda_attention_tc_bwd_geometry(b, h, t, d, sets[0].bdims) ||
      jx_cuda_attention_geometry(b, h, t, d, &sets[1].fdims) ||
      jx_cuda_attention_bwd_geometry(b, h, t, d, sets[1].bdims))
    return failed("geometry");
  /* q, k, v, do; then each set's o, dq, dk, dv; lse and delta shared */
  const size_t n = (size_t)(b * h * t * d), bytes = n * 2, rows = (size_t)(b * h * t);
  uint16_t *host[4], *back[2][4];
  uint64_t in[4], out[2][4], lse, delta;
  srand(1);
  for (int i = 0; i < 4; i++) {
    if (!(host[i] = malloc(bytes))) return failed("host buffers");
    for (size_t e = 0; e < n; e++) host[i][e] = jx_f32_to_bf16(2.0f * rand() / RAND_MAX - 1.0f);
    if (jx_cuda_allocator_alloc(dev->memory, bytes, &in[i]) ||
        jx_cuda_copy_to_device(dev, in[i], host[i], bytes, dev->compute))
      return failed("inputs");
  }
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 4; i++)
      if (!(back[s][i] = malloc(bytes)) || jx_cuda_allocator_alloc(dev->memory, bytes, &out[s][i]))
        return failed("outputs");
  if (jx_cuda_allocator_alloc(dev->memory, rows * 4, &lse) ||
      jx_cuda_allocator_alloc(dev->memory, rows * 4, &delta))
    return failed("lse and delta");
#define P(x) ((void *)(uintptr_t)(x))
  const double scale = 1.0 / sqrt((double)d);
  const double fwd_flop = 4.0 * (double)b * h * t * t * d * (causal ? 0.5 : 1.0);
  double ms[2][2];
  for (int s = 0; s < 2; s++) {
    jx_cuda_attention_args fa = {P(in[0]), P(in[1]), P(in[2]), P(out[s][0]), P(lse),
                                 b,        h,        t,        (float)scale, causal};
    jx_cuda_attention_bwd_args ba = {
        P(in[0]), P(in[1]),     P(in[2]),     P(out[s][0]), P(in[3]), P(lse),
        P(delta), P(out[s][1]), P(out[s][2]), P(out[s][3]), b,        h,
        t,        (float)scale, causal};
    for (int pass = 0; pass < 2; pass++) {
      const timed_pass tp = {&sets[s], pass, &fa, &ba, dev->compute};
      if (bench_cuda_median_ms(run_timed, &tp, dev->compute, WARMUP, RUNS, &ms[s][pass]))
        return failed(sets[s].name);
      const double flop = pass ? 2.5 * fwd_flop : fwd_flop;
      printf("{\"bench\":\"cuda_attention_%s\",\"impl\":\"%s\",\"b\":%lld,\"h\":%lld,\"t\":%lld,"
             "\"d\":%lld,\"causal\":%d,\"median_ms\":%.3f,\"tflop_per_s\":%.1f}\n",
             pass ? "bwd" : "fwd", sets[s].name, (long long)b, (long long)h, (long long)t,
             (long long)d, causal, ms[s][pass], flop / (ms[s][pass] * 1e-3) / 1e12);
    }
    for (int i = 0; i < 4; i++)
      if (jx_cuda_copy_to_host(dev, back[s][i], out[s][i], bytes, dev->compute))
        return failed("copy back");
  }
#undef P
  /* the tensor cores' results against the f32 arithmetic's: p and ds rounded to bf16 move
   * them by a few bf16 units of the largest entry */
  const char *what[4] = {"o", "dq", "dk", "dv"};
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    double ref_scale, err = max_diff(back[0][i], back[1][i], n, &ref_scale);
    printf("{\"bench\":\"cuda_attention_check\",\"output\":\"%s\",\"max_abs_diff\":%.3g,"
           "\"max_abs\":%.3g}\n",
           what[i], err, ref_scale);
    if (!(err <= 0x1p-5 * ref_scale)) {
      fprintf(stderr, "bench_cuda_attention: %s differs by %.3g (largest entry %.3g)\n", what[i],
              err, ref_scale);
      bad = 1;
    }
  }
  printf("{\"bench\":\"cuda_attention\",\"fwd_speedup\":%.2f,\"bwd_speedup\":%.2f,"
         "\"device\":\"%s\"}\n",
         ms[1][0] / ms[0][0], ms[1][1] / ms[0][1], dev->info.name);
  jx_cuda_module_unload(sets[0].fwd);
  jx_cuda_module_unload(sets[1].fwd);
  jx_cuda_module_unload(f32_bwd_module);
  jx_cubin_cache_destroy(cache);
  for (int i = 0; i < 4; i++) free(host[i]);
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 4; i++) free(back[s][i]);
  return bad;
}
