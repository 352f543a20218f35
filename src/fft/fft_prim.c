/* The fft primitive, jax.lax.fft: i0 = fft_type (jx_fft_type), l0 =
 * fft_lengths (1 to 3), transforming the trailing l0.n dims.
 *
 *   FFT, IFFT: complex -> the same complex dtype and shape
 *   RFFT:      f32/f64 [..., n] -> c64/c128 [..., n/2 + 1]
 *   IRFFT:     c64/c128 [..., n/2 + 1] -> f32/f64 [..., n]
 *
 * The other trailing dims equal fft_lengths. The inverses are divided by
 * the transform's size, as lax.fft. Rules are JAX's (jax/_src/lax/fft.py):
 * the JVP is the transform of the tangent (it is linear); FFT and IFFT
 * transpose to themselves (the DFT matrix is symmetric and JAX transposes,
 * it does not take adjoints); RFFT's transpose is real(FFT(ct zero-padded to
 * n)) (the transpose of FFT then a slice, not IRFFT); IRFFT's is
 * conj(RFFT(ct) * mask / prod(n)), mask 1 at the two self-conjugate bins
 * and 2 elsewhere; batching moves the batch dim to the front. */
#include <complex.h>
#include <stdlib.h>

#include "../base/error.h"
#include "../prims/prims.h"
#include "../prims/rules.h"
#include "fft_kernel.h"
#include "fft_prims.h"

static const char *type_name(int64_t t) {
  static const char *names[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  return t >= 0 && t < 4 ? names[t] : "?";
}

static jx_status infer_fft(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  const jx_ilist *len = &p->l[0];
  char s[JX_AVAL_STR_CAP];
  jx_aval x = in[0];
  if (p->i[0] < 0 || p->i[0] > 3)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "fft: fft_type %lld is not FFT, IFFT, RFFT or IRFFT", (long long)p->i[0]);
  jx_fft_type t = (jx_fft_type)p->i[0];
  if (len->n < 1 || len->n > 3 || len->n > x.shape.rank)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "fft: %s over %d dims of %s; 1 to 3 trailing dims are supported",
                        type_name(t), len->n, jx_aval_str(x.dtype, x.shape, s));
  int real_in = t == JX_FFT_RFFT;
  if (real_in ? (x.dtype != JX_F32 && x.dtype != JX_F64) : !jx_is_complex(x.dtype))
    return jx_error_set(JX_ERR_DTYPE, "fft: %s needs %s input, got %s", type_name(t),
                        real_in ? "an f32 or f64" : "a complex", jx_aval_str(x.dtype, x.shape, s));
  int base = x.shape.rank - len->n;
  for (int d = 0; d < len->n; d++) {
    int64_t want = len->v[d];
    if (want < 0 || (want == 0 && t == JX_FFT_IRFFT))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "fft: invalid fft_lengths entry %lld",
                          (long long)want);
    if (d == len->n - 1 && t == JX_FFT_IRFFT) want = want / 2 + 1;
    if (x.shape.dims[base + d] != want)
      return jx_error_set(
          JX_ERR_SHAPE, "fft: %s of %s needs trailing dim %d of size %lld (fft_lengths)",
          type_name(t), jx_aval_str(x.dtype, x.shape, s), base + d, (long long)want);
  }
  *out = x;
  out->weak = 0;
  if (t == JX_FFT_RFFT) {
    out->dtype = jx_complex_of(x.dtype);
    out->shape.dims[x.shape.rank - 1] = len->v[len->n - 1] / 2 + 1;
  } else if (t == JX_FFT_IRFFT) {
    out->dtype = jx_complex_part(x.dtype);
    out->shape.dims[x.shape.rank - 1] = len->v[len->n - 1];
  }
  return JX_OK;
}

static void eval_fft(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  int k = p->l[0].n;
  int64_t batch = 1;
  for (int d = 0; d < in->shape.rank - k; d++) batch *= in->shape.dims[d];
  int dbl = in->dtype == JX_F64 || in->dtype == JX_C128;
  if (!jx_fft_run((jx_fft_type)p->i[0], dbl, k, p->l[0].v, batch, in->data, out->data))
    memset(out->data, 0, (size_t)jx_shape_numel(out->shape) * jx_dtype_size(out->dtype));
}

jx_array *jx_fft_bind(jx_array *x, jx_fft_type t, int k, const int64_t *lengths) {
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = t;
  p.l[0].n = k;
  for (int d = 0; d < k; d++) p.l[0].v[d] = lengths[d];
  return jx_bind1(&jx_prim_fft, 1, &x, &p);
}

static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }

/* RFFT^T: real(FFT(ct padded with zeros to n along the last dim)) */
static jx_array *rfft_transpose(jx_array *ct, const jx_ilist *len) {
  jx_shape s = jx_shape_of(ct), lo = {s.rank, {0}}, hi = {s.rank, {0}};
  hi.dims[s.rank - 1] = len->v[len->n - 1] - s.dims[s.rank - 1];
  jx_array *full = jx_pad(ct, lo, hi, 0);
  return bind1(&jx_prim_real, jx_fft_bind(full, JX_FFT_FFT, len->n, len->v));
}

/* IRFFT^T: conj(RFFT(ct) * mask / prod(n)) */
static jx_array *irfft_transpose(jx_array *ct, const jx_ilist *len) {
  jx_array *x = jx_fft_bind(ct, JX_FFT_RFFT, len->n, len->v);
  jx_shape s = jx_shape_of(x);
  int64_t m = s.dims[s.rank - 1], odd = len->v[len->n - 1] % 2, total = 1;
  for (int d = 0; d < len->n; d++) total *= len->v[d];
  /* mask: 1 at bin 0 and (n even) at the last bin, 2 elsewhere, scaled */
  double *mask = malloc(sizeof *mask * (size_t)m);
  if (!mask) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "fft: out of memory");
    return jx_poison();
  }
  for (int64_t i = 0; i < m; i++)
    mask[i] = ((i == 0 || (!odd && i == m - 1)) ? 1.0 : 2.0) / (double)total;
  jx_array *w = jx_astype(jx_array_from(JX_F64, JX_SHAPE(m), mask), jx_complex_part(x->dtype));
  free(mask);
  return bind1(&jx_prim_conj, jx_mul(x, w));
}

static jx_status transpose_fft(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,
                               const uint8_t *linear, jx_array *const *ct, jx_array **ct_in) {
  (void)in, (void)avals;
  const jx_params *p = ctx->params;
  ct_in[0] = NULL;
  if (!linear[0] || !ct[0]) return JX_OK;
  switch ((jx_fft_type)p->i[0]) {
  case JX_FFT_RFFT: ct_in[0] = rfft_transpose(ct[0], &p->l[0]); break;
  case JX_FFT_IRFFT: ct_in[0] = irfft_transpose(ct[0], &p->l[0]); break;
  default: ct_in[0] = jx_fft_bind(ct[0], (jx_fft_type)p->i[0], p->l[0].n, p->l[0].v); break;
  }
  return jx_last_status();
}

const jx_prim jx_prim_fft = {.name = "fft",
                             .id = JX_PRIM_fft,
                             .nin = 1,
                             .nout = 1,
                             .params = "fft_type=i0 fft_lengths=l0",
                             .infer = infer_fft,
                             .eval = eval_fft,
                             .jvp = jx_jvp_linear_first,
                             .transpose = transpose_fft,
                             .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(fft, &jx_prim_fft)
