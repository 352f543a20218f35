/* Loads and stores shared by the hand-written CUDA kernels' sources
 * (kernels_softmax.c, kernels_attention*.c): f32 as it is, bf16 as bits,
 * converted as the CPU converts (jx_f32_to_bf16: to nearest even, a NaN to
 * the quiet NaN of its sign). Overloaded on the pointer type, so one kernel
 * body serves both dtypes. Each kernel source is its own translation unit. */
#ifndef JX_SRC_CUDA_KERNELS_IO_H
#define JX_SRC_CUDA_KERNELS_IO_H

#define JX_CUDA_IO_SRC                                                                             \
  "static __device__ __forceinline__ float jx_cu_load(const float *p, long long i) {\n"            \
  "  return p[i];\n"                                                                               \
  "}\n"                                                                                            \
  "static __device__ __forceinline__ float jx_cu_load(const unsigned short *p, long long i) {\n"   \
  "  return __uint_as_float((unsigned)p[i] << 16);\n"                                              \
  "}\n"                                                                                            \
  "static __device__ __forceinline__ void jx_cu_store(float *p, long long i, float v) {\n"         \
  "  p[i] = v;\n"                                                                                  \
  "}\n"                                                                                            \
  "static __device__ __forceinline__ void jx_cu_store(unsigned short *p, long long i, float v) "   \
  "{\n"                                                                                            \
  "  unsigned u = __float_as_uint(v);\n"                                                           \
  "  if ((u & 0x7fffffffu) > 0x7f800000u)\n"                                                       \
  "    p[i] = (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u);\n"                                \
  "  else\n"                                                                                       \
  "    p[i] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"                         \
  "}\n"

#endif
