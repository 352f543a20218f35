/* Where compiled kernels are cached on disk, shared by the C toolchain
 * (toolchain.c) and the CUDA module cache (src/cuda/cuda_module.c):
 * $JX_CACHE_DIR, else $XDG_CACHE_HOME/jx, else ~/.cache/jx. */
#ifndef JX_SRC_COMPILE_KERNEL_CACHE_DIR_H
#define JX_SRC_COMPILE_KERNEL_CACHE_DIR_H

#include <stddef.h>

/* Writes the directory into out (n bytes), making every missing level;
 * 0 when it cannot be made, else 1. */
int jx_kernel_cache_dir(char *out, size_t n);

#endif
