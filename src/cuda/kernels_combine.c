/* The combining kernel's source (kernels_combine.h). */
#include "kernels_combine.h"

_Static_assert(sizeof(jx_cuda_combine_args) == 40 + 2 * JX_CUDA_MAX_PIECES,
               "jx_cuda_combine_args has padding");
_Static_assert(sizeof(jx_cuda_combine_args) <= sizeof(((jx_cuda_kargs *)0)->strides),
               "jx_cuda_combine_args does not fit in the kernel arguments' strides");
_Static_assert(JX_CUDA_MAX_PIECES == 64, "the source below spells the pieces' limit");
_Static_assert(JX_CUDA_COMBINE_F64 == 1 && JX_CUDA_COMBINE_BF16 == 2,
               "the source below spells the kinds");

const char jx_cuda_combine_src[] =
    "typedef struct {\n"
    "  const char *part;\n"
    "  char *out;\n"
    "  long long m;\n"
    "  int pieces, op, kind, npairs;\n"
    "  unsigned char pairs[64][2];\n"
    "} jx_cuda_combine_args;\n"
    "template <typename T> static __device__ void jx_combine(const jx_cuda_combine_args &c) {\n"
    "  const T *p = (const T *)c.part;\n"
    "  T *out = (T *)c.out;\n"
    "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < c.m;\n"
    "       o += (long long)gridDim.x * blockDim.x) {\n"
    "    T v[64];\n"
    "    for (int k = 0; k < c.pieces; k++) v[k] = p[k * c.m + o];\n"
    "    T acc = v[0];\n"
    "    if (c.op == 1) {\n"
    "      for (int i = 0; i < c.npairs; i++)\n"
    "        v[c.pairs[i][0]] = v[c.pairs[i][0]] + v[c.pairs[i][1]];\n"
    "      acc = v[0];\n"
    "    } else {\n"
    "      for (int k = 1; k < c.pieces; k++) {\n"
    "        const T x = v[k];\n"
    "        if (acc == acc && (x != x || (c.op == 2 ? x > acc : x < acc))) acc = x;\n"
    "      }\n"
    "    }\n"
    "    if (c.kind == 2)\n"
    "      ((uint16_t *)c.out)[o] = jx_f32_bf16((float)acc);\n"
    "    else\n"
    "      out[o] = acc;\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void jx_cuda_step_combine(const jx_cuda_kargs a, int64_t row_begin,\n"
    "                                                int64_t row_end) {\n"
    "  const jx_cuda_combine_args &c = *(const jx_cuda_combine_args *)a.strides;\n"
    "  if (c.kind == 1)\n"
    "    jx_combine<double>(c);\n"
    "  else\n"
    "    jx_combine<float>(c);\n"
    "}\n";
