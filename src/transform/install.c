/* What the transform layer plugs into the layers below it, at load: the ops
 * with JAX's custom derivatives (softmax, relu, ...) are made with
 * jx_custom_jvp (ops/ops_util.h). A static link takes this file by name
 * (CMakeLists.txt: JX_STARTUP_SYMBOLS). */
#include <jx/transform.h>

#include "../ops/ops_util.h"

void jx_transform_install(void);

__attribute__((constructor)) void jx_transform_install(void) {
  jx_ops_custom_jvp_install(jx_custom_jvp);
}
