/* The CUDA C dialect (see render_cuda.h): what differs from the C dialect is
 * all in this table; the expressions and the kernel body are render_c.c's. */
#include "render_cuda.h"

#include <stddef.h>

/* The layout the prelude declares must be the host's. */
_Static_assert(sizeof(jx_cuda_kargs) == 8 * (JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES) +
                                            8 * JX_MAX_RANK + 8 * JX_FUSION_MAX_LOADS * JX_MAX_RANK,
               "jx_cuda_kargs has padding");
_Static_assert(sizeof(jx_cuda_kargs) <= 4096, "kernel arguments over CUDA's 4 KB limit");

#define JX_STR_(x) #x
#define JX_STR(x)  JX_STR_(x)

const jx_dialect jx_dialect_cuda = {
    .name = "CUDA",
    /* NVRTC has no <stdint.h> or <math.h>: its math functions are built in,
     * the types and the two constants fastmath.h uses are spelled here (the
     * bits of glibc's INFINITY and NAN) */
    .header =
        "typedef signed char int8_t;\n"
        "typedef unsigned char uint8_t;\n"
        "typedef short int16_t;\n"
        "typedef unsigned short uint16_t;\n"
        "typedef int int32_t;\n"
        "typedef unsigned int uint32_t;\n"
        "typedef long long int64_t;\n"
        "typedef unsigned long long uint64_t;\n"
        "#define INFINITY __int_as_float(0x7f800000)\n"
        "#define NAN __int_as_float(0x7fc00000)\n"
        "#define JX_FN static __device__ __forceinline__\n"
        "#define JX_FM_FN JX_FN\n"
        "#define JX_FM_TABLE static __device__ const\n"
        "typedef struct {\n"
        "  char *buf[" JX_STR(JX_FUSION_MAX_LOADS) " + " JX_STR(
            JX_FUSION_MAX_STORES) "];\n"
                                  "  int64_t dims[" JX_STR(
                                      JX_MAX_RANK) "];\n"
                                                   "  int64_t strides[" JX_STR(JX_FUSION_MAX_LOADS) " * " JX_STR(
                                                       JX_MAX_RANK) "];\n"
                                                                    "} jx_cuda_kargs;\n",
    .signature = "extern \"C\" __global__ void %s(const jx_cuda_kargs a, int64_t row_begin,\n"
                 "                                int64_t row_end) {\n",
    .buf = "a.buf",
    .dims = "a.dims",
    .strides = "a.strides",
    .row_loop = "for (int64_t row = row_begin + blockIdx.y; row < row_end; row += gridDim.y) {",
    .col_loop = "for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < inner;\n"
                "         j += (int64_t)gridDim.x * blockDim.x) {",
    .restrict_kw = "__restrict__",
    /* a row reduction: the threads of block x 0 share each row (the
     * executor launches row reductions with one block along x) */
    .row_block = "if (blockIdx.x == 0) {",
    .shared_kw = "__shared__",
    .thread_id = "threadIdx.x",
    .threads = "blockDim.x",
    .barrier = "__syncthreads();",
    /* a column reduction: one output column per thread, the columns spread
     * like an elementwise kernel's (neighbouring threads read neighbouring
     * addresses), each walking the reduced rows in the eager kernel's order */
    .col_block = 1,
    .col_block_loop =
        "for (int64_t c0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c0 < inner;\n"
        "         c0 += (int64_t)gridDim.x * blockDim.x) {\n"
        "      const int64_t cw = 1;",
};

char *jx_render_cuda_prelude(void) { return jx_render_prelude(&jx_dialect_cuda); }

char *jx_render_cuda(const jx_program *p, const jx_fusion_group *g, const char *name) {
  return jx_render_kernel(&jx_dialect_cuda, p, g, name);
}
