/* Helpers shared by the layers, initializers, losses and the GPT model of
 * src/nn, which are written on the public API only (jx/jx.h), as a user's
 * library would be. */
#ifndef JX_NN_NN_UTIL_H
#define JX_NN_NN_UTIL_H

#include <jx/jx.h>

/* A poisoned array, for a layer that has just recorded its error: an op
 * given NULL returns one, and the error it would record comes second (the
 * first error of a thread is the one kept). */
jx_array *nn_fail(void);

/* "f32[4,5]" into buf (size >= 96). */
const char *nn_aval(const jx_array *a, char *buf);

/* "<prefix>.<name>" (just name for an empty or NULL prefix) into buf
 * (size >= 256). */
const char *nn_join(char *buf, const char *prefix, const char *name);

/* The parameter "<prefix>.<name>" of t, checked against want[0..rank)
 * (entries < 0 match any size) and to be a float array. A missing
 * parameter is an error unless optional (then NULL, no error). On an error
 * (recorded, naming layer, prefix and parameter) *ok is set to 0. */
jx_array *nn_param(const char *layer, const jx_tree *t, const char *prefix, const char *name,
                   int rank, const int64_t *want, int optional, int *ok);

/* x must be a float array of rank >= min_rank: else an error naming layer
 * and prefix, and 0. A poisoned x gives 0 without a new error. */
int nn_check_input(const char *layer, const char *prefix, jx_array *x, int min_rank);

/* Row i of a u32[n, 2] array of keys (jx_random_split's result), as a key. */
jx_array *nn_key_at(jx_array *keys, int64_t i);

int nn_is_low_float(jx_dtype dt); /* f16 or bf16: layers compute statistics in f32 */
int nn_is_float(jx_dtype dt);

#endif
