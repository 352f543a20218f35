/* The attention backward kernels' source and launches
 * (kernels_attention_bwd.h). */
#include "kernels_attention_bwd.h"

#include <stdio.h>
#include <string.h>

#include "../base/error.h"
#include "kernels_io.h"

_Static_assert(sizeof(jx_cuda_attention_bwd_args) == 112, "jx_cuda_attention_bwd_args has padding");

const char jx_cuda_attention_bwd_src[] =
    "#define JX_AB_ROWS 2 /* rows a warp: 8 a block of 4 warps */\n"
    "#define JX_AB_BR (4 * JX_AB_ROWS)\n"
    "#define JX_AB_BC 32 /* rows of the other side a tile: a lane each */\n" JX_CUDA_IO_SRC
    "static __device__ __forceinline__ float jx_ab_warp_sum(float v) {\n"
    "  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);\n"
    "  return v;\n"
    "}\n" JX_CUDA_ATTENTION_BWD_ARGS_SRC
    /* delta_i = do_i . o_i: a warp per row, 4 rows a warp */
    "template <int D, class T>\n"
    "static __device__ void jx_ab_delta(const jx_cuda_attention_bwd_args a) {\n"
    "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "  const long long t = a.t, bh = (long long)blockIdx.z * a.heads + blockIdx.y;\n"
    "  const T *o = (const T *)a.o + bh * t * D, *dout = (const T *)a.dout + bh * t * D;\n"
    "  for (int r = 0; r < 4; r++) {\n"
    "    const long long i = (long long)blockIdx.x * 16 + warp * 4 + r;\n"
    "    float s = 0.0f;\n"
    "    if (i < t)\n"
    "      for (int c = lane; c < D; c += 32) s += jx_cu_load(dout, i * D + c) * jx_cu_load(o, i * "
    "D + c);\n"
    "    s = jx_ab_warp_sum(s);\n"
    "    if (i < t && lane == 0) a.delta[bh * t + i] = s;\n"
    "  }\n"
    "}\n"
    /* the rows [r0, r0 + n) of x into s (stride S), zeros past t */
    "template <int D, int S, class T>\n"
    "static __device__ void jx_ab_tile(float *s, const T *x, long long r0, int n, long long t) {\n"
    "  for (int e = threadIdx.x; e < n * D; e += blockDim.x) {\n"
    "    const long long r = r0 + e / D;\n"
    "    s[(e / D) * S + e % D] = r < t ? jx_cu_load(x, r * D + e % D) : 0.0f;\n"
    "  }\n"
    "}\n"
    /* dq: 8 queries a block; a lane takes a key of the tile */
    "template <int D, class T>\n"
    "static __device__ void jx_ab_dq(const jx_cuda_attention_bwd_args a) {\n"
    "  __shared__ float qs[JX_AB_BR][D], dos[JX_AB_BR][D];\n"
    "  __shared__ float ks[JX_AB_BC][D + 1], vs[JX_AB_BC][D + 1];\n"
    "  __shared__ float dss[4][JX_AB_BC];\n"
    "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "  const long long t = a.t, bh = (long long)blockIdx.z * a.heads + blockIdx.y;\n"
    "  const long long q0 = (long long)blockIdx.x * JX_AB_BR, off = bh * t * D;\n"
    "  jx_ab_tile<D, D>(&qs[0][0], (const T *)a.q + off, q0, JX_AB_BR, t);\n"
    "  jx_ab_tile<D, D>(&dos[0][0], (const T *)a.dout + off, q0, JX_AB_BR, t);\n"
    "  float acc[JX_AB_ROWS][D / 32], lse[JX_AB_ROWS], delta[JX_AB_ROWS];\n"
    "  for (int r = 0; r < JX_AB_ROWS; r++) {\n"
    "    const long long i = q0 + warp * JX_AB_ROWS + r;\n"
    "    lse[r] = i < t ? a.lse[bh * t + i] : 0.0f;\n"
    "    delta[r] = i < t ? a.delta[bh * t + i] : 0.0f;\n"
    "    for (int c = 0; c < D / 32; c++) acc[r][c] = 0.0f;\n"
    "  }\n"
    "  const long long kv_end = a.causal && q0 + JX_AB_BR < t ? q0 + JX_AB_BR : t;\n"
    "  for (long long kv0 = 0; kv0 < kv_end; kv0 += JX_AB_BC) {\n"
    "    __syncthreads();\n"
    "    jx_ab_tile<D, D + 1>(&ks[0][0], (const T *)a.k + off, kv0, JX_AB_BC, t);\n"
    "    jx_ab_tile<D, D + 1>(&vs[0][0], (const T *)a.v + off, kv0, JX_AB_BC, t);\n"
    "    __syncthreads();\n"
    "    for (int r = 0; r < JX_AB_ROWS; r++) {\n"
    "      const int row = warp * JX_AB_ROWS + r;\n"
    "      const long long i = q0 + row, j = kv0 + lane;\n"
    "      float ds = 0.0f;\n"
    "      if (i < t && j < t && (!a.causal || j <= i)) {\n"
    "        float qk = 0.0f, dv = 0.0f;\n"
    "        for (int d = 0; d < D; d++) {\n"
    "          qk += qs[row][d] * ks[lane][d];\n"
    "          dv += dos[row][d] * vs[lane][d];\n"
    "        }\n"
    "        ds = expf(qk * a.scale - lse[r]) * (dv - delta[r]);\n"
    "      }\n"
    "      dss[warp][lane] = ds;\n"
    "      __syncwarp();\n"
    "      for (int c = 0; c < D / 32; c++)\n"
    "        for (int jj = 0; jj < JX_AB_BC; jj++) acc[r][c] += dss[warp][jj] * ks[jj][lane + 32 * "
    "c];\n"
    "      __syncwarp();\n"
    "    }\n"
    "  }\n"
    "  T *dq = (T *)a.dq + off;\n"
    "  for (int r = 0; r < JX_AB_ROWS; r++) {\n"
    "    const long long i = q0 + warp * JX_AB_ROWS + r;\n"
    "    if (i < t)\n"
    "      for (int c = 0; c < D / 32; c++) jx_cu_store(dq, i * D + lane + 32 * c, acc[r][c] * "
    "a.scale);\n"
    "  }\n"
    "}\n"
    /* dk and dv: 8 keys a block; a lane takes a query of the tile */
    "template <int D, class T>\n"
    "static __device__ void jx_ab_dkdv(const jx_cuda_attention_bwd_args a) {\n"
    "  __shared__ float kt[JX_AB_BR][D], vt[JX_AB_BR][D];\n"
    "  __shared__ float qs[JX_AB_BC][D + 1], dos[JX_AB_BC][D + 1];\n"
    "  __shared__ float lses[JX_AB_BC], deltas[JX_AB_BC];\n"
    "  __shared__ float ps[4][JX_AB_BC], dss[4][JX_AB_BC];\n"
    "  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;\n"
    "  const long long t = a.t, bh = (long long)blockIdx.z * a.heads + blockIdx.y;\n"
    "  const long long k0 = (long long)blockIdx.x * JX_AB_BR, off = bh * t * D;\n"
    "  jx_ab_tile<D, D>(&kt[0][0], (const T *)a.k + off, k0, JX_AB_BR, t);\n"
    "  jx_ab_tile<D, D>(&vt[0][0], (const T *)a.v + off, k0, JX_AB_BR, t);\n"
    "  float dk[JX_AB_ROWS][D / 32], dv[JX_AB_ROWS][D / 32];\n"
    "  for (int r = 0; r < JX_AB_ROWS; r++)\n"
    "    for (int c = 0; c < D / 32; c++) dk[r][c] = dv[r][c] = 0.0f;\n"
    /* causal: queries before k0 see none of these keys */
    "  for (long long i0 = a.causal ? k0 / JX_AB_BC * JX_AB_BC : 0; i0 < t; i0 += JX_AB_BC) {\n"
    "    __syncthreads();\n"
    "    jx_ab_tile<D, D + 1>(&qs[0][0], (const T *)a.q + off, i0, JX_AB_BC, t);\n"
    "    jx_ab_tile<D, D + 1>(&dos[0][0], (const T *)a.dout + off, i0, JX_AB_BC, t);\n"
    "    for (int e = threadIdx.x; e < JX_AB_BC; e += blockDim.x) {\n"
    "      lses[e] = i0 + e < t ? a.lse[bh * t + i0 + e] : 0.0f;\n"
    "      deltas[e] = i0 + e < t ? a.delta[bh * t + i0 + e] : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    for (int r = 0; r < JX_AB_ROWS; r++) {\n"
    "      const int row = warp * JX_AB_ROWS + r;\n"
    "      const long long j = k0 + row, i = i0 + lane;\n"
    "      float p = 0.0f, ds = 0.0f;\n"
    "      if (i < t && j < t && (!a.causal || j <= i)) {\n"
    "        float qk = 0.0f, dov = 0.0f;\n"
    "        for (int d = 0; d < D; d++) {\n"
    "          qk += qs[lane][d] * kt[row][d];\n"
    "          dov += dos[lane][d] * vt[row][d];\n"
    "        }\n"
    "        p = expf(qk * a.scale - lses[lane]);\n"
    "        ds = p * (dov - deltas[lane]);\n"
    "      }\n"
    "      ps[warp][lane] = p;\n"
    "      dss[warp][lane] = ds;\n"
    "      __syncwarp();\n"
    "      for (int c = 0; c < D / 32; c++)\n"
    "        for (int ii = 0; ii < JX_AB_BC; ii++) {\n"
    "          dv[r][c] += ps[warp][ii] * dos[ii][lane + 32 * c];\n"
    "          dk[r][c] += dss[warp][ii] * qs[ii][lane + 32 * c];\n"
    "        }\n"
    "      __syncwarp();\n"
    "    }\n"
    "  }\n"
    "  T *dkp = (T *)a.dk + off, *dvp = (T *)a.dv + off;\n"
    "  for (int r = 0; r < JX_AB_ROWS; r++) {\n"
    "    const long long j = k0 + warp * JX_AB_ROWS + r;\n"
    "    if (j >= t) continue;\n"
    "    for (int c = 0; c < D / 32; c++) {\n"
    "      jx_cu_store(dkp, j * D + lane + 32 * c, dk[r][c] * a.scale);\n"
    "      jx_cu_store(dvp, j * D + lane + 32 * c, dv[r][c]);\n"
    "    }\n"
    "  }\n"
    "}\n"
    "#define JX_AB_KERNELS(suffix, D, T)                                                    \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(128)                                    \\\n"
    "      jx_attention_bwd_delta_##suffix(const jx_cuda_attention_bwd_args a) {          \\\n"
    "    jx_ab_delta<D, T>(a);                                                            \\\n"
    "  }                                                                                  \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(128)                                    \\\n"
    "      jx_attention_bwd_dq_##suffix(const jx_cuda_attention_bwd_args a) {             \\\n"
    "    jx_ab_dq<D, T>(a);                                                               \\\n"
    "  }                                                                                  \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(128)                                    \\\n"
    "      jx_attention_bwd_dkdv_##suffix(const jx_cuda_attention_bwd_args a) {           \\\n"
    "    jx_ab_dkdv<D, T>(a);                                                             \\\n"
    "  }\n"
    "JX_AB_KERNELS(f32_d32, 32, float)\n"
    "JX_AB_KERNELS(f32_d64, 64, float)\n"
    "JX_AB_KERNELS(f32_d128, 128, float)\n"
    "JX_AB_KERNELS(bf16_d32, 32, unsigned short)\n"
    "JX_AB_KERNELS(bf16_d64, 64, unsigned short)\n"
    "JX_AB_KERNELS(bf16_d128, 128, unsigned short)\n";

int jx_cuda_attention_bwd_kernels(jx_dtype dt, int64_t head_dim, char names[3][48]) {
  if ((dt != JX_F32 && dt != JX_BF16) || (head_dim != 32 && head_dim != 64 && head_dim != 128))
    return -1;
  const char *parts[3] = {"delta", "dq", "dkdv"};
  for (int k = 0; k < 3; k++)
    snprintf(names[k], 48, "jx_attention_bwd_%s_%s_d%d", parts[k], dt == JX_F32 ? "f32" : "bf16",
             (int)head_dim);
  return 0;
}

jx_status jx_cuda_attention_bwd_geometry(int64_t batch, int64_t heads, int64_t t, int64_t head_dim,
                                         jx_cuda_launch_dims out[3]) {
  char names[3][48];
  const char *why = !out                              ? "out is NULL"
                    : batch < 0 || heads < 0 || t < 0 ? "negative size"
                    : jx_cuda_attention_bwd_kernels(JX_F32, head_dim, names)
                        ? "head_dim must be 32, 64 or 128"
                    : batch > 65535 || heads > 65535 ? "batch and heads are limited to 65535"
                    : (t + 7) / 8 > 0x7fffffff       ? "t is too long for one grid"
                                                     : NULL;
  if (why)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_cuda_attention_bwd_geometry: %s (batch %lld, heads %lld, t %lld, "
                        "head_dim %lld)",
                        why, (long long)batch, (long long)heads, (long long)t, (long long)head_dim);
  memset(out, 0, 3 * sizeof *out);
  if (batch == 0 || heads == 0 || t == 0) return JX_OK;
  const int64_t rows[3] = {16, 8, 8}; /* rows a block: delta, dq, dkdv */
  for (int k = 0; k < 3; k++) {
    out[k].grid[0] = (unsigned)((t + rows[k] - 1) / rows[k]);
    out[k].grid[1] = (unsigned)heads;
    out[k].grid[2] = (unsigned)batch;
    out[k].block[0] = 128;
    out[k].block[1] = out[k].block[2] = 1;
  }
  return JX_OK;
}
