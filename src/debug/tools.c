/* The debugging tools plugged into the layers they watch (base/hooks.h):
 * installed at load, when the environment's checks (JX_DEBUG_NANS,
 * JX_DEBUG_INFS) are read too. A static link takes this file by the name
 * of its table whether or not the program calls a tool (CMakeLists.txt:
 * JX_STARTUP_SYMBOLS), so the environment's checks hold there too. */
#include <stdlib.h>
#include <string.h>

#include "../base/hooks.h"
#include "debug_internal.h"

const jx_debug_hooks jx_debug_tools_table = {
    .check_eager = jx_nans_check_eager,
    .check_step = jx_nans_check_step,
    .compute = jx_profiler_compute,
    .compute_begin = jx_profiler_compute_begin,
    .collective = jx_profiler_collective,
    .compile = jx_profiler_compile,
    .function_begin = jx_profiler_function_begin,
    .function_end = jx_profiler_function_end,
};

static int env_on(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

__attribute__((constructor)) static void install(void) {
  jx_debug_hooks_install(&jx_debug_tools_table);
  jx_debug_flags |=
      (env_on("JX_DEBUG_NANS") ? JX_DEBUG_NANS : 0) | (env_on("JX_DEBUG_INFS") ? JX_DEBUG_INFS : 0);
}
