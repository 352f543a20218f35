/* The FFT primitive's kernel: FFTW3 plans, cached per transform. */
#ifndef JX_SRC_FFT_FFT_KERNEL_H
#define JX_SRC_FFT_FFT_KERNEL_H

#include <stdint.h>

#include "../array/array.h"

/* lax.FftType, the fft primitive's i0 */
typedef enum { JX_FFT_FFT, JX_FFT_IFFT, JX_FFT_RFFT, JX_FFT_IRFFT } jx_fft_type;

/* Runs `batch` transforms of type t over the rank k trailing dims of sizes
 * n[0..k) (the real sizes for RFFT/IRFFT) from in to out, both contiguous
 * row-major; dbl: c128/f64, else c64/f32. IFFT and IRFFT are divided by
 * prod(n), as lax.fft. 0 when a plan cannot be made (out of memory), with
 * the error recorded. */
int jx_fft_run(jx_fft_type t, int dbl, int k, const int64_t *n, int64_t batch, const void *in,
               void *out);

#endif
