/* Every primitive's number. A row carries its number (jx_prim.id), and a
 * pass that treats primitives differently keeps one table indexed by it, an
 * entry per primitive, instead of comparing row addresses: the compiler's
 * lowering (compile/lowering.h), the sharding rules' families
 * (parallel/propagate.c), the collectives' kinds (parallel/collective.c).
 * Each such table asserts JX_PRIM_COUNT, so adding a primitive here points
 * at every table that must say what becomes of it.
 *
 * The list names the primitives of every layer (the rows live in their
 * family's file, above prims/ for control flow, collectives and linalg); it
 * holds names only, so prims/ references nothing above it. */
#ifndef JX_SRC_PRIMS_PRIM_ID_H
#define JX_SRC_PRIMS_PRIM_ID_H

/* X(name) for each primitive, name as in jx_prim_<name> and its .name */
// clang-format off
#define JX_PRIM_LIST(X) \
  /* prims/unary.c */ \
  X(neg) X(abs) X(sign) X(floor) X(ceil) X(round) X(exp) X(exp2) X(expm1) X(log) X(log1p) \
  X(sqrt) X(rsqrt) X(cbrt) X(tanh) X(logistic) X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) \
  X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(erf) X(erf_inv) X(lgamma) X(digamma) \
  X(is_finite) X(not) X(integer_pow) X(population_count) X(stop_gradient) X(polygamma) \
  /* prims/binary.c */ \
  X(add) X(sub) X(mul) X(div) X(rem) X(pow) X(max) X(min) X(atan2) X(and) X(or) X(xor) \
  X(shift_left) X(shift_right_logical) X(shift_right_arithmetic) X(nextafter) X(eq) X(ne) X(lt) \
  X(le) X(gt) X(ge) \
  /* prims/complex.c */ \
  X(real) X(imag) X(conj) X(complex) \
  /* prims/select.c, fma.c, convert.c */ \
  X(select_n) X(clamp) X(fma) X(convert_element_type) X(bitcast_convert_type) \
  /* prims/shape.c */ \
  X(broadcast_in_dim) X(reshape) X(squeeze) X(expand_dims) X(transpose) X(rev) X(iota) \
  /* prims/slicing.c, gather.c */ \
  X(pad) X(concatenate) X(slice) X(dynamic_slice) X(dynamic_update_slice) X(gather) X(scatter) \
  X(scatter_add) X(scatter_mul) X(scatter_min) X(scatter_max) \
  /* prims/reduce.c, cumulative.c, sort.c */ \
  X(reduce_sum) X(reduce_prod) X(reduce_max) X(reduce_min) X(reduce_and) X(reduce_or) X(argmax) \
  X(argmin) X(cumsum) X(cumprod) X(cummax) X(cummin) X(sort) X(top_k) \
  /* prims/dot.c, conv.c, window.c, random.c */ \
  X(dot_general) X(conv_general_dilated) X(reduce_window_sum) X(reduce_window_max) \
  X(reduce_window_min) X(threefry2x32) X(random_bits) \
  /* transform/: control flow, custom rules, axis_index */ \
  X(cond) X(while) X(scan) X(remat) X(custom_vjp_call) X(custom_lin) X(custom_jvp_call) \
  X(axis_index) \
  /* parallel/ */ \
  X(sharding_constraint) X(shard_map) X(psum) X(pmax) X(pmin) X(all_gather) X(psum_scatter) \
  X(all_to_all) X(ppermute) X(pvary) \
  /* linalg/ */ \
  X(cholesky) X(triangular_solve) X(lu) X(eigh) X(qr) X(svd) X(pinv) X(eig) \
  /* fft/ */ \
  X(fft) \
  /* debug/ */ \
  X(debug_print)
// clang-format on

/* JX_PRIM_<name>; 0 is no primitive, so a row that forgets its number is
 * caught (the registry's test checks every row) rather than taken for neg. */
typedef enum {
  JX_PRIM_NONE,
#define JX_PRIM_ENUM_(name) JX_PRIM_##name,
  JX_PRIM_LIST(JX_PRIM_ENUM_)
#undef JX_PRIM_ENUM_
      JX_PRIM_COUNT
} jx_prim_id;

#endif
