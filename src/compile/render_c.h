/* The kernel renderer's C dialect: C source for a fusion group (the shared
 * renderer and the dialects are described in render.h; render_cuda.h is the
 * CUDA one). Kernels are generic in the shape: dims and strides are
 * arguments, so one compiled kernel serves every shape with the same
 * structure. */
#ifndef JX_SRC_COMPILE_RENDER_C_H
#define JX_SRC_COMPILE_RENDER_C_H

#include "fusion.h"

/* The kernel's signature:
 *   void NAME(char **buf, const int64_t *dims, const int64_t *strides,
 *             int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end)
 * buf: loads then stores; dims: the group's shape padded to rank >= 1 with
 * the innermost dimension last; strides[k * 8 + d]: load k's stride along d;
 * rows: the flattened outer dimensions [row_begin, row_end); columns: the
 * innermost dimension [col_begin, col_end) of each of those rows. */
typedef void (*jx_kernel_fn)(char **buf, const int64_t *dims, const int64_t *strides,
                             int64_t row_begin, int64_t row_end, int64_t col_begin,
                             int64_t col_end);

/* malloc'ed source of the kernel `name`, or NULL with an error recorded; it
 * needs the prelude (the math functions) before it in its translation unit. */
char *jx_render_c(const jx_program *p, const jx_fusion_group *g, const char *name);
/* malloc'ed prelude: headers and the inline math every kernel uses. */
char *jx_render_c_prelude(void);

#endif
