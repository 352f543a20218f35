/* The CPU backend (backend.h): executable.h's executable. A mesh of CPU
 * devices runs the one executable on each device's thread (jx_spmd_run). */
#include "backend.h"
#include "executable.h"

static jx_status set_donation(const jx_program *p, int nin, const int *donate,
                              const char *fn_name) {
  return jx_executable_set_donation(jx_program_executable(p), nin, donate, fn_name);
}

static jx_status mesh_attach(const jx_program *p, jx_mesh *m, const char *what_name,
                             const char *dump_prefix) {
  (void)m;
  (void)what_name;
  return jx_compile_attach(p, dump_prefix, NULL);
}

const jx_backend jx_backend_cpu = {
    .name = "cpu",
    .attach = jx_compile_attach,
    .set_donation = set_donation,
    .mesh_attach = mesh_attach,
};
