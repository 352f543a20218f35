/* The fft primitive (fft_prim.c). */
#ifndef JX_SRC_FFT_FFT_PRIMS_H
#define JX_SRC_FFT_FFT_PRIMS_H

#include "../prims/prim.h"
#include "fft_kernel.h"

extern const jx_prim jx_prim_fft;

/* fft(x) of type t over the k trailing dims with those lengths */
jx_array *jx_fft_bind(jx_array *x, jx_fft_type t, int k, const int64_t *lengths);

#endif
