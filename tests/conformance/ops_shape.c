/* Conformance adapters for the shape and slicing ops (golden data from
 * tests/golden/gen_shape.py). */
#include "conformance.h"

static const jx_axes NO_AXES = {0, {0}};
static const jx_shape NO_SHAPE = {0, {0}};

CONF_ONE(a_reshape, jx_reshape(in[0], conf_shape(c, "shape", NO_SHAPE)))
CONF_ONE(a_transpose, jx_transpose(in[0], conf_axes(c, "axes", NO_AXES)))
CONF_ONE(a_broadcast_to, jx_broadcast_to(in[0], conf_shape(c, "shape", NO_SHAPE)))
CONF_ONE(a_broadcast_in_dim, jx_broadcast_in_dim(in[0], conf_shape(c, "shape", NO_SHAPE),
                                                 conf_axes(c, "dims", NO_AXES)))
CONF_ONE(a_expand_dims, jx_expand_dims(in[0], (int)conf_int(c, "axis", 0)))
CONF_ONE(a_squeeze, jx_squeeze(in[0], conf_axes(c, "axes", NO_AXES)))
CONF_ONE(a_flip, jx_flip(in[0], conf_axes(c, "axes", NO_AXES)))
CONF_ONE(a_concatenate, jx_concatenate(nin, in, (int)conf_int(c, "axis", 0)))
CONF_ONE(a_stack, jx_stack(nin, in, (int)conf_int(c, "axis", 0)))
CONF_ONE(a_slice, jx_slice(in[0], conf_shape(c, "start", NO_SHAPE), conf_shape(c, "stop", NO_SHAPE),
                           conf_shape(c, "step", NO_SHAPE)))
CONF_ONE(a_dynamic_slice, jx_dynamic_slice(in[0], in + 1, conf_shape(c, "sizes", NO_SHAPE)))
CONF_ONE(a_dynamic_update_slice, jx_dynamic_update_slice(in[0], in[1], in + 2))
CONF_ONE(a_pad, jx_pad(in[0], conf_shape(c, "lo", NO_SHAPE), conf_shape(c, "hi", NO_SHAPE),
                       conf_double(c, "value", 0)))
CONF_ONE(a_pad_general,
         jx_pad_general(in[0], in[1], conf_shape(c, "lo", NO_SHAPE), conf_shape(c, "hi", NO_SHAPE),
                        conf_shape(c, "interior", NO_SHAPE)))
CONF_ONE(a_iota, jx_iota(conf_dtype(c, "dtype", JX_F32), conf_shape(c, "shape", NO_SHAPE),
                         (int)conf_int(c, "axis", 0)))

const conf_op conf_ops_shape[] = {{"reshape", a_reshape},
                                  {"transpose", a_transpose},
                                  {"broadcast_to", a_broadcast_to},
                                  {"broadcast_in_dim", a_broadcast_in_dim},
                                  {"expand_dims", a_expand_dims},
                                  {"squeeze", a_squeeze},
                                  {"flip", a_flip},
                                  {"concatenate", a_concatenate},
                                  {"stack", a_stack},
                                  {"slice", a_slice},
                                  {"dynamic_slice", a_dynamic_slice},
                                  {"dynamic_update_slice", a_dynamic_update_slice},
                                  {"pad", a_pad},
                                  {"pad_general", a_pad_general},
                                  {"iota", a_iota},
                                  {NULL, NULL}};
