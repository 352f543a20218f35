/* jx_jit (jit.c). A jit with shardings is the parallel layer's
 * (parallel/sharded_jit.c), which installs it at load. */
#ifndef JX_SRC_COMPILE_JIT_H
#define JX_SRC_COMPILE_JIT_H

#include <jx/transform.h>

typedef jx_fn *(*jx_jit_sharded_fn)(jx_fn *f, const jx_jit_options *opts);
void jx_jit_sharded_install(jx_jit_sharded_fn jit_sharded);

#endif
