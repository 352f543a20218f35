/* jx info: what this machine and build offer. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <jx/jx.h>

#include "cli.h"

/* Whether an optional library (loaded at run time) is present. */
static const char *present(const char *const *names) {
  for (; *names; names++) {
    void *h = dlopen(*names, RTLD_LAZY | RTLD_LOCAL);
    if (h) {
      dlclose(h);
      return *names;
    }
  }
  return NULL;
}

int jx_cmd_info(int argc, char **argv) {
  (void)argc;
  (void)argv;
  int n = jx_device_count();
  printf("devices: %d (%s), %d local; processes: 1 (this one)\n", n,
         jx_device_kind(jx_device_get(0)), jx_local_device_count());
  printf("  set the count with JX_NUM_CPU_DEVICES=N or jx train --devices N\n");
  const char *cuda[] = {"libcuda.so.1", "libcuda.so", NULL};
  const char *nvrtc[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", NULL};
  const char *nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
  const char *found;
  printf("build: BLAS: OpenBLAS; multi-process (MPI): not built\n");
  printf("optional libraries (loaded at run time):\n");
  printf("  CUDA driver: %s\n", (found = present(cuda)) ? found : "not found");
  printf("  NVRTC:       %s\n", (found = present(nvrtc)) ? found : "not found");
  printf("  NCCL:        %s\n", (found = present(nccl)) ? found : "not found");
  const char *cache = getenv("JX_CACHE_DIR");
  printf("kernel cache: %s\n", cache ? cache : "$XDG_CACHE_HOME/jx or ~/.cache/jx");
  return 0;
}
