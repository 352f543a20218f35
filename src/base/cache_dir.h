/* Where jx caches what it made on disk: compiled kernels (the C toolchain,
 * src/compile/toolchain.c, and the CUDA module cache), FFTW's wisdom
 * (src/fft/fft_kernel.c), the measured peak FLOP/s and communication
 * figures: $JX_CACHE_DIR, else $XDG_CACHE_HOME/jx, else ~/.cache/jx. */
#ifndef JX_SRC_BASE_CACHE_DIR_H
#define JX_SRC_BASE_CACHE_DIR_H

#include <stddef.h>

/* Writes the directory into out (n bytes), making every missing level;
 * 0 when it cannot be made, else 1. */
int jx_kernel_cache_dir(char *out, size_t n);

#endif
