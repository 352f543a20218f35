/* jax.numpy.fft on the fft primitive: the axes moved to the end, the input
 * cropped or zero-padded to the lengths asked for, one lax.fft, the norm's
 * scale, the axes moved back (jnp.fft's _fft_core). */
#include <jx/fft.h>
#include <math.h>
#include <string.h>

#include "../ops/ops_util.h"
#include "fft_prims.h"

/* norm: 0 backward, 1 ortho, 2 forward; -1 with an error */
static int norm_of(const char *op, const char *norm) {
  if (!norm || strcmp(norm, "backward") == 0) return 0;
  if (strcmp(norm, "ortho") == 0) return 1;
  if (strcmp(norm, "forward") == 0) return 2;
  jx_error_set(JX_ERR_INVALID_ARGUMENT,
               "%s: invalid norm \"%s\" (\"backward\", \"ortho\" or \"forward\")", op, norm);
  return -1;
}

/* The dtype a transform of a computes in: complex for FFT/IFFT/IRFFT, the
 * real kin for RFFT (c64 or f32 up to 32 bits, as jnp.fft). */
static jx_dtype work_dtype(jx_dtype dt, jx_fft_type t) {
  jx_dtype r = jx_complex_part(jx_to_inexact(dt));
  if (r != JX_F64) r = JX_F32;
  return t == JX_FFT_RFFT ? r : jx_complex_of(r);
}

/* jnp.fft's _fft_core: s (ns entries, ns < 0: none) along axes (na entries,
 * na < 0: the default) */
static jx_array *fft_core(const char *op, jx_fft_type t, int inverse, jx_array *a, int ns,
                          const int64_t *s, int na, const int *axes_in, const char *norm) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int nm = norm_of(op, norm);
  if (nm < 0) return jx_poison();
  char sb[JX_AVAL_STR_CAP];
  int rank = a->shape.rank;
  if (t == JX_FFT_RFFT && jx_is_complex(a->dtype)) {
    jx_error_set(JX_ERR_DTYPE, "%s: the input is %s; the real transforms take real input", op,
                 jx_aval_str(a->dtype, a->shape, sb));
    return jx_poison();
  }
  if (ns >= 0 && na >= 0 && ns != na) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: s has %d entries but axes %d", op, ns, na);
    return jx_poison();
  }
  int axes[JX_MAX_RANK], k = na >= 0 ? na : ns >= 0 ? ns : rank;
  if (k > rank || k < 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d axes for an input %s", op, k,
                 jx_aval_str(a->dtype, a->shape, sb));
    return jx_poison();
  }
  if (k > 3) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: %d axes; at most 3 are transformed at once (as in JAX)", op, k);
    return jx_poison();
  }
  for (int i = 0; i < k; i++) {
    int ax = na >= 0 ? axes_in[i] : rank - k + i;
    if ((axes[i] = jx_normalize_axis(ax, rank, op)) < 0) return jx_poison();
    for (int j = 0; j < i; j++)
      if (axes[j] == axes[i]) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: axis %d appears twice", op, ax);
        return jx_poison();
      }
  }
  for (int i = 0; i < ns; i++)
    if (s[i] < 0 || (s[i] == 0 && t == JX_FFT_IRFFT)) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: invalid length %lld in s", op, (long long)s[i]);
      return jx_poison();
    }
  /* the transformed axes to the end, in order */
  jx_axes perm = {rank, {0}};
  int moved[JX_MAX_RANK] = {0}, p = 0;
  for (int i = 0; i < k; i++) moved[axes[i]] = 1;
  for (int d = 0; d < rank; d++)
    if (!moved[d]) perm.v[p++] = d;
  for (int i = 0; i < k; i++) perm.v[p++] = axes[i];
  int identity = 1;
  for (int d = 0; d < rank; d++) identity &= perm.v[d] == d;
  jx_array *x = jx_ops_convert(a, work_dtype(a->dtype, t), 0);
  if (!identity) x = jx_transpose(x, perm);
  /* lengths, then crop and pad */
  int64_t len[3];
  jx_shape want = jx_shape_of(x);
  for (int i = 0; i < k; i++) {
    int64_t have = want.dims[rank - k + i];
    if (ns >= 0)
      len[i] = s[i];
    else
      len[i] = (t == JX_FFT_IRFFT && i == k - 1) ? 2 * (have - 1) : have;
    if (t == JX_FFT_IRFFT && len[i] < 1) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the output length %lld is not positive", op,
                   (long long)len[i]);
      return jx_poison();
    }
    want.dims[rank - k + i] = (t == JX_FFT_IRFFT && i == k - 1) ? len[i] / 2 + 1 : len[i];
  }
  jx_shape have = jx_shape_of(x);
  if (!jx_shape_equal(have, want)) {
    jx_shape start = {rank, {0}}, stop = have, lo = {rank, {0}}, hi = {rank, {0}};
    for (int d = 0; d < rank; d++) {
      if (want.dims[d] < have.dims[d]) stop.dims[d] = want.dims[d];
      if (want.dims[d] > have.dims[d]) hi.dims[d] = want.dims[d] - have.dims[d];
    }
    x = jx_pad(jx_slice(x, start, stop, JX_SHAPE()), lo, hi, 0);
  }
  jx_array *y = jx_fft_bind(x, t, k, len);
  if (nm != 0) {
    double total = 1;
    for (int i = 0; i < k; i++) total *= (double)len[i];
    double f = nm == 1 ? (inverse ? sqrt(total) : 1 / sqrt(total)) : (inverse ? total : 1 / total);
    y = jx_mul(y, jx_scalar(JX_F64, f));
  }
  if (!identity) { /* back: the inverse permutation */
    jx_axes inv = {rank, {0}};
    for (int d = 0; d < rank; d++) inv.v[perm.v[d]] = d;
    y = jx_transpose(y, inv);
  }
  return y;
}

#define ONE_D(FN, T, INV)                                                                          \
  jx_array *FN(jx_array *a, int64_t n, int axis, const char *norm) {                               \
    return fft_core(#FN, T, INV, a, n < 0 ? -1 : 1, &n, 1, &axis, norm);                           \
  }
ONE_D(jx_fft_fft, JX_FFT_FFT, 0)
ONE_D(jx_fft_ifft, JX_FFT_IFFT, 1)
ONE_D(jx_fft_rfft, JX_FFT_RFFT, 0)
ONE_D(jx_fft_irfft, JX_FFT_IRFFT, 1)

/* axes JX_AXES(): two_d gives the last two, else the n-D default */
static jx_array *n_d(const char *op, jx_fft_type t, int inv, int two_d, jx_array *a, jx_shape s,
                     jx_axes axes, const char *norm) {
  static const int last_two[2] = {-2, -1};
  int ax[JX_MAX_RANK], na = axes.n > 0 ? axes.n : two_d ? 2 : -1;
  for (int i = 0; i < axes.n; i++) ax[i] = axes.v[i];
  return fft_core(op, t, inv, a, s.rank > 0 ? s.rank : -1, s.dims, na, axes.n > 0 ? ax : last_two,
                  norm);
}
#define N_D(FN, T, INV, TWO)                                                                       \
  jx_array *FN(jx_array *a, jx_shape s, jx_axes axes, const char *norm) {                          \
    return n_d(#FN, T, INV, TWO, a, s, axes, norm);                                                \
  }
N_D(jx_fft_fft2, JX_FFT_FFT, 0, 1)
N_D(jx_fft_ifft2, JX_FFT_IFFT, 1, 1)
N_D(jx_fft_rfft2, JX_FFT_RFFT, 0, 1)
N_D(jx_fft_irfft2, JX_FFT_IRFFT, 1, 1)
N_D(jx_fft_fftn, JX_FFT_FFT, 0, 0)
N_D(jx_fft_ifftn, JX_FFT_IFFT, 1, 0)
N_D(jx_fft_rfftn, JX_FFT_RFFT, 0, 0)
N_D(jx_fft_irfftn, JX_FFT_IRFFT, 1, 0)

static jx_array *freqs(const char *op, int64_t n, double d, jx_dtype dt, int half) {
  if (n < 1 || !jx_is_float(dt)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs n >= 1 and a float dtype, got n = %lld, %s",
                 op, (long long)n, jx_dtype_name(dt));
    return jx_poison();
  }
  int64_t m = half ? n / 2 + 1 : n;
  jx_array *k = jx_arange(JX_F64, 0, (double)m, 1);
  if (!half) /* [0, ..., (n - 1) / 2, -(n / 2), ..., -1] */
    k = jx_where(jx_ge(k, jx_scalar(JX_F64, (double)((n + 1) / 2))),
                 jx_sub(k, jx_scalar(JX_F64, (double)n)), k);
  return jx_astype(jx_div(k, jx_scalar(JX_F64, d * (double)n)), dt);
}
jx_array *jx_fft_fftfreq(int64_t n, double d, jx_dtype dt) {
  return freqs("jx_fft_fftfreq", n, d, dt, 0);
}
jx_array *jx_fft_rfftfreq(int64_t n, double d, jx_dtype dt) {
  return freqs("jx_fft_rfftfreq", n, d, dt, 1);
}

/* a rolled by shift(size) along each axis: two slices concatenated */
static jx_array *shift(const char *op, jx_array *a, jx_axes axes, int inverse) {
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int rank = a->shape.rank, n = axes.n ? axes.n : rank;
  for (int i = 0; i < n; i++) {
    int ax = jx_normalize_axis(axes.n ? axes.v[i] : i, rank, op);
    if (ax < 0) return jx_poison();
    int64_t size = a->shape.dims[ax];
    int64_t r = inverse ? size - size / 2 : size / 2; /* roll right by r */
    if (size == 0 || r % size == 0) continue;
    jx_shape s = jx_shape_of(a), start = {rank, {0}}, stop = s;
    start.dims[ax] = size - r;
    jx_array *tail = jx_slice(a, start, stop, JX_SHAPE());
    start.dims[ax] = 0;
    stop.dims[ax] = size - r;
    jx_array *head = jx_slice(a, start, stop, JX_SHAPE());
    a = jx_concatenate(2, (jx_array *[]){tail, head}, ax);
  }
  return a;
}
jx_array *jx_fft_fftshift(jx_array *a, jx_axes axes) {
  return shift("jx_fft_fftshift", a, axes, 0);
}
jx_array *jx_fft_ifftshift(jx_array *a, jx_axes axes) {
  return shift("jx_fft_ifftshift", a, axes, 1);
}
