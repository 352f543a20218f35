/* The flash-style attention kernels' source and launch
 * (kernels_attention.h). */
#include "kernels_attention.h"

#include <string.h>

#include "../base/error.h"
#include "kernels_io.h"

_Static_assert(sizeof(jx_cuda_attention_args) == 72, "jx_cuda_attention_args has padding");

const char jx_cuda_attention_src[] =
    "#define JX_AT_BR 16 /* query rows a block */\n"
    "#define JX_AT_BC 32 /* key rows a tile: a lane each */\n"
    "#define JX_AT_ROWS 4 /* query rows a warp (4 warps) */\n" JX_CUDA_IO_SRC
        JX_CUDA_ATTENTION_ARGS_SRC "template <int D, class T>\n"
    "static __device__ void jx_at_forward(const jx_cuda_attention_args a) {\n"
    "  __shared__ float qs[JX_AT_BR][D];\n"
    /* a padded row: lanes reading ks[lane][d] hit 32 different banks */
    "  __shared__ float ks[JX_AT_BC][D + 1];\n"
    "  __shared__ float vs[JX_AT_BC][D];\n"
    "  __shared__ float ps[JX_AT_BR / JX_AT_ROWS][JX_AT_BC];\n"
    "  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;\n"
    "  const long long t = a.t, bh = (long long)blockIdx.z * a.heads + blockIdx.y;\n"
    "  const long long q0 = (long long)blockIdx.x * JX_AT_BR;\n"
    "  const T *q = (const T *)a.q + bh * t * D;\n"
    "  const T *k = (const T *)a.k + bh * t * D;\n"
    "  const T *v = (const T *)a.v + bh * t * D;\n"
    "  T *o = (T *)a.o + bh * t * D;\n"
    "  const float neg_inf = __int_as_float(0xff800000);\n"
    "  for (int e = tid; e < JX_AT_BR * D; e += blockDim.x) {\n"
    "    const long long i = q0 + e / D;\n"
    "    qs[e / D][e % D] = i < t ? jx_cu_load(q, i * D + e % D) : 0.0f;\n"
    "  }\n"
    "  float m[JX_AT_ROWS], l[JX_AT_ROWS], acc[JX_AT_ROWS][D / 32];\n"
    "  for (int r = 0; r < JX_AT_ROWS; r++) {\n"
    "    m[r] = neg_inf;\n"
    "    l[r] = 0.0f;\n"
    "    for (int c = 0; c < D / 32; c++) acc[r][c] = 0.0f;\n"
    "  }\n"
    "  const long long kv_end = a.causal && q0 + JX_AT_BR < t ? q0 + JX_AT_BR : t;\n"
    "  for (long long kv0 = 0; kv0 < kv_end; kv0 += JX_AT_BC) {\n"
    "    __syncthreads(); /* the last tile is consumed (and qs written) */\n"
    "    for (int e = tid; e < JX_AT_BC * D; e += blockDim.x) {\n"
    "      const long long j = kv0 + e / D;\n"
    "      ks[e / D][e % D] = j < t ? jx_cu_load(k, j * D + e % D) : 0.0f;\n"
    "      vs[e / D][e % D] = j < t ? jx_cu_load(v, j * D + e % D) : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int r = 0; r < JX_AT_ROWS; r++) {\n"
    "      const int row = warp * JX_AT_ROWS + r;\n"
    "      const long long i = q0 + row, j = kv0 + lane;\n"
    "      float s = neg_inf;\n"
    "      if (j < t && (!a.causal || j <= i)) {\n"
    "        float dot = 0.0f;\n"
    "        for (int d = 0; d < D; d++) dot += qs[row][d] * ks[lane][d];\n"
    "        s = dot * a.scale;\n"
    "      }\n"
    "      float mt = s;\n"
    "      for (int off = 16; off > 0; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, "
    "off));\n"
    "      const float mn = fmaxf(m[r], mt);\n"
    /* masked scores add nothing; a row with nothing unmasked yet (m = -inf)
     * has nothing to rescale */
    "      const float p = s == neg_inf ? 0.0f : expf(s - mn);\n"
    "      const float alpha = m[r] == neg_inf ? 0.0f : expf(m[r] - mn);\n"
    "      float lt = p;\n"
    "      for (int off = 16; off > 0; off >>= 1) lt += __shfl_xor_sync(0xffffffffu, lt, off);\n"
    "      ps[warp][lane] = p;\n"
    "      __syncwarp();\n"
    "      for (int c = 0; c < D / 32; c++) {\n"
    "        float pv = 0.0f;\n"
    "        for (int jj = 0; jj < JX_AT_BC; jj++) pv += ps[warp][jj] * vs[jj][lane + 32 * c];\n"
    "        acc[r][c] = acc[r][c] * alpha + pv;\n"
    "      }\n"
    "      __syncwarp(); /* ps is the next row's */\n"
    "      l[r] = l[r] * alpha + lt;\n"
    "      m[r] = mn;\n"
    "    }\n"
    "  }\n"
    "  for (int r = 0; r < JX_AT_ROWS; r++) {\n"
    "    const long long i = q0 + warp * JX_AT_ROWS + r;\n"
    "    if (i >= t) continue;\n"
    "    const float inv = 1.0f / l[r];\n"
    "    for (int c = 0; c < D / 32; c++) jx_cu_store(o, i * D + lane + 32 * c, acc[r][c] * inv);\n"
    "    if (a.lse && lane == 0) a.lse[bh * t + i] = m[r] + logf(l[r]);\n"
    "  }\n"
    "}\n"
    "#define JX_AT_KERNEL(name, D, T)                                     \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(128)                  \\\n"
    "      name(const jx_cuda_attention_args a) {                       \\\n"
    "    jx_at_forward<D, T>(a);                                        \\\n"
    "  }\n"
    "JX_AT_KERNEL(jx_attention_fwd_f32_d32, 32, float)\n"
    "JX_AT_KERNEL(jx_attention_fwd_f32_d64, 64, float)\n"
    "JX_AT_KERNEL(jx_attention_fwd_f32_d128, 128, float)\n"
    "JX_AT_KERNEL(jx_attention_fwd_bf16_d32, 32, unsigned short)\n"
    "JX_AT_KERNEL(jx_attention_fwd_bf16_d64, 64, unsigned short)\n"
    "JX_AT_KERNEL(jx_attention_fwd_bf16_d128, 128, unsigned short)\n";

const char *jx_cuda_attention_kernel(jx_dtype dt, int64_t head_dim) {
  static const char *const f32[] = {"jx_attention_fwd_f32_d32", "jx_attention_fwd_f32_d64",
                                    "jx_attention_fwd_f32_d128"};
  static const char *const bf16[] = {"jx_attention_fwd_bf16_d32", "jx_attention_fwd_bf16_d64",
                                     "jx_attention_fwd_bf16_d128"};
  int k = head_dim == 32 ? 0 : head_dim == 64 ? 1 : head_dim == 128 ? 2 : -1;
  if (k < 0) return NULL;
  return dt == JX_F32 ? f32[k] : dt == JX_BF16 ? bf16[k] : NULL;
}

jx_status jx_cuda_attention_grid(const char *who, int head_dim_ok, const char *head_dims,
                                 int64_t rows, int64_t batch, int64_t heads, int64_t t,
                                 int64_t head_dim, jx_cuda_launch_dims *out) {
  const char *why = !out                                 ? "out is NULL"
                    : batch < 0 || heads < 0 || t < 0    ? "negative size"
                    : !head_dim_ok                       ? head_dims
                    : batch > 65535 || heads > 65535     ? "batch and heads are limited to 65535"
                    : (t + rows - 1) / rows > 0x7fffffff ? "t is too long for one grid"
                                                         : NULL;
  if (why)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s (batch %lld, heads %lld, t %lld, head_dim %lld)", who, why,
                        (long long)batch, (long long)heads, (long long)t, (long long)head_dim);
  memset(out, 0, sizeof *out);
  if (batch == 0 || heads == 0 || t == 0) return JX_OK;
  out->grid[0] = (unsigned)((t + rows - 1) / rows);
  out->grid[1] = (unsigned)heads;
  out->grid[2] = (unsigned)batch;
  out->block[0] = 128;
  out->block[1] = out->block[2] = 1;
  return JX_OK;
}

jx_status jx_cuda_attention_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                     jx_cuda_launch_dims *out) {
  return jx_cuda_attention_grid(
      "jx_cuda_attention_geometry", jx_cuda_attention_kernel(JX_F32, head_dim) != NULL,
      "head_dim must be 32, 64 or 128", 16, batch, heads, t, head_dim, out);
}
