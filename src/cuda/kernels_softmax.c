/* The fused row softmax's source and launch (kernels_softmax.h). */
#include "kernels_softmax.h"

#include <string.h>

#include "../base/error.h"
#include "kernels_io.h"

_Static_assert(sizeof(jx_cuda_softmax_args) == 32, "jx_cuda_softmax_args has padding");
_Static_assert(sizeof(jx_cuda_xent_args) == 80, "jx_cuda_xent_args has padding");

const char jx_cuda_softmax_src[] = JX_CUDA_IO_SRC
    "typedef struct {\n"
    "  const void *x;\n"
    "  void *y;\n"
    "  long long rows, cols;\n"
    "} jx_cuda_softmax_args;\n"
    "typedef struct {\n"
    "  const void *x;\n"
    "  const float *label;\n"
    "  float *picked, *max, *sum;\n"
    "  const float *scale, *at_label;\n"
    "  void *grad;\n"
    "  long long rows, cols;\n"
    "} jx_cuda_xent_args;\n"
    /* the block's max or sum of v: shuffles within each warp, then warp 0
     * over the warps' results (blockDim.x is a multiple of 32); every
     * thread gets the result; `part` is reused by the next call */
    "static __device__ __forceinline__ float jx_sm_combine(float a, float b, int is_max) {\n"
    "  return is_max ? fmaxf(a, b) : a + b;\n"
    "}\n"
    "static __device__ float jx_sm_block_reduce(float v, int is_max, float *part) {\n"
    "  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "  const unsigned nwarps = blockDim.x / 32;\n"
    "  for (int o = 16; o > 0; o >>= 1) v = jx_sm_combine(v, __shfl_xor_sync(0xffffffffu, v, o), "
    "is_max);\n"
    "  if (lane == 0) part[warp] = v;\n"
    "  __syncthreads();\n"
    "  if (warp == 0) {\n"
    "    float w = lane < nwarps ? part[lane] : (is_max ? __int_as_float(0xff800000) : 0.0f);\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "      w = jx_sm_combine(w, __shfl_xor_sync(0xffffffffu, w, o), is_max);\n"
    "    if (lane == 0) part[32] = w;\n"
    "  }\n"
    "  __syncthreads();\n"
    "  const float r = part[32];\n"
    "  __syncthreads();\n"
    "  return r;\n"
    "}\n"
    /* three passes over the row (max; sum of exp(x - max); the outputs):
     * the row is read three times, from cache after the first for rows of
     * up to a few hundred KB, and never written in between */
    "template <class T> static __device__ void jx_sm_rows(const jx_cuda_softmax_args a) {\n"
    "  __shared__ float part[33];\n"
    "  const T *x = (const T *)a.x;\n"
    "  T *y = (T *)a.y;\n"
    "  for (long long row = blockIdx.x; row < a.rows; row += gridDim.x) {\n"
    "    const long long base = row * a.cols;\n"
    "    float m = __int_as_float(0xff800000);\n"
    "    for (long long j = threadIdx.x; j < a.cols; j += blockDim.x)\n"
    "      m = fmaxf(m, jx_cu_load(x, base + j));\n"
    "    m = jx_sm_block_reduce(m, 1, part);\n"
    /* fmaxf skips NaNs: a row with one gives NaNs anyway, through exp */
    "    float s = 0.0f;\n"
    "    for (long long j = threadIdx.x; j < a.cols; j += blockDim.x)\n"
    "      s += expf(jx_cu_load(x, base + j) - m);\n"
    "    s = jx_sm_block_reduce(s, 0, part);\n"
    "    const float inv = 1.0f / s;\n"
    "    for (long long j = threadIdx.x; j < a.cols; j += blockDim.x)\n"
    "      jx_cu_store(y, base + j, expf(jx_cu_load(x, base + j) - m) * inv);\n"
    "  }\n"
    "}\n"
    /* the vocabulary's cross-entropy (kernels_softmax.h): one read of
     * each row for the forward, a running max and the sum of exp(x - max)
     * rescaled when the max grows (a second read only for a row whose max
     * is not finite, which the program shifts by 0 instead) */
    "struct jx_xe_part {\n  float m, s;\n};\n"
    "static __device__ __forceinline__ jx_xe_part jx_xe_merge(jx_xe_part a, jx_xe_part b) {\n"
    "  const float m = fmaxf(a.m, b.m);\n"
    "  if (m == __int_as_float(0xff800000)) return a;\n"
    "  jx_xe_part r;\n  r.m = m;\n"
    "  r.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);\n"
    "  return r;\n}\n"
    "template <class T> static __device__ void jx_xe_forward(const jx_cuda_xent_args a) {\n"
    "  __shared__ float part[33];\n"
    "  __shared__ jx_xe_part pairs[33];\n"
    "  const T *x = (const T *)a.x;\n"
    "  for (long long row = blockIdx.x; row < a.rows; row += gridDim.x) {\n"
    "    const long long base = row * a.cols;\n"
    "    jx_xe_part p;\n    p.m = __int_as_float(0xff800000);\n    p.s = 0.0f;\n"
    "    float bad = 0.0f;\n"
    "    for (long long j = threadIdx.x; j < a.cols; j += blockDim.x) {\n"
    "      const float v = jx_cu_load(x, base + j);\n"
    "      if (v != v) bad = 1.0f;\n"
    "      else if (v > p.m) {\n"
    "        p.s = p.s * expf(p.m - v) + 1.0f;\n        p.m = v;\n"
    "      } else if (v != __int_as_float(0xff800000))\n"
    "        p.s += expf(v - p.m);\n"
    "    }\n"
    /* the pairs over the block: warp shuffles, then warp 0 over the warps */
    "    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "    for (int o = 16; o > 0; o >>= 1) {\n"
    "      jx_xe_part q;\n"
    "      q.m = __shfl_xor_sync(0xffffffffu, p.m, o);\n"
    "      q.s = __shfl_xor_sync(0xffffffffu, p.s, o);\n"
    "      p = jx_xe_merge(p, q);\n"
    "    }\n"
    "    if (lane == 0) pairs[warp] = p;\n"
    "    __syncthreads();\n"
    "    if (warp == 0) {\n"
    "      jx_xe_part w;\n      w.m = __int_as_float(0xff800000);\n      w.s = 0.0f;\n"
    "      if (lane < blockDim.x / 32) w = pairs[lane];\n"
    "      for (int o = 16; o > 0; o >>= 1) {\n"
    "        jx_xe_part q;\n"
    "        q.m = __shfl_xor_sync(0xffffffffu, w.m, o);\n"
    "        q.s = __shfl_xor_sync(0xffffffffu, w.s, o);\n"
    "        w = jx_xe_merge(w, q);\n"
    "      }\n"
    "      if (lane == 0) pairs[32] = w;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    p = pairs[32];\n"
    "    __syncthreads();\n"
    /* a NaN anywhere in the row */
    "    bad = jx_sm_block_reduce(bad, 1, part);\n"
    "    const float m = bad != 0.0f ? __int_as_float(0x7fc00000) : p.m;\n"
    "    const int finite = m - m == 0.0f;\n"
    "    float s = p.s;\n"
    "    if (!finite) {\n"
    "      s = 0.0f;\n"
    "      for (long long j = threadIdx.x; j < a.cols; j += blockDim.x) s += expf(jx_cu_load(x, "
    "base + j));\n"
    "      s = jx_sm_block_reduce(s, 0, part);\n"
    "    }\n"
    "    if (threadIdx.x == 0) {\n"
    "      a.max[row] = finite ? m : 0.0f;\n"
    "      a.sum[row] = s;\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* the label's logit, a thread a row: the one column whose index equals
     * the label (as the program compares them, in f32), 0 + its value as
     * the select-sum adds it to zeros; 0 where none does */
    "template <class T> static __device__ void jx_xe_pick(const jx_cuda_xent_args a) {\n"
    "  const T *x = (const T *)a.x;\n"
    "  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < a.rows;\n"
    "       row += (long long)gridDim.x * blockDim.x) {\n"
    "    const float label = a.label[row];\n"
    "    const long long j = label >= 0.0f && label < (float)a.cols ? (long long)label : -1;\n"
    "    a.picked[row] = j >= 0 && (float)j == label ? 0.0f + jx_cu_load(x, row * a.cols + j) : "
    "0.0f;\n"
    "  }\n"
    "}\n"
    /* the gradient, an element a thread: scale * exp(x - max) plus, at the
     * label, the label's term; the unfused kernels' operations in their
     * order */
    "template <class T> static __device__ void jx_xe_backward(const jx_cuda_xent_args a) {\n"
    "  const T *x = (const T *)a.x;\n"
    "  T *g = (T *)a.grad;\n"
    "  for (long long row = blockIdx.x; row < a.rows; row += gridDim.x) {\n"
    "    const long long base = row * a.cols;\n"
    "    const float label = a.label[row], m = a.max[row], k = a.scale[row], t = a.at_label[row];\n"
    "    for (long long j = threadIdx.x; j < a.cols; j += blockDim.x)\n"
    "      jx_cu_store(g, base + j, k * expf(jx_cu_load(x, base + j) - m) + ((float)j == label ? t "
    ": 0.0f));\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void jx_softmax_f32(const jx_cuda_softmax_args a) {\n"
    "  jx_sm_rows<float>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_softmax_bf16(const jx_cuda_softmax_args a) {\n"
    "  jx_sm_rows<unsigned short>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_forward_f32(const jx_cuda_xent_args a) {\n"
    "  jx_xe_forward<float>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_forward_bf16(const jx_cuda_xent_args a) {\n"
    "  jx_xe_forward<unsigned short>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_backward_f32(const jx_cuda_xent_args a) {\n"
    "  jx_xe_backward<float>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_backward_bf16(const jx_cuda_xent_args a) {\n"
    "  jx_xe_backward<unsigned short>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_pick_f32(const jx_cuda_xent_args a) {\n"
    "  jx_xe_pick<float>(a);\n"
    "}\n"
    "extern \"C\" __global__ void jx_xent_pick_bf16(const jx_cuda_xent_args a) {\n"
    "  jx_xe_pick<unsigned short>(a);\n"
    "}\n";

const char *jx_cuda_xent_kernel(jx_dtype dt, jx_cuda_xent_part part) {
  static const char *const names[3][2] = {{"jx_xent_forward_f32", "jx_xent_forward_bf16"},
                                          {"jx_xent_pick_f32", "jx_xent_pick_bf16"},
                                          {"jx_xent_backward_f32", "jx_xent_backward_bf16"}};
  if ((dt != JX_F32 && dt != JX_BF16) || part < 0 || part > 2) return NULL;
  return names[part][dt == JX_BF16];
}

jx_status jx_cuda_xent_pick_geometry(int64_t rows, jx_cuda_launch_dims *out) {
  if (!out || rows < 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_cuda_xent_pick_geometry: %s (rows %lld)",
                        out ? "negative size" : "out is NULL", (long long)rows);
  memset(out, 0, sizeof *out);
  if (rows == 0) return JX_OK;
  int64_t blocks = (rows + 255) / 256;
  out->grid[0] = (unsigned)(blocks < 65535 ? blocks : 65535);
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = 256;
  out->block[1] = out->block[2] = 1;
  return JX_OK;
}

const char *jx_cuda_softmax_kernel(jx_dtype dt) {
  return dt == JX_F32 ? "jx_softmax_f32" : dt == JX_BF16 ? "jx_softmax_bf16" : NULL;
}

jx_status jx_cuda_softmax_geometry(int64_t rows, int64_t cols, jx_cuda_launch_dims *out) {
  if (!out || rows < 0 || cols < 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_cuda_softmax_geometry: %s (rows %lld, cols %lld)",
                        out ? "negative size" : "out is NULL", (long long)rows, (long long)cols);
  memset(out, 0, sizeof *out);
  if (rows == 0 || cols == 0) return JX_OK;
  /* a thread per 4 columns, at least a warp, at most 8 warps */
  int64_t threads = (cols + 3) / 4;
  threads = (threads + 31) / 32 * 32;
  if (threads > 256) threads = 256;
  out->grid[0] = (unsigned)(rows < 65535 ? rows : 65535);
  out->grid[1] = out->grid[2] = 1;
  out->block[0] = (unsigned)threads;
  out->block[1] = out->block[2] = 1;
  return JX_OK;
}
