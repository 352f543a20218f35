/* The CUDA emulator itself (tests/cuda_emu, docs/cuda-kernels.md): the
 * threads of a block meet at __syncthreads (a shared-memory tree sum over
 * 256 threads and 3 blocks), warp shuffles exchange lanes' values (a
 * butterfly sum of 64 threads, two warps), a barrier some threads never
 * reach fails the launch instead of hanging, a module loaded twice from
 * the compiled-module cache keeps globals of its own per load, fragments
 * that ldmatrix loads (plain and .trans) multiply on the emulated tensor
 * cores to the exact product, and cp.async's copies land only when their
 * group is waited for (zero-filled past the source size). Skipped, with a
 * message, without a C++ compiler. */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>

#include "cuda_emu/cuda_emu_runner.h"

static const char source[] =
    "extern \"C\" __global__ void tree_sum(const float *x, float *out) {\n"
    "  __shared__ float part[256];\n"
    "  unsigned t = threadIdx.x;\n"
    "  part[t] = x[blockIdx.x * 256 + t];\n"
    "  __syncthreads();\n"
    "  for (unsigned half = 128; half > 0; half /= 2) {\n"
    "    if (t < half) part[t] += part[t + half];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (t == 0) out[blockIdx.x] = part[0];\n"
    "}\n"
    "extern \"C\" __global__ void warp_sum(const float *x, float *out) {\n"
    "  float v = x[threadIdx.x];\n"
    "  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);\n"
    "  out[threadIdx.x] = v;\n"
    "}\n"
    "extern \"C\" __global__ void early_return(const float *x, float *out) {\n"
    "  if (threadIdx.x == 3) return;\n"
    "  __syncthreads();\n"
    "  out[threadIdx.x] = x[threadIdx.x];\n"
    "}\n"
    "__device__ int launches;\n"
    "extern \"C\" __global__ void count_launches(const float *x, float *out) {\n"
    "  (void)x;\n"
    "  if (threadIdx.x == 0) out[0] = (float)++launches;\n"
    "}\n"
    /* a 16 x 16 by 16 x 16 product on the tensor cores, a's fragments by
     * ldmatrix, b's by ldmatrix .trans from b (k x n) and by ldmatrix from
     * b^T (n x k), as the attention kernels load v and k */
    "static unsigned short bf(float f) { return (unsigned short)(__float_as_uint(f) >> 16); }\n"
    "extern \"C\" __global__ void ldmatrix_products(const float *x, float *out) {\n"
    "  __shared__ __align__(16) unsigned short as[16][24], bs[16][24], bts[16][24];\n"
    "  const int l = threadIdx.x;\n"
    "  for (int e = l; e < 256; e += 32) {\n"
    "    as[e / 16][e % 16] = bf(x[e]);\n"
    "    bs[e / 16][e % 16] = bts[e % 16][e / 16] = bf(x[256 + e]);\n"
    "  }\n"
    "  __syncthreads();\n"
    "  unsigned a[4], b[4], bt[4];\n"
    "  cuda_emu_ldmatrix_x4(a, &as[l % 8 + 8 * (l / 8 % 2)][8 * (l / 16)], 0);\n"
    "  cuda_emu_ldmatrix_x4(b, &bs[l % 8 + 8 * (l / 8 % 2)][8 * (l / 16)], 1);\n"
    "  cuda_emu_ldmatrix_x4(bt, &bts[l % 8 + 8 * (l / 16)][8 * (l / 8 % 2)], 0);\n"
    "  for (int path = 0; path < 2; path++)\n"
    "    for (int n = 0; n < 2; n++) {\n"
    "      float d[4] = {0, 0, 0, 0};\n"
    "      cuda_emu_mma_m16n8k16_bf16(d, a, (path ? bt : b) + 2 * n);\n"
    "      for (int e = 0; e < 4; e++)\n"
    "        out[256 * path + (l / 4 + 8 * (e / 2)) * 16 + 8 * n + 2 * (l % 4) + e % 2] = d[e];\n"
    "    }\n"
    "}\n"
    /* cp.async: each thread's two groups of 16 bytes (the second zero-filled
     * past 8), read before any wait, after waiting for all but the latest,
     * after waiting for all */
    "extern \"C\" __global__ void async_copies(const float *x, float *out) {\n"
    "  __shared__ __align__(16) float s[32][8];\n"
    "  const int l = threadIdx.x;\n"
    "  for (int e = 0; e < 8; e++) s[l][e] = -1.0f;\n"
    "  cuda_emu_cp_async_16(&s[l][0], x + 4 * l, 16);\n"
    "  cuda_emu_cp_async_commit();\n"
    "  cuda_emu_cp_async_16(&s[l][4], x + 128 + 4 * l, 8);\n"
    "  cuda_emu_cp_async_commit();\n"
    "  out[24 * l] = s[l][0];\n"
    "  cuda_emu_cp_async_wait(1);\n"
    "  for (int e = 0; e < 8; e++) out[24 * l + 1 + e] = s[l][e];\n"
    "  cuda_emu_cp_async_wait(0);\n"
    "  for (int e = 0; e < 8; e++) out[24 * l + 9 + e] = s[l][e];\n"
    "}\n";

typedef struct {
  const float *x;
  float *out;
} args;

static void call(void *kernel, void *a) {
  const args *p = a;
  ((void (*)(const float *, float *))kernel)(p->x, p->out);
}

static cuda_emu_module *module;
static char cache[256]; /* this test's own module cache */

static int setup(void **state) {
  (void)state;
  if (!cuda_emu_available()) return 0;
  const char *tmp = getenv("TMPDIR");
  snprintf(cache, sizeof cache, "%s/test_cuda_emu.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(cache) || setenv("CUDA_EMU_CACHE_DIR", cache, 1)) return -1;
  char log[4096];
  module = cuda_emu_compile(source, "test_cuda_emu", log, sizeof log);
  if (!module) fprintf(stderr, "%s\n", log);
  return module ? 0 : -1;
}

static int entries(void) {
  DIR *d = opendir(cache);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int teardown(void **state) {
  (void)state;
  cuda_emu_unload(module);
  if (!*cache) return 0;
  DIR *d = opendir(cache);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
    if (e->d_name[0] != '.') unlink(path);
  }
  if (d) closedir(d);
  rmdir(cache);
  return 0;
}

#define NEEDS_EMULATOR()                                                                           \
  do {                                                                                             \
    if (!module) {                                                                                 \
      printf("skipped: %s\n", cuda_emu_missing());                                                 \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

static int run(cuda_emu_module *m, const char *name, unsigned blocks, unsigned threads,
               const float *x, float *out) {
  void *k = cuda_emu_kernel(m, name);
  assert_non_null(k);
  args a = {x, out};
  return cuda_emu_launch(m, k, (cuda_emu_dim3){blocks, 1, 1}, (cuda_emu_dim3){threads, 1, 1}, call,
                         &a);
}

static void barriers_order_a_tree_sum(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[3 * 256], out[3] = {0}, want[3] = {0};
  /* small integers: every order of the sum is exact, so a wrong tree shows */
  for (int i = 0; i < 3 * 256; i++) {
    x[i] = (float)((i * 7) % 13);
    want[i / 256] += x[i];
  }
  assert_int_equal(run(module, "tree_sum", 3, 256, x, out), 0);
  for (int b = 0; b < 3; b++) assert_true(out[b] == want[b]);
}

static void shuffles_exchange_lanes(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[64], out[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(i + 1);
  assert_int_equal(run(module, "warp_sum", 1, 64, x, out), 0);
  /* each lane ends with its own warp's sum */
  for (int i = 0; i < 64; i++) assert_true(out[i] == (i < 32 ? 528.0f : 1552.0f));
}

static void a_barrier_not_all_reach_fails_the_launch(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[32] = {0}, out[32] = {0};
  assert_int_equal(run(module, "early_return", 1, 32, x, out), -1);
}

static void each_load_has_its_own_globals(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[1] = {0}, out[1] = {0};
  assert_int_equal(run(module, "count_launches", 1, 1, x, out), 0);
  assert_int_equal(run(module, "count_launches", 1, 1, x, out), 0);
  assert_true(out[0] == 2.0f);
  /* the compiled object and its source, kept for the next load */
  assert_int_equal(entries(), 2);
  /* the same source again: from the cache, a fresh copy of the object */
  char log[4096];
  cuda_emu_module *again = cuda_emu_compile(source, "test_cuda_emu again", log, sizeof log);
  assert_non_null(again);
  assert_int_equal(run(again, "count_launches", 1, 1, x, out), 0);
  assert_true(out[0] == 1.0f);
  assert_int_equal(entries(), 2);
  cuda_emu_unload(again);
}

static void ldmatrix_fragments_multiply(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[512], out[512];
  /* small integers: bf16 holds them and every f32 sum of their products is exact */
  for (int i = 0; i < 512; i++) x[i] = (float)((i * 5 + i / 16) % 9) - 4.0f;
  assert_int_equal(run(module, "ldmatrix_products", 1, 32, x, out), 0);
  for (int path = 0; path < 2; path++)
    for (int r = 0; r < 16; r++)
      for (int c = 0; c < 16; c++) {
        float want = 0;
        for (int k = 0; k < 16; k++) want += x[16 * r + k] * x[256 + 16 * k + c];
        assert_true(out[256 * path + 16 * r + c] == want);
      }
}

static void async_copies_land_when_waited_for(void **state) {
  (void)state;
  NEEDS_EMULATOR();
  float x[256], out[32 * 24];
  for (int i = 0; i < 256; i++) x[i] = (float)(i + 1);
  assert_int_equal(run(module, "async_copies", 1, 32, x, out), 0);
  for (int l = 0; l < 32; l++) {
    const float *o = out + 24 * l;
    assert_true(o[0] == -1.0f); /* nothing landed before a wait */
    for (int e = 0; e < 4; e++) {
      assert_true(o[1 + e] == x[4 * l + e]); /* the first group, */
      assert_true(o[5 + e] == -1.0f);        /* not the latest */
      assert_true(o[9 + e] == x[4 * l + e]);
      /* the second: 8 bytes copied, 8 zero-filled */
      assert_true(o[13 + e] == (e < 2 ? x[128 + 4 * l + e] : 0.0f));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(barriers_order_a_tree_sum),
      cmocka_unit_test(shuffles_exchange_lanes),
      cmocka_unit_test(a_barrier_not_all_reach_fails_the_launch),
      cmocka_unit_test(each_load_has_its_own_globals),
      cmocka_unit_test(ldmatrix_fragments_multiply),
      cmocka_unit_test(async_copies_land_when_waited_for),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
