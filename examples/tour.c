/* A tour of jx: arrays, elementwise ops, reductions, matmul, softmax, random
 * numbers, and errors that name the line that caused them.
 * Built as build/example_tour; run it and compare with the comments. */
#include <jx/jx.h>
#include <stdio.h>

static void show(const char *what, jx_array *a) {
  printf("%s:\n", what);
  jx_print(a, stdout); /* NumPy's str() layout */
}

int main(void) {
  /* Every result belongs to the innermost scope; ending it frees them all. */
  jx_scope_begin();

  /* ---- arrays: created from host data or by a creation function ---- */
  float data[6] = {1, 2, 3, 4, 5, 6};
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(2, 3), data); /* copies data */
  show("x = f32[2,3]", x);                                   /* [[1. 2. 3.] [4. 5. 6.]] */
  show("arange(0, 1, 0.25)", jx_arange(JX_F64, 0, 1, 0.25)); /* [0.   0.25 0.5  0.75] */
  show("eye(3) as i32", jx_eye(JX_I32, 3));

  /* ---- elementwise ops broadcast like NumPy and promote like JAX ---- */
  jx_array *y = jx_add(jx_mul(x, jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1)); /* 2x + 1 */
  show("2x + 1", y);
  jx_array *row = jx_array_from(JX_F32, JX_SHAPE(3), (float[]){10, 20, 30});
  show("x + row (broadcast over rows)", jx_add(x, row));
  show("exp(x) / e", jx_div(jx_exp(x), jx_scalar(JX_F32, 2.718281828)));
  /* a weak scalar takes the array's dtype: an f32 stays f32 */
  printf("dtype of x * 2.0: %s\n\n", jx_dtype_name(jx_dtype_of(jx_mul(x, jx_scalar(JX_F64, 2)))));

  /* ---- reductions: JX_AXES() means all axes; keepdims 0/1 ---- */
  show("sum(x)", jx_sum(x, JX_AXES(), 0));            /* 21.0 */
  show("mean(x, axis=1)", jx_mean(x, JX_AXES(1), 0)); /* [2. 5.] */
  show("max(x, axis=0)", jx_max(x, JX_AXES(0), 0));   /* [4. 5. 6.] */

  /* ---- matmul and softmax ---- */
  jx_array *w = jx_reshape(jx_arange(JX_F32, 0, 6, 1), JX_SHAPE(3, 2));
  show("x @ w", jx_matmul(x, w)); /* [[16. 22.] [34. 49.]] */
  jx_array *p = jx_softmax(x, 1);
  show("softmax(x, axis=1)", p);
  show("rows of the softmax sum to 1", jx_sum(p, JX_AXES(1), 0));

  /* ---- random numbers: the same bits as jax.random for the same key ---- */
  jx_array *key = jx_random_key(0);
  jx_array *keys = jx_random_split(key, 2);
  (void)keys;
  show("normal(key(0), f32[3])", jx_random_normal(key, JX_F32, JX_SHAPE(3)));
  show("uniform(key(0), f32[2,2], 0, 10)", jx_random_uniform(key, JX_F32, JX_SHAPE(2, 2), 0, 10));

  /* ---- reading values back to the host ---- */
  float out[6];
  if (jx_read(y, out, sizeof out) == JX_OK) printf("y[1][2] read on the host: %g\n\n", out[5]);
  printf("sum(x) as a double: %g\n\n", jx_item(jx_sum(x, JX_AXES(), 0)));

  /* ---- errors: a bad call records an error with this file:line and returns a
   * poisoned array; later ops pass the poison along without crashing ---- */
  jx_array *bad = jx_matmul(x, x); /* f32[2,3] @ f32[2,3]: the inner dims differ */
  jx_array *worse = jx_exp(jx_add(bad, jx_scalar(JX_F32, 1)));
  show("the poisoned result", worse);
  if (jx_last_status() != JX_OK) printf("error (code %d): %s\n", jx_last_status(), jx_last_error());
  jx_clear_error();

  jx_scope_end();
  jx_shutdown(); /* frees the root scope and caches */
  return 0;
}
