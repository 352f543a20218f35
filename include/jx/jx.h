/* jx: JAX's model in C.
 *
 * A short tour (a whole program):
 *
 *   #include <jx/jx.h>
 *   int main(void) {
 *     jx_array *x = jx_arange(JX_F32, 0, 6, 1);             // [0 1 2 3 4 5]
 *     jx_array *m = jx_reshape(x, JX_SHAPE(2, 3));          // f32[2,3]
 *     jx_array *s = jx_softmax(jx_mul(m, jx_scalar(JX_F32, 0.5)), 1);
 *     jx_print(jx_sum(s, JX_AXES(1), 0), stdout);           // [1. 1.]
 *     jx_array *key = jx_random_key(0);
 *     jx_print(jx_random_normal(key, JX_F32, JX_SHAPE(3)), stdout); // as jax.random
 *     if (jx_last_status() != JX_OK) fprintf(stderr, "%s\n", jx_last_error());
 *     jx_shutdown();
 *   }
 *
 * base.h: errors, scopes, shapes;  array.h: dtypes, arrays, .npy;
 * ops.h: operations;  linalg.h: linear algebra;  random.h: the PRNG;
 * transform.h: functions, jit, grad, vmap. */
#ifndef JX_JX_H
#define JX_JX_H

#include "array.h"
#include "base.h"
#include "cuda.h"
#include "data.h"
#include "debug.h"
#include "distributed.h"
#include "io.h"
#include "linalg.h"
#include "nn.h"
#include "ops.h"
#include "optim.h"
#include "parallel.h"
#include "random.h"
#include "transform.h"

#endif
