/* jx/fft.h: discrete Fourier transforms, as jax.numpy.fft (docs/fft.md).
 *
 * n / s: the transform's length along each axis (the input is cropped or
 * zero-padded to it); n < 0 or s = JX_SHAPE() means the input's own length
 * (for irfft: 2 * (m - 1) from the m complex inputs). axes as NumPy: 1-D
 * functions take one axis (negative counts from the end); fft2 and friends
 * default to the last two axes and the n-D ones to all axes (the last
 * len(s) when s is given); JX_AXES() means that default. At most three axes
 * are transformed at once, as in JAX. norm: NULL or "backward" (the forward
 * transform unscaled, the inverse divided by n), "ortho" (both by sqrt(n)),
 * "forward" (the forward divided by n).
 *
 * Real inputs of fft/ifft become complex (f32 and smaller, and integers up
 * to 32 bits, give c64; f64 and 64-bit integers c128); rfft takes real
 * inputs only and irfft returns the real dtype of its complex input. All of
 * it is one primitive, fft (jax.lax.fft), with JAX's JVP, transpose and
 * batching rules; jx_grad, jx_vmap and jx_jit apply. */
#ifndef JX_FFT_H
#define JX_FFT_H

#include "array.h"

#ifdef __cplusplus
extern "C" {
#endif

JX_API jx_array *jx_fft_fft(jx_array *a, int64_t n, int axis, const char *norm);
JX_API jx_array *jx_fft_ifft(jx_array *a, int64_t n, int axis, const char *norm);
JX_API jx_array *jx_fft_rfft(jx_array *a, int64_t n, int axis, const char *norm);
JX_API jx_array *jx_fft_irfft(jx_array *a, int64_t n, int axis, const char *norm);
JX_API jx_array *jx_fft_fft2(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_ifft2(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_rfft2(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_irfft2(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_fftn(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_ifftn(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_rfftn(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
JX_API jx_array *jx_fft_irfftn(jx_array *a, jx_shape s, jx_axes axes, const char *norm);
/* The sample frequencies of an n-point transform with sample spacing d, in
 * dtype dt (a float dtype): [0, 1, ..., -1] / (d n), and rfft's
 * [0, ..., n / 2] / (d n). */
JX_API jx_array *jx_fft_fftfreq(int64_t n, double d, jx_dtype dt);
JX_API jx_array *jx_fft_rfftfreq(int64_t n, double d, jx_dtype dt);
/* The zero frequency moved to the middle along axes (JX_AXES(): all), and back. */
JX_API jx_array *jx_fft_fftshift(jx_array *a, jx_axes axes);
JX_API jx_array *jx_fft_ifftshift(jx_array *a, jx_axes axes);

#ifndef JX_NO_LOCATION_MACROS
#define jx_fft_fft(...)       JX_LOCATED(jx_fft_fft, __VA_ARGS__)
#define jx_fft_ifft(...)      JX_LOCATED(jx_fft_ifft, __VA_ARGS__)
#define jx_fft_rfft(...)      JX_LOCATED(jx_fft_rfft, __VA_ARGS__)
#define jx_fft_irfft(...)     JX_LOCATED(jx_fft_irfft, __VA_ARGS__)
#define jx_fft_fft2(...)      JX_LOCATED(jx_fft_fft2, __VA_ARGS__)
#define jx_fft_ifft2(...)     JX_LOCATED(jx_fft_ifft2, __VA_ARGS__)
#define jx_fft_rfft2(...)     JX_LOCATED(jx_fft_rfft2, __VA_ARGS__)
#define jx_fft_irfft2(...)    JX_LOCATED(jx_fft_irfft2, __VA_ARGS__)
#define jx_fft_fftn(...)      JX_LOCATED(jx_fft_fftn, __VA_ARGS__)
#define jx_fft_ifftn(...)     JX_LOCATED(jx_fft_ifftn, __VA_ARGS__)
#define jx_fft_rfftn(...)     JX_LOCATED(jx_fft_rfftn, __VA_ARGS__)
#define jx_fft_irfftn(...)    JX_LOCATED(jx_fft_irfftn, __VA_ARGS__)
#define jx_fft_fftfreq(...)   JX_LOCATED(jx_fft_fftfreq, __VA_ARGS__)
#define jx_fft_rfftfreq(...)  JX_LOCATED(jx_fft_rfftfreq, __VA_ARGS__)
#define jx_fft_fftshift(...)  JX_LOCATED(jx_fft_fftshift, __VA_ARGS__)
#define jx_fft_ifftshift(...) JX_LOCATED(jx_fft_ifftshift, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
