/* What the parallel layer plugs into the layers below it, at load: eager ops
 * and programs on sharded arrays run on their mesh (trace/follow_data.h),
 * executables start collectives ahead (compile/async_collective.h), and
 * jx_jit with shardings is the sharded jit (compile/jit.h). A static link
 * takes this file by name (CMakeLists.txt: JX_STARTUP_SYMBOLS). */
#include "../compile/jit.h"
#include "../trace/follow_data.h"
#include "collective.h"
#include "sharded_eager.h"
#include "sharded_jit.h"

static const char *spec_of(const jx_array *a) { return jx_sharding_spec(jx_sharding_of(a)); }

static const jx_follow_data_hooks follow_data = {jx_eager_follows_data, jx_sharded_bind,
                                                 jx_follows_data, jx_follow_data_run, spec_of};

static const jx_async_collectives started_ahead = {jx_collective_start, jx_collective_finish};

void jx_parallel_install(void);

__attribute__((constructor)) void jx_parallel_install(void) {
  jx_follow_data_install(&follow_data);
  jx_async_collectives_install(&started_ahead);
  jx_jit_sharded_install(jx_jit_sharded);
}
