/* The debugging tools plugged into the layers they watch (base/hooks.h):
 * installed at load, when the environment's checks (JX_DEBUG_NANS,
 * JX_DEBUG_INFS) are read too. A static link takes this file by name
 * whether or not the program calls a tool (CMakeLists.txt:
 * JX_STARTUP_SYMBOLS), so the environment's checks hold there too. */
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/hooks.h"
#include "debug_internal.h"

static const jx_debug_hooks tools = {
    .check_eager = jx_nans_check_eager,
    .check_step = jx_nans_check_step,
    .compute = jx_profiler_compute,
    .compute_begin = jx_profiler_compute_begin,
    .collective = jx_profiler_collective,
    .compile = jx_profiler_compile,
    .function_begin = jx_profiler_function_begin,
    .function_end = jx_profiler_function_end,
    .branch = jx_profiler_branch,
};

void jx_debug_install(void);

__attribute__((constructor)) void jx_debug_install(void) {
  jx_debug_hooks_install(&tools);
  jx_debug_flags |= (jx_env_flag("JX_DEBUG_NANS") ? JX_DEBUG_NANS : 0) |
                    (jx_env_flag("JX_DEBUG_INFS") ? JX_DEBUG_INFS : 0);
}
