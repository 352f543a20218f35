/* The --mesh flag of the subcommands: "data=4,model=2" -> a mesh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "cli.h"

jx_mesh *jx_cli_mesh(const char *spec, int devices) {
  char names[4][64];
  const char *ptrs[4];
  int64_t sizes[4];
  int n = 0;
  if (!*spec) {
    snprintf(names[0], 64, "data");
    sizes[0] = devices;
    n = 1;
  } else {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, ","); tok && n < 4; tok = strtok(NULL, ",")) {
      char *eq = strchr(tok, '=');
      if (!eq) {
        jx_report_error(JX_ERR_INVALID_ARGUMENT, "--mesh wants name=size pairs, got '%s'", tok);
        return NULL;
      }
      *eq = 0;
      snprintf(names[n], 64, "%s", tok);
      sizes[n++] = strtoll(eq + 1, NULL, 10);
    }
  }
  for (int i = 0; i < n; i++) ptrs[i] = names[i];
  int64_t total = 1;
  for (int i = 0; i < n; i++) total *= sizes[i];
  /* every process must own part of the mesh: it must cover all devices */
  if (jx_process_count() > 1 && total != devices) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "the mesh '%s' has %lld devices but the job has %d (%d processes x %d "
                    "devices; --devices counts each process's): the mesh must cover all of them",
                    spec, (long long)total, devices, jx_process_count(), jx_local_device_count());
    return NULL;
  }
  return jx_mesh_create(jx_shape_make(n, sizes), ptrs);
}
