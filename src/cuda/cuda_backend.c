/* The CUDA backend (compile/backend.h), registered at start-up: a program
 * without shardings runs on CUDA device 0 (cuda_exec.h), a per-device program
 * on a GPU per mesh position (cuda_mesh.h). jx_cuda_backend is the symbol a
 * static link keeps this object by (-Wl,--undefined=jx_cuda_backend). */
#include "../compile/backend.h"
#include "cuda_exec.h"
#include "cuda_mesh.h"

/* The CUDA build's times are the profiler's (JX_PROFILE), not the jit's. */
static jx_status attach(const jx_program *p, const char *dump_prefix, jx_compile_times *times) {
  (void)times;
  return jx_cuda_compile_attach(p, dump_prefix);
}

const jx_backend jx_cuda_backend = {
    .name = "cuda",
    .attach = attach,
    .set_donation = jx_cuda_set_donation,
    .mesh_attach = jx_cuda_mesh_attach,
    .mesh_fits = jx_cuda_mesh_fits,
};

/* Registers whether or not CUDA is usable here: JX_PLATFORM=cuda on a
 * machine without it then fails saying what is missing, never "not a
 * platform". */
__attribute__((constructor)) static void register_cuda(void) {
  if (jx_backend_register(&jx_cuda_backend)) jx_error_abort(jx_last_status(), jx_last_error());
}
