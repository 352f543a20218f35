/* Conformance adapters for the indexing ops (golden data from
 * tests/golden/gen_indexing.py). */
#include <string.h>

#include "conformance.h"

static const jx_axes NO_AXES = {0, {0}};
static const jx_shape NO_SHAPE = {0, {0}};

CONF_ONE(a_take, jx_take(in[0], in[1], (int)conf_int(c, "axis", 0)))
CONF_ONE(a_take_along_axis, jx_take_along_axis(in[0], in[1], (int)conf_int(c, "axis", 0)))
CONF_ONE(a_one_hot, jx_one_hot(in[0], conf_int(c, "n", 0), conf_dtype(c, "dtype", JX_F32)))
CONF_ONE(a_segment_sum, jx_segment_sum(in[0], in[1], conf_int(c, "n", 0)))

static jx_status a_gather(const conf_case *c, int nin, jx_array *const *in, int *nout,
                          jx_array **out) {
  (void)nin;
  jx_gather_dims d = {conf_axes(c, "offset", NO_AXES), conf_axes(c, "collapsed", NO_AXES),
                      conf_axes(c, "sim", NO_AXES), (int)conf_int(c, "ivd", 0)};
  *nout = 1;
  out[0] = jx_gather(in[0], in[1], &d, conf_shape(c, "sizes", NO_SHAPE),
                     (jx_gather_mode)conf_int(c, "mode", 0));
  return jx_last_status();
}

static jx_status a_scatter(const conf_case *c, int nin, jx_array *const *in, int *nout,
                           jx_array **out) {
  (void)nin;
  static const char *const kinds[] = {"set", "add", "mul", "min", "max"};
  const char *kind = conf_str(c, "kind", "set");
  int k = 0;
  while (k < 5 && strcmp(kinds[k], kind) != 0) k++;
  if (k == 5) {
    fprintf(stderr, "%s: unknown scatter kind '%s'\n", c->id, kind);
    return 1;
  }
  jx_scatter_dims d = {conf_axes(c, "uwd", NO_AXES), conf_axes(c, "iwd", NO_AXES),
                       conf_axes(c, "sdod", NO_AXES), (int)conf_int(c, "ivd", 0)};
  *nout = 1;
  out[0] = jx_scatter(in[0], in[1], in[2], &d, (jx_scatter_op)k,
                      (jx_scatter_mode)conf_int(c, "mode", 0));
  return jx_last_status();
}

const conf_op conf_ops_indexing[] = {{"take", a_take},
                                     {"take_along_axis", a_take_along_axis},
                                     {"one_hot", a_one_hot},
                                     {"segment_sum", a_segment_sum},
                                     {"gather", a_gather},
                                     {"scatter", a_scatter},
                                     {NULL, NULL}};
