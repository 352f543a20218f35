/* jx info: what this machine, build and job offer. Under mpirun or srun it
 * joins the job and process 0 lists every process's host. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jx/jx.h>

#include "cli.h"
#include "../src/base/env.h"

enum { HOST_CAP = 64 };

/* The MPI plugin, looked for where jx_distributed_initialize looks
 * (JX_MPI_PLUGIN, else next to libjx, else the library search path): 1 and
 * its file in out when it loads, else 0 and why. */
static int find_mpi_plugin(char *out, size_t cap) {
  const char *env = jx_env_string("JX_MPI_PLUGIN");
  char beside[1024] = "";
  Dl_info info;
  if (dladdr((void *)&jx_distributed_initialize, &info) && info.dli_fname) {
    snprintf(beside, sizeof beside, "%s", info.dli_fname);
    char *slash = strrchr(beside, '/');
    if (slash)
      snprintf(slash + 1, sizeof beside - (size_t)(slash + 1 - beside), "libjx_mpi.so");
    else
      beside[0] = 0;
  }
  const char *tries[3] = {NULL};
  int n = 0;
  if (env && *env) {
    tries[n++] = env;
  } else {
    if (*beside) tries[n++] = beside;
    tries[n++] = "libjx_mpi.so";
  }
  for (int i = 0; i < n; i++) {
    void *h = dlopen(tries[i], RTLD_LAZY | RTLD_LOCAL);
    if (!h) continue;
    void *api = dlsym(h, "jx_mpi_plugin_api");
    if (api && dladdr(api, &info) && info.dli_fname)
      snprintf(out, cap, "%s", info.dli_fname);
    else
      snprintf(out, cap, "%s is not a jx MPI plugin", tries[i]);
    return api != NULL; /* h stays loaded, as in present() */
  }
  if (env && *env)
    snprintf(out, cap, "JX_MPI_PLUGIN=%s cannot be opened", env);
  else
    snprintf(out, cap,
             "libjx_mpi.so is neither next to libjx nor on the library search path "
             "(build with libopenmpi-dev installed)");
  return 0;
}

/* Every process's host name (hosts[p * HOST_CAP ...]): a [processes,
 * HOST_CAP] byte array, one row from each process, gathered by all. */
static jx_status gather_hosts(char *hosts) {
  int P = jx_process_count(), L = jx_local_device_count();
  char host[HOST_CAP] = "";
  gethostname(host, sizeof host - 1);
  if (P == 1) {
    memcpy(hosts, host, HOST_CAP);
    return JX_OK;
  }
  jx_scope_begin();
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"process", "local"});
  jx_sharding *s = m ? jx_sharding_create(m, "process") : NULL;
  jx_status st = JX_ERR_INVALID_ARGUMENT;
  if (s) {
    jx_array *mine = jx_array_from(JX_U8, JX_SHAPE(1, HOST_CAP), host);
    jx_array *all =
        jx_process_allgather(jx_array_from_process_local(s, JX_SHAPE(P, HOST_CAP), mine));
    st = jx_read(all, hosts, (size_t)P * HOST_CAP);
  }
  jx_sharding_release(s);
  jx_mesh_release(m);
  jx_scope_end();
  return st;
}

/* Which GPU the local rank picks (process 0's, as this one prints). */
static void print_gpu_choice(int me) {
  int gpus = jx_cuda_device_count(), g = jx_process_gpu(gpus);
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  if (!gpus && !visible) return;
  printf("GPU of process %d (local process %d of %d on its host%s%s): ", me,
         jx_process_local_index(), jx_process_local_count(),
         visible ? ", CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "");
  if (g == -2)
    printf("none: %s\n", jx_last_error());
  else if (g == -1)
    printf("all %d visible (JX_PLATFORM=cuda runs unsharded programs on CUDA device 0)\n", gpus);
  else if (!visible)
    printf("GPU %d (JX_PLATFORM=cuda runs unsharded programs on CUDA device %d)\n", g, g);
  else { /* the g-th entry of CUDA_VISIBLE_DEVICES */
    const char *e = visible;
    for (int i = 0; i < g && e; i++) e = strchr(e, ',') ? strchr(e, ',') + 1 : NULL;
    printf("visible GPU %d (CUDA_VISIBLE_DEVICES entry %.*s; JX_PLATFORM=cuda runs unsharded "
           "programs on CUDA device %d)\n",
           g, e ? (int)strcspn(e, ",") : 1, e ? e : "?", g);
  }
}

int jx_cmd_info(int argc, char **argv) {
  (void)argc;
  (void)argv;
  /* under a launcher, join the job: devices and processes are then global */
  if (jx_cli_join_job("info")) return 1;
  int P = jx_process_count(), L = jx_local_device_count(), me = jx_process_index();
  char *hosts = calloc((size_t)P, HOST_CAP);
  if (!hosts || gather_hosts(hosts)) {
    fprintf(stderr, "jx info (process %d of %d): gathering host names: %s\n", me, P,
            jx_last_error());
    return 1;
  }
  if (me == 0) {
    printf("devices: %d (%s) in all, %d per process\n", jx_device_count(),
           jx_device_kind(jx_device_get(0)), L);
    printf("  set the count per process with JX_NUM_CPU_DEVICES=N or jx train --devices N\n");
    printf("processes: %d, launcher: %s\n", P, jx_distributed_launcher());
    for (int p = 0; p < P; p++) {
      hosts[(p + 1) * HOST_CAP - 1] = 0;
      printf("  process %d on %s: devices %d..%d\n", p, hosts + p * HOST_CAP, p * L, p * L + L - 1);
    }
    char mpi[1200];
    int have_mpi = find_mpi_plugin(mpi, sizeof mpi);
    printf("build: BLAS: OpenBLAS; multi-process (MPI): %s %s\n",
           have_mpi ? "plugin loadable," : "no plugin:", mpi);
    /* the driver, NVRTC, cuBLASLt and NCCL, each loaded at run time */
    printf("%s\n", jx_cuda_status());
    print_gpu_choice(me);
    const char *cache = jx_env_string("JX_CACHE_DIR");
    printf("kernel cache: %s\n", cache ? cache : "$XDG_CACHE_HOME/jx or ~/.cache/jx");
    fflush(stdout);
  }
  free(hosts);
  if (jx_distributed_shutdown()) {
    fprintf(stderr, "jx info: %s\n", jx_last_error());
    return 1;
  }
  jx_shutdown();
  return 0;
}
