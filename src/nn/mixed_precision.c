/* Mixed precision: casting parameter trees and function inputs to a compute
 * dtype (bf16) while the master copies stay f32, as jmp's policies and
 * Flax's dtype / param_dtype split do. The casts are ordinary
 * convert_element_type ops, so inside a traced loss the gradient flows back
 * through them and reaches the f32 parameters as f32. */
#include "mixed_precision.h"

int nn_valid_compute_dtype(jx_dtype dt) { return dt == 0 || nn_is_float(dt); }

jx_array *nn_cast_float(jx_array *a, jx_dtype dt) {
  if (!dt || jx_is_poisoned(a)) return a;
  jx_dtype have = jx_dtype_of(a);
  return have != dt && nn_is_float(have) ? jx_astype(a, dt) : a;
}

static jx_array *cast_one(void *ctx, const char *name, jx_array *a) {
  (void)name;
  return nn_cast_float(a, *(const jx_dtype *)ctx);
}

jx_tree *jx_tree_cast(const jx_tree *t, jx_dtype dt) {
  if (!t) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_tree_cast: the tree is NULL");
    return NULL;
  }
  if (!nn_is_float(dt)) {
    jx_report_error(JX_ERR_DTYPE, "jx_tree_cast: %s is not a float dtype", jx_dtype_name(dt));
    return NULL;
  }
  return jx_tree_map(t, cast_one, &dt);
}
