/* The CUDA runtime layer (src/cuda/), on any machine: the loaders' messages
 * (a library that is missing, one that lacks a symbol, an override variable
 * naming a file that is not there); the driver's absence reported without an
 * error left recorded; NVRTC's, cuBLASLt's and NCCL's tables and version
 * calls where the libraries are found (none needs a GPU); the caching
 * allocator against a mock device (malloc/free); the GEMM's row-major ->
 * column-major mapping against a row-major reference; the algorithm cache's
 * key; NCCL's deadline logic on a fake clock; the cubin cache on disk
 * (compile, disk hit, damaged entry rebuilt). Where a GPU exists the last
 * tests also run copies, a kernel and a GEMM on it; elsewhere they print why
 * they are skipped. */
#define _GNU_SOURCE /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "cuda/nvrtc.h"
#include "cuda/cuda_alloc.h"
#include "cuda/cuda_blaslt.h"
#include "cuda/cuda_copy.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_loader.h"
#include "cuda/cuda_module.h"
#include "cuda/cuda_nccl.h"
#include "test_util.h"

static int contains(const char *s, const char *part) { return s && strstr(s, part) != NULL; }

static void assert_contains(const char *s, const char *part) {
  if (!contains(s, part)) fprintf(stderr, "expected '%s' in: %s\n", part, s ? s : "(null)");
  assert_true(contains(s, part));
}

/* ---- loading ---- */

static void missing_library_names_what_was_tried(void **state) {
  (void)state;
  static const char *const sonames[] = {"libjx-no-such-lib.so.7", "libjx-no-such-lib.so", NULL};
  const jx_cuda_library fake = {"Fake", "JX_NCCL_PATH", sonames, 0, "install Fake"};
  void *slot = NULL;
  const jx_cuda_symbol syms[] = {{&slot, "fake_call", NULL, 0}};
  char why[1024];
  unsetenv("JX_NCCL_PATH");
  assert_null(jx_cuda_library_open(&fake, syms, 1, why, sizeof why));
  assert_contains(why, "Fake not found: tried libjx-no-such-lib.so.7, libjx-no-such-lib.so");
  assert_contains(why, "install Fake, or set JX_NCCL_PATH");
  setenv("JX_NCCL_PATH", "/nonexistent/libfake.so", 1);
  assert_null(jx_cuda_library_open(&fake, syms, 1, why, sizeof why));
  assert_contains(why, "cannot open JX_NCCL_PATH=/nonexistent/libfake.so");
  unsetenv("JX_NCCL_PATH");
  assert_int_equal(jx_last_status(), JX_OK); /* probing records nothing */
}

/* libm stands in for a CUDA library: a missing symbol fails the load, an
 * older name is taken when the newer is absent, an optional one may be absent. */
static void symbols_resolve_with_fallbacks(void **state) {
  (void)state;
  static const char *const sonames[] = {"libm.so.6", NULL};
  const jx_cuda_library m = {"libm", "JX_CUBLASLT_PATH", sonames, 0, "?"};
  double (*cosine)(double) = NULL, (*absent)(double) = NULL;
  const jx_cuda_symbol ok[] = {{(void **)&cosine, "jx_cos_v2", "cos", 0},
                               {(void **)&absent, "jx_no_such_symbol", NULL, 1}};
  char why[1024];
  void *h = jx_cuda_library_open(&m, ok, 2, why, sizeof why);
  assert_non_null(h);
  assert_string_equal(why, "");
  assert_non_null(cosine);
  assert_null(absent);
  assert_true(cosine(0.5) == cos(0.5));
  const jx_cuda_symbol required[] = {{(void **)&absent, "jx_no_such_symbol", NULL, 0}};
  assert_null(jx_cuda_library_open(&m, required, 1, why, sizeof why));
  assert_contains(why, "libm not found: the loaded library lacks jx_no_such_symbol");
}

static void driver_absence_is_reported_cleanly(void **state) {
  (void)state;
  int n = jx_cuda_device_count();
  assert_int_equal(jx_last_status(), JX_OK); /* never an error, with or without a GPU */
  assert_int_equal(n, jx_cuda_probe());
  const char *status = jx_cuda_status();
  printf("%s\n", status);
  if (!jx_cuda_driver()) {
    assert_int_equal(n, 0);
    assert_contains(jx_cuda_driver_load_error(), "CUDA driver not found: tried libcuda.so.1");
    assert_contains(status, "CUDA: driver not found (tried libcuda.so.1");
    assert_null(jx_cuda_device_describe(0));
    jx_cuda_device *d = NULL;
    assert_int_equal(jx_cuda_device_open(0, &d), JX_ERR_UNIMPLEMENTED);
    assert_null(d);
    assert_contains(jx_last_error(), "CUDA driver not found");
  } else if (n == 0) {
    printf("driver loaded, no device: %s\n", jx_cuda_probe_error());
    assert_contains(status, "CUDA: no device (");
  } else {
    const jx_cuda_device_info *d = jx_cuda_device_describe(0);
    assert_non_null(d);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", d->cc_major, d->cc_minor);
    assert_string_equal(d->arch, arch);
    assert_true(d->sm_count > 0 && d->total_memory > 0);
    assert_contains(status, d->name);
    assert_contains(status, arch);
    assert_null(jx_cuda_device_describe(n));
  }
  assert_ptr_equal(jx_cuda_status(), status); /* computed once */
}

static void libraries_load_and_report_versions(void **state) {
  (void)state;
  const char *status = jx_cuda_status();
  char expect[64];
  if (jx_nvrtc_available()) {
    int major = 0, minor = 0;
    check_ok(jx_nvrtc_version(&major, &minor));
    assert_true(major >= 11);
    snprintf(expect, sizeof expect, "; NVRTC %d.%d", major, minor);
    assert_contains(status, expect);
  } else {
    printf("skipped NVRTC: %s\n", jx_nvrtc_load_error());
    assert_contains(status, "NVRTC not found");
  }
  const jx_cublaslt_api *lt = jx_cublaslt();
  if (lt) {
    size_t v = lt->GetVersion();
    assert_true(v >= 110000);
    snprintf(expect, sizeof expect, "; cuBLASLt %zu.%zu.%zu", v / 10000, v % 10000 / 100, v % 100);
    assert_contains(status, expect);
    assert_contains(lt->GetStatusName(0), "CUBLAS_STATUS_SUCCESS");
  } else {
    printf("skipped cuBLASLt: %s\n", jx_cublaslt_load_error());
    assert_contains(status, "cuBLASLt not found: tried libcublasLt.so");
  }
  if (jx_nccl()) {
    int major = 0, minor = 0, patch = 0, code = 0;
    check_ok(jx_nccl_version(&major, &minor, &patch));
    assert_int_equal(jx_nccl()->GetVersion(&code), JX_NCCL_SUCCESS);
    assert_int_equal(major, 2);
    assert_int_equal(code, major * 10000 + minor * 100 + patch);
    snprintf(expect, sizeof expect, "; NCCL %d.%d.%d", major, minor, patch);
    assert_contains(status, expect);
    assert_true(strlen(jx_nccl()->GetErrorString(3)) > 0);
  } else {
    printf("skipped NCCL: %s\n", jx_nccl_load_error());
    assert_contains(status, "NCCL not found: tried libnccl.so.2");
  }
  assert_int_equal(jx_last_status(), JX_OK);
}

/* ---- the allocator, on a mock device ---- */

typedef struct {
  size_t capacity, used; /* the mock device's memory */
  int allocs, frees, live;
} mock_device;

typedef struct {
  size_t size;
  max_align_t align;
} mock_header;

static int mock_alloc(void *ctx, size_t bytes, uint64_t *ptr) {
  mock_device *m = ctx;
  if (m->used + bytes > m->capacity) return 1;
  mock_header *h = malloc(sizeof *h + bytes);
  if (!h) return 1;
  h->size = bytes;
  memset(h + 1, 0xab, bytes); /* the whole class is the caller's */
  m->used += bytes;
  m->allocs++;
  m->live++;
  *ptr = (uint64_t)(uintptr_t)(h + 1);
  return 0;
}

static void mock_free(void *ctx, uint64_t ptr) {
  mock_device *m = ctx;
  mock_header *h = (mock_header *)(uintptr_t)ptr - 1;
  m->used -= h->size;
  m->frees++;
  m->live--;
  free(h);
}

static jx_cuda_allocator *mock_allocator(mock_device *m, size_t cap) {
  jx_cuda_allocator *a = jx_cuda_allocator_create((jx_cuda_memory_ops){mock_alloc, mock_free, m},
                                                  cap, "CUDA device 7 (Mock)");
  assert_non_null(a);
  return a;
}

static void size_classes_bound_the_waste(void **state) {
  (void)state;
  assert_int_equal(jx_cuda_size_class(0), 512);
  assert_int_equal(jx_cuda_size_class(1), 512);
  assert_int_equal(jx_cuda_size_class(512), 512);
  assert_int_equal(jx_cuda_size_class(513), 640);
  assert_int_equal(jx_cuda_size_class(1000), 1024);
  assert_int_equal(jx_cuda_size_class(1025), 1280);
  assert_int_equal(jx_cuda_size_class((size_t)3 << 20), (size_t)3 << 20);
  assert_int_equal(jx_cuda_size_class((size_t)64 << 20), (size_t)64 << 20);
  assert_int_equal(jx_cuda_size_class(((size_t)64 << 20) + 1), (size_t)66 << 20);
  assert_int_equal(jx_cuda_size_class((size_t)100 << 20), (size_t)100 << 20);
  size_t prev = 0;
  for (size_t b = 1; b < ((size_t)256 << 20); b = b * 9 / 8 + 1) {
    size_t c = jx_cuda_size_class(b);
    assert_true(c >= b && c >= prev);
    if (b > 512 && b <= ((size_t)64 << 20)) assert_true(c * 4 <= b * 5); /* <= 25 % over */
    if (b > ((size_t)64 << 20)) assert_true(c - b < ((size_t)2 << 20));
    assert_int_equal(jx_cuda_size_class(c), c); /* a class is its own class */
    prev = c;
  }
}

static void freed_blocks_are_reused(void **state) {
  (void)state;
  mock_device m = {(size_t)1 << 30, 0, 0, 0, 0};
  jx_cuda_allocator *a = mock_allocator(&m, 0);
  uint64_t p1 = 0, p2 = 0, p3 = 0, p4 = 0;
  check_ok(jx_cuda_allocator_alloc(a, 1000, &p1));
  memset((void *)(uintptr_t)p1, 1, 1024);
  check_ok(jx_cuda_allocator_alloc(a, 5000, &p2));
  jx_cuda_alloc_stats s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.in_use, 1024 + 5120);
  assert_int_equal(s.peak, 1024 + 5120);
  assert_int_equal(s.device_allocs, 2);
  check_ok(jx_cuda_allocator_free(a, p1));
  s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.in_use, 5120);
  assert_int_equal(s.cached, 1024);
  check_ok(jx_cuda_allocator_alloc(a, 900, &p3)); /* the same class: the same block */
  assert_true(p3 == p1);
  check_ok(jx_cuda_allocator_alloc(a, 1100, &p4)); /* another class: a new block */
  assert_true(p4 != p1 && p4 != p2);
  s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.reuses, 1);
  assert_int_equal(s.device_allocs, 3);
  assert_int_equal(m.allocs, 3);
  assert_int_equal(s.cached, 0);
  assert_int_equal(s.in_use, 1024 + 5120 + 1280);
  assert_int_equal(s.peak, 1024 + 5120 + 1280);
  check_ok(jx_cuda_allocator_free(a, p2));
  check_ok(jx_cuda_allocator_free(a, p3));
  check_ok(jx_cuda_allocator_free(a, 0));
  s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.in_use, 1280);
  assert_int_equal(s.cached, 1024 + 5120);
  assert_int_equal(s.peak, 1024 + 5120 + 1280);
  jx_cuda_allocator_trim(a);
  assert_int_equal(m.frees, 2);
  assert_int_equal(jx_cuda_allocator_stats(a).cached, 0);
  /* a pointer never handed out, and a double free, are errors, not crashes */
  assert_int_equal(jx_cuda_allocator_free(a, p2), JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "CUDA device 7 (Mock): freeing 0x");
  assert_contains(jx_last_error(), "did not hand out (or freed twice)");
  jx_clear_error();
  jx_cuda_allocator_destroy(a); /* returns the block still in use, too */
  assert_int_equal(m.live, 0);
  assert_int_equal(m.used, 0);
}

static void cap_refuses_with_a_clear_message(void **state) {
  (void)state;
  mock_device m = {(size_t)1 << 30, 0, 0, 0, 0};
  jx_cuda_allocator *a = mock_allocator(&m, 4096);
  uint64_t p = 0, q = 0;
  check_ok(jx_cuda_allocator_alloc(a, 3000, &p)); /* class 3072 */
  assert_int_equal(jx_cuda_allocator_alloc(a, 2000, &q), JX_ERR_OUT_OF_MEMORY);
  assert_true(q == 0);
  const char *e = jx_last_error();
  assert_contains(e, "CUDA device 7 (Mock): out of memory allocating 1.95 KiB (size class 2.00 "
                     "KiB): 3.00 KiB in use, 0 B cached, peak 3.00 KiB");
  assert_contains(e, "the cap of 4.00 KiB (JX_CUDA_MEMORY_CAP)");
  jx_clear_error();
  /* a cached block is released to make room under the cap */
  check_ok(jx_cuda_allocator_free(a, p));
  check_ok(jx_cuda_allocator_alloc(a, 2000, &q));
  jx_cuda_alloc_stats s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.trims, 1);
  assert_int_equal(s.cached, 0);
  assert_int_equal(s.in_use, 2048);
  assert_int_equal(m.frees, 1);
  jx_cuda_allocator_destroy(a);
  assert_int_equal(m.live, 0);
}

static void full_device_trims_and_retries_once(void **state) {
  (void)state;
  mock_device m = {8192, 0, 0, 0, 0}; /* the device itself holds 8 KiB */
  jx_cuda_allocator *a = mock_allocator(&m, 0);
  uint64_t p = 0, q = 0, r = 0;
  check_ok(jx_cuda_allocator_alloc(a, 4096, &p));
  check_ok(jx_cuda_allocator_alloc(a, 2048, &q));
  check_ok(jx_cuda_allocator_free(a, p));         /* 4 KiB cached, 2 KiB in use */
  check_ok(jx_cuda_allocator_alloc(a, 5000, &r)); /* 5120: fits only once the cache is gone */
  jx_cuda_alloc_stats s = jx_cuda_allocator_stats(a);
  assert_int_equal(s.trims, 1);
  assert_int_equal(m.frees, 1);
  assert_int_equal(s.in_use, 2048 + 5120);
  assert_int_equal(s.peak, 2048 + 5120);
  /* nothing cached and still no room: the error, after one attempt at the device */
  int before = m.allocs;
  uint64_t t = 0;
  assert_int_equal(jx_cuda_allocator_alloc(a, 4096, &t), JX_ERR_OUT_OF_MEMORY);
  assert_int_equal(m.allocs, before);
  assert_contains(jx_last_error(), "out of memory allocating 4.00 KiB (size class 4.00 KiB): "
                                   "7.00 KiB in use, 0 B cached, peak 7.00 KiB; the device has "
                                   "no more free memory");
  jx_clear_error();
  jx_cuda_allocator_destroy(a);
  assert_int_equal(m.live, 0);
}

static void cap_parses_bytes_and_shares(void **state) {
  (void)state;
  size_t cap = 1;
  check_ok(jx_cuda_memory_cap_parse(NULL, 1000, &cap));
  assert_int_equal(cap, 0);
  check_ok(jx_cuda_memory_cap_parse("80%", 1000, &cap));
  assert_int_equal(cap, 800);
  check_ok(jx_cuda_memory_cap_parse("40G", 0, &cap));
  assert_int_equal(cap, (size_t)40 << 30);
  check_ok(jx_cuda_memory_cap_parse("512MiB", 0, &cap));
  assert_int_equal(cap, (size_t)512 << 20);
  check_ok(jx_cuda_memory_cap_parse("1000000", 0, &cap));
  assert_int_equal(cap, 1000000);
  const char *bad[] = {"abc", "150%", "-5G", "12X", "0"};
  for (int i = 0; i < 5; i++) {
    jx_clear_error();
    assert_int_equal(jx_cuda_memory_cap_parse(bad[i], 1000, &cap), JX_ERR_INVALID_ARGUMENT);
    assert_contains(jx_last_error(), "JX_CUDA_MEMORY_CAP='");
    assert_contains(jx_last_error(), bad[i]);
  }
  jx_clear_error();
}

/* ---- the GEMM's mapping: cuBLASLt's column-major problem, computed here,
 * gives the row-major product ---- */

static double op_at(const double *m, int op, int64_t ld, int64_t i, int64_t j) {
  /* element (i, j) of op(M) for a column-major M */
  return op == JX_CUBLAS_OP_N ? m[i + j * ld] : m[j + i * ld];
}

static double act(jx_cuda_act a, double v) { return a == JX_CUDA_ACT_RELU ? (v > 0 ? v : 0) : v; }

static void check_mapping(int trans_a, int trans_b, int64_t batch, int64_t stride_b, int bias) {
  const int64_t m = 3, n = 4, k = 5;
  jx_cuda_gemm_desc d = {JX_F32,  m,     n,        k,     batch, trans_a,
                         trans_b, m * k, stride_b, m * n, bias,  JX_CUDA_ACT_RELU,
                         0,       0,     0,        0,     0,     0};
  jx_cuda_colmajor p;
  check_ok(jx_cuda_gemm_plan(&d, &p));
  assert_int_equal(p.rows, n);
  assert_int_equal(p.cols, m);
  assert_int_equal(p.inner, k);
  assert_int_equal(p.epilogue, bias ? 6 : 2); /* RELU_BIAS, RELU */
  double A[4 * 15], B[4 * 20], bvec[4], C[4 * 12], D[4 * 12];
  for (int i = 0; i < 4 * 15; i++) A[i] = (double)((i * 7) % 11) - 5;
  for (int i = 0; i < 4 * 20; i++) B[i] = (double)((i * 5) % 13) - 6;
  for (int i = 0; i < 4; i++) bvec[i] = i - 1.5;
  for (int64_t b = 0; b < batch; b++) {
    const double *a = A + b * d.stride_a, *bb = B + b * stride_b;
    /* the row-major reference: C[i][j] = act(sum_p opA[i][p] opB[p][j] + bias[j]) */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t q = 0; q < k; q++)
          s += (trans_a ? a[q * m + i] : a[i * k + q]) * (trans_b ? bb[j * k + q] : bb[q * n + j]);
        C[b * d.stride_c + i * n + j] = act(d.act, s + (bias ? bvec[j] : 0));
      }
    /* what cuBLASLt computes from the plan: D = op(x) op(y), x = B's memory, y = A's */
    const double *x = B + b * p.x.stride, *y = A + b * p.y.stride;
    for (int64_t i = 0; i < p.rows; i++)
      for (int64_t j = 0; j < p.cols; j++) {
        double s = 0;
        for (int64_t q = 0; q < p.inner; q++)
          s += op_at(x, p.x.op, p.x.ld, i, q) * op_at(y, p.y.op, p.y.ld, q, j);
        D[b * p.d.stride + i + j * p.d.ld] = act(d.act, s + (bias ? bvec[i] : 0));
      }
    /* the stored shapes agree with the operands' sizes */
    int64_t xr = p.x.op == JX_CUBLAS_OP_N ? p.rows : p.inner;
    int64_t yr = p.y.op == JX_CUBLAS_OP_N ? p.inner : p.cols;
    assert_int_equal(p.x.rows, xr);
    assert_int_equal(p.y.rows, yr);
    assert_int_equal(p.x.rows * p.x.cols, n * k);
    assert_int_equal(p.y.rows * p.y.cols, m * k);
  }
  for (int64_t i = 0; i < batch * m * n; i++) assert_true(C[i] == D[i]);
}

static void row_major_maps_to_column_major(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      check_mapping(ta, tb, 1, 0, 0);
      check_mapping(ta, tb, 1, 0, 1);
      check_mapping(ta, tb, 4, 20, 1); /* batched */
      check_mapping(ta, tb, 4, 0, 0);  /* B shared by every problem */
    }
  jx_cuda_gemm_desc d = {JX_BF16, 8, 8, 8, 1, 0, 0, 0, 0, 0, 1, JX_CUDA_ACT_GELU, 0, 0, 0, 0, 0, 0};
  jx_cuda_colmajor p;
  check_ok(jx_cuda_gemm_plan(&d, &p));
  assert_int_equal(p.epilogue, 36); /* GELU_BIAS */
  d.has_bias = 0;
  d.act = JX_CUDA_ACT_NONE;
  check_ok(jx_cuda_gemm_plan(&d, &p));
  assert_int_equal(p.epilogue, 1); /* DEFAULT */
  d.dtype = JX_I32;
  assert_int_equal(jx_cuda_gemm_plan(&d, &p), JX_ERR_DTYPE);
  assert_contains(jx_last_error(), "jx_cuda_gemm: dtype i32 is not f32, bf16 or f16");
  jx_clear_error();
  d.dtype = JX_F16;
  d.batch = 2;
  d.stride_c = 10; /* < m*n: the two outputs would overlap */
  assert_int_equal(jx_cuda_gemm_plan(&d, &p), JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "c=10 >= m*n=64");
  jx_clear_error();
  d.batch = 1;
  d.k = 0;
  assert_int_equal(jx_cuda_gemm_plan(&d, &p), JX_ERR_SHAPE);
  jx_clear_error();
}

static void algorithm_key_separates_problems(void **state) {
  (void)state;
  const jx_cuda_gemm_desc base = {JX_BF16,          64, 32, 16, 2, 0, 1, 1024, 512, 2048, 1,
                                  JX_CUDA_ACT_GELU, 0,  0,  0,  0, 0, 0};
  uint64_t k0 = jx_cuda_gemm_key(&base, &jx_cuda_gemm_aligned, 0);
  assert_true(k0 == jx_cuda_gemm_key(&base, &jx_cuda_gemm_aligned, 0));
  assert_true(k0 != jx_cuda_gemm_key(&base, &jx_cuda_gemm_aligned, 1));
  uint64_t seen[20];
  int n = 0;
  seen[n++] = k0;
  /* each operand's alignment separates too */
  for (int op = 0; op < 4; op++) {
    jx_cuda_gemm_align al = jx_cuda_gemm_aligned;
    uint32_t *field = op == 0 ? &al.a : op == 1 ? &al.b : op == 2 ? &al.c : &al.bias;
    *field = 2;
    uint64_t k = jx_cuda_gemm_key(&base, &al, 0);
    for (int i = 0; i < n; i++) assert_true(k != seen[i]);
    seen[n++] = k;
  }
  for (int field = 0; field < 12; field++) {
    jx_cuda_gemm_desc d = base;
    switch (field) {
    case 0: d.dtype = JX_F16; break;
    case 1: d.m++; break;
    case 2: d.n++; break;
    case 3: d.k++; break;
    case 4: d.batch++; break;
    case 5: d.trans_a = 1; break;
    case 6: d.trans_b = 0; break;
    case 7: d.stride_a++; break;
    case 8: d.stride_b = 0; break;
    case 9: d.stride_c++; break;
    case 10: d.has_bias = 0; break;
    case 11: d.act = JX_CUDA_ACT_RELU; break;
    }
    uint64_t k = jx_cuda_gemm_key(&d, &jx_cuda_gemm_aligned, 0);
    for (int i = 0; i < n; i++) assert_true(k != seen[i]);
    seen[n++] = k;
  }
  /* one problem: its strides do not matter */
  jx_cuda_gemm_desc one = base, other = base;
  one.batch = other.batch = 1;
  other.stride_a = 7;
  other.stride_c = 0;
  assert_true(jx_cuda_gemm_key(&one, &jx_cuda_gemm_aligned, 0) ==
              jx_cuda_gemm_key(&other, &jx_cuda_gemm_aligned, 0));
}

/* ---- NCCL's deadline, on a fake clock ---- */

typedef struct {
  int polls, done_after, error_at, aborts, pauses;
  ncclResult_t error;
  double clock;
} fake_collective;

static int fake_done(void *ctx) {
  fake_collective *f = ctx;
  return ++f->polls >= f->done_after;
}
static ncclResult_t fake_async_error(void *ctx) {
  fake_collective *f = ctx;
  if (f->error_at && f->polls >= f->error_at) return f->error;
  return f->polls == 1 ? JX_NCCL_IN_PROGRESS : JX_NCCL_SUCCESS; /* in progress is no error */
}
static void fake_abort(void *ctx) { ((fake_collective *)ctx)->aborts++; }
static double fake_now(void *ctx) { return ((fake_collective *)ctx)->clock; }
static void fake_pause(void *ctx) {
  fake_collective *f = ctx;
  f->pauses++;
  f->clock += 1.0;
}
static const char *fake_error_string(void *ctx, ncclResult_t r) {
  (void)ctx;
  return r == 6 ? "remote process exited or there was a network error" : "other";
}

static jx_status fake_wait(fake_collective *f, double timeout) {
  jx_nccl_wait_hooks h = {fake_done,  fake_async_error,  fake_abort, fake_now,
                          fake_pause, fake_error_string, f};
  return jx_nccl_wait_hooked(&h, timeout, "data", 1, 4);
}

static void nccl_deadline_aborts_and_names_the_ranks(void **state) {
  (void)state;
  fake_collective f = {.done_after = 3};
  check_ok(fake_wait(&f, 10));
  assert_int_equal(f.polls, 3);
  assert_int_equal(f.pauses, 2);
  assert_int_equal(f.aborts, 0);

  f = (fake_collective){.done_after = 1000};
  assert_int_equal(fake_wait(&f, 5), JX_ERR_TIMEOUT);
  assert_int_equal(f.aborts, 1);
  assert_true(f.clock == 5.0); /* gave up at the deadline, not before or long after */
  assert_contains(jx_last_error(), "NCCL: communicator 'data' (rank 1 of 4): the collective did "
                                   "not finish within 5 s; the communicator was aborted");
  jx_clear_error();

  f = (fake_collective){.done_after = 1000, .error_at = 4, .error = 6};
  assert_int_equal(fake_wait(&f, 0), JX_ERR_INTERNAL); /* no deadline: the error ends it */
  assert_int_equal(f.polls, 4);
  assert_int_equal(f.aborts, 1);
  assert_contains(jx_last_error(), "NCCL: communicator 'data' (rank 1 of 4): remote process "
                                   "exited or there was a network error; the communicator was "
                                   "aborted");
  jx_clear_error();
}

/* ---- the cubin cache ---- */

static const char *kernel_source(char *buf, size_t cap) {
  /* the process id makes the source, and so its cache entry, new to every run */
  snprintf(buf, cap,
           "// test_cuda_runtime %d\n"
           "extern \"C\" __global__ void jx_add_one(float *x, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] += 1.0f;\n"
           "}\n",
           (int)getpid());
  return buf;
}

static void use_fresh_cache_dir(void) {
  const char *tmp = getenv("TMPDIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/jx-cubins-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(dir));
  setenv("JX_CACHE_DIR", dir, 1);
}

static void damage(const char *path, long at, int truncate_to) {
  if (truncate_to >= 0) {
    assert_int_equal(truncate(path, truncate_to), 0);
    return;
  }
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

static void cubins_are_cached_on_disk(void **state) {
  (void)state;
  if (!jx_nvrtc_available()) {
    printf("skipped: %s\n", jx_nvrtc_load_error());
    return;
  }
  use_fresh_cache_dir();
  char src[512];
  kernel_source(src, sizeof src);
  const void *image = NULL, *again = NULL;
  size_t size = 0, size2 = 0;
  jx_cubin_cache *c1 = jx_cubin_cache_create();
  check_ok(jx_cubin_cache_get(c1, src, "add_one.cu", "sm_90", &image, &size));
  assert_true(size > 4 && !memcmp(image,
                                  "\x7f"
                                  "ELF",
                                  4)); /* a cubin is an ELF image */
  check_ok(jx_cubin_cache_get(c1, src, "add_one.cu", "sm_90", &again, &size2));
  assert_true(again == image);
  jx_cubin_stats s = jx_cubin_cache_stats(c1);
  assert_int_equal(s.compiles, 1);
  assert_int_equal(s.memory_hits, 1);
  assert_int_equal(s.disk_hits, 0);

  /* a fresh cache object (as in a new process) finds the entry on disk */
  jx_cubin_cache *c2 = jx_cubin_cache_create();
  check_ok(jx_cubin_cache_get(c2, src, "add_one.cu", "sm_90", &again, &size2));
  s = jx_cubin_cache_stats(c2);
  assert_int_equal(s.compiles, 0);
  assert_int_equal(s.disk_hits, 1);
  assert_int_equal(size2, size);
  assert_memory_equal(again, image, size);
  /* another architecture is another entry */
  check_ok(jx_cubin_cache_get(c2, src, "add_one.cu", "sm_80", &again, &size2));
  assert_int_equal(jx_cubin_cache_stats(c2).compiles, 1);
  jx_cubin_cache_destroy(c2);

  /* a damaged byte of the payload, then a truncated file: detected, rebuilt */
  char path[1200];
  check_ok(jx_cubin_cache_path(src, "sm_90", path, sizeof path));
  assert_int_equal(access(path, R_OK), 0);
  for (int trial = 0; trial < 2; trial++) {
    if (trial == 0)
      damage(path, 40 + (long)size / 2, -1);
    else
      damage(path, 0, 10);
    jx_cubin_cache *c3 = jx_cubin_cache_create();
    check_ok(jx_cubin_cache_get(c3, src, "add_one.cu", "sm_90", &again, &size2));
    s = jx_cubin_cache_stats(c3);
    assert_int_equal(s.corrupt, 1);
    assert_int_equal(s.compiles, 1);
    assert_int_equal(s.disk_hits, 0);
    assert_int_equal(size2, size);
    assert_memory_equal(again, image, size); /* NVRTC is deterministic */
    jx_cubin_cache_destroy(c3);
  }
  /* and the rebuilt entry is whole again */
  jx_cubin_cache *c4 = jx_cubin_cache_create();
  check_ok(jx_cubin_cache_get(c4, src, "add_one.cu", "sm_90", &again, &size2));
  assert_int_equal(jx_cubin_cache_stats(c4).disk_hits, 1);
  assert_int_equal(jx_cubin_cache_get(c4, src, "add_one.cu", "compute_90", &again, &size2),
                   JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "architecture 'compute_90' is not of the form sm_XX");
  jx_clear_error();
  jx_cubin_cache_destroy(c4);
  jx_cubin_cache_destroy(c1);
}

/* ---- on a GPU, where there is one ---- */

static jx_cuda_device *gpu(void) {
  if (jx_cuda_probe() == 0) {
    printf("skipped: no CUDA device: %s\n", jx_cuda_probe_error());
    return NULL;
  }
  jx_cuda_device *d = NULL;
  check_ok(jx_cuda_device_open(0, &d));
  return d;
}

static void gpu_copies_round_trip(void **state) {
  (void)state;
  jx_cuda_device *d = gpu();
  if (!d) return;
  const size_t n = JX_CUDA_STAGING_BYTES * 5 / 2 + 12345; /* three chunks, the last partial */
  unsigned char *host = malloc(n), *back = malloc(n);
  assert_true(host && back);
  for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 31 + (i >> 13));
  uint64_t p = 0;
  check_ok(jx_cuda_allocator_alloc(d->memory, n, &p));
  check_ok(jx_cuda_copy_to_device(d, p, host, n, d->copy));
  memset(back, 0, n);
  check_ok(jx_cuda_copy_to_host(d, back, p, n, d->copy));
  assert_memory_equal(back, host, n);
  check_ok(jx_cuda_allocator_free(d->memory, p));
  free(host);
  free(back);
}

static void gpu_kernel_runs(void **state) {
  (void)state;
  jx_cuda_device *d = gpu();
  if (!d) return;
  use_fresh_cache_dir();
  jx_cubin_cache *cache = jx_cubin_cache_create();
  char src[512];
  jx_cuda_module *m = NULL;
  const char *names[] = {"jx_add_one"};
  check_ok(
      jx_cuda_module_load(d, cache, kernel_source(src, sizeof src), "add_one.cu", names, 1, &m));
  enum { N = 1000 };
  float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i * 0.5f;
  uint64_t p = 0;
  check_ok(jx_cuda_allocator_alloc(d->memory, sizeof x, &p));
  check_ok(jx_cuda_copy_to_device(d, p, x, sizeof x, d->compute));
  CUdeviceptr arg = p;
  int n = N;
  void *params[] = {&arg, &n};
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  check_ok(jx_cuda_check(cu->LaunchKernel(m->functions[0], (N + 255) / 256, 1, 1, 256, 1, 1, 0,
                                          d->compute, params, NULL),
                         "cuLaunchKernel", 0));
  check_ok(jx_cuda_copy_to_host(d, y, p, sizeof y, d->compute));
  for (int i = 0; i < N; i++) assert_true(y[i] == x[i] + 1.0f);
  check_ok(jx_cuda_allocator_free(d->memory, p));
  jx_cuda_module_unload(m);
  jx_cubin_cache_destroy(cache);
}

static void gpu_gemm_matches_the_cpu(void **state) {
  (void)state;
  jx_cuda_device *d = gpu();
  if (!d) return;
  if (!jx_cublaslt()) {
    printf("skipped: %s\n", jx_cublaslt_load_error());
    return;
  }
  /* small integers: every product and sum is exact in f32 */
  enum { M = 33, N = 17, K = 40, B = 3 };
  float a[B * M * K], b[K * N], bias[N], c[B * M * N];
  for (int i = 0; i < B * M * K; i++) a[i] = (float)((i * 7) % 9) - 4;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 7) - 3;
  for (int i = 0; i < N; i++) bias[i] = (float)i - 8;
  uint64_t pa, pb, pc, pbias, ws;
  check_ok(jx_cuda_allocator_alloc(d->memory, sizeof a, &pa));
  check_ok(jx_cuda_allocator_alloc(d->memory, sizeof b, &pb));
  check_ok(jx_cuda_allocator_alloc(d->memory, sizeof c, &pc));
  check_ok(jx_cuda_allocator_alloc(d->memory, sizeof bias, &pbias));
  check_ok(jx_cuda_allocator_alloc(d->memory, (size_t)32 << 20, &ws));
  check_ok(jx_cuda_copy_to_device(d, pa, a, sizeof a, d->compute));
  check_ok(jx_cuda_copy_to_device(d, pb, b, sizeof b, d->compute));
  check_ok(jx_cuda_copy_to_device(d, pbias, bias, sizeof bias, d->compute));
  jx_cuda_blas *blas = NULL;
  check_ok(jx_cuda_blas_create(0, ws, (size_t)32 << 20, &blas));
  jx_cuda_gemm_desc g = {JX_F32,           M, N, K, B, 0, 0, M * K, 0, M * N, 1,
                         JX_CUDA_ACT_RELU, 0, 0, 0, 0, 0, 0};
  for (int rep = 0; rep < 2; rep++) check_ok(jx_cuda_gemm(blas, &g, pa, pb, pc, pbias, d->compute));
  check_ok(jx_cuda_copy_to_host(d, c, pc, sizeof c, d->compute));
  for (int q = 0; q < B; q++)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) {
        float s = bias[j];
        for (int p = 0; p < K; p++) s += a[q * M * K + i * K + p] * b[p * N + j];
        assert_true(c[q * M * N + i * N + j] == (s > 0 ? s : 0));
      }
  int64_t calls = 0, hits = 0;
  jx_cuda_blas_counts(blas, &calls, &hits);
  assert_int_equal(calls, 1); /* the second GEMM found its algorithm cached */
  assert_int_equal(hits, 1);
  jx_cuda_blas_destroy(blas);
  uint64_t ptrs[] = {pa, pb, pc, pbias, ws};
  for (int i = 0; i < 5; i++) check_ok(jx_cuda_allocator_free(d->memory, ptrs[i]));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(missing_library_names_what_was_tried, setup, teardown),
      cmocka_unit_test_setup_teardown(symbols_resolve_with_fallbacks, setup, teardown),
      cmocka_unit_test_setup_teardown(driver_absence_is_reported_cleanly, setup, teardown),
      cmocka_unit_test_setup_teardown(libraries_load_and_report_versions, setup, teardown),
      cmocka_unit_test_setup_teardown(size_classes_bound_the_waste, setup, teardown),
      cmocka_unit_test_setup_teardown(freed_blocks_are_reused, setup, teardown),
      cmocka_unit_test_setup_teardown(cap_refuses_with_a_clear_message, setup, teardown),
      cmocka_unit_test_setup_teardown(full_device_trims_and_retries_once, setup, teardown),
      cmocka_unit_test_setup_teardown(cap_parses_bytes_and_shares, setup, teardown),
      cmocka_unit_test_setup_teardown(row_major_maps_to_column_major, setup, teardown),
      cmocka_unit_test_setup_teardown(algorithm_key_separates_problems, setup, teardown),
      cmocka_unit_test_setup_teardown(nccl_deadline_aborts_and_names_the_ranks, setup, teardown),
      cmocka_unit_test_setup_teardown(cubins_are_cached_on_disk, setup, teardown),
      cmocka_unit_test_setup_teardown(gpu_copies_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(gpu_kernel_runs, setup, teardown),
      cmocka_unit_test_setup_teardown(gpu_gemm_matches_the_cpu, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
