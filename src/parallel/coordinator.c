/* A job that meets at a coordinator (coordinator.h).
 *
 * init: process 0 serves the store at the coordinator's port (before it
 * connects to it itself, so its own connection queues), unless
 * JX_COORDINATOR_SERVED says another process serves it (a launcher, a
 * service of its own: jx_kv_server_start with the job's token); every process
 * connects (retrying until the deadline: process 0 may start last),
 * presents the job's token and joins: the store answers once every process
 * came, or names what is wrong (an id out of range, two processes with one
 * id, a process count that differs, the processes that did not arrive).
 * Then the Gloo plugin connects the processes through the store, and
 * comm_hosts.c groups them by host (shared memory within one, Gloo across).
 *
 * finalize: the plugin's (a barrier, or the end of the process after a
 * failure), then the store closes; process 0 stops serving last. After a
 * failure, process 0 serves on until the others have left (for a few
 * seconds at most), so that they can still find out from the store who
 * failed (jx_gloo.cc) before its end takes the store with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>

#include "../base/env.h"
#include "comm_hosts.h"
#include "coordinator.h"
#include "plugin_open.h"
#include "tcp_socket.h"

static char coord_addr[300];
static int coord_port, nproc, my_id;
static jx_kv_server *server;
static jx_kv *kv;
static const jx_mpi_api *gloo;
static void (*gloo_interrupt)(const char *why);
static int failed; /* a collective or split failed */
#define LINGER_S 3

jx_kv *jx_coordinator_store(void) { return gloo ? kv : NULL; }

static const char *job_token(void) {
  const char *token = jx_env_string("JX_JOB_TOKEN");
  return token ? token : "";
}

jx_kv *jx_coordinator_connect(double timeout_s, char *msg, size_t cap) {
  if (!gloo) {
    snprintf(msg, cap, "this process did not join a job at a coordinator");
    return NULL;
  }
  return jx_kv_connect(coord_addr, job_token(), timeout_s, msg, cap);
}

/* ---- the store, as the plugin calls it ---- */

static int s_set(void *self, const char *key, const void *value, size_t len, char *msg,
                 size_t cap) {
  return jx_kv_set(self, key, value, len, msg, cap);
}
static int s_get(void *self, const char *key, double timeout_s, void **value, size_t *len,
                 char *msg, size_t cap) {
  return jx_kv_get(self, key, timeout_s, value, len, msg, cap);
}
static int s_wait(void *self, const char *const *keys, int n, double timeout_s, char *msg,
                  size_t cap) {
  return jx_kv_wait(self, keys, n, timeout_s, msg, cap);
}
static jx_plugin_store plugin_store = {NULL, s_set, s_get, s_wait};

static void leave(void) {
  jx_kv_close(kv);
  kv = NULL;
  jx_kv_server_stop(server);
  server = NULL;
  gloo = NULL;
}

void jx_coordinator_interrupt(const char *why) {
  if (!gloo) return;
  jx_hosts_interrupt(why);
  if (gloo_interrupt) gloo_interrupt(why);
}

static const jx_mpi_api *open_gloo(const char *host, char *msg, size_t cap) {
  char why[4096];
  void *h = jx_plugin_open("libjx_gloo.so", "JX_GLOO_PLUGIN",
                           "build jx with Gloo (libgloo-dev installed, cmake -DJX_WITH_GLOO=ON)",
                           why, sizeof why);
  jx_gloo_plugin_fn get = h ? (jx_gloo_plugin_fn)dlsym(h, JX_GLOO_PLUGIN_SYMBOL) : NULL;
  *(void **)&gloo_interrupt = h ? dlsym(h, JX_GLOO_INTERRUPT_SYMBOL) : NULL;
  plugin_store.self = kv;
  const jx_mpi_api *api = get ? get(&plugin_store, my_id, nproc, host) : NULL;
  if (!h)
    snprintf(msg, cap, "%s", why);
  else if (!api || api->abi != JX_MPI_ABI)
    snprintf(msg, cap,
             "the Gloo plugin found is not one of this jx (no %s, or ABI %d, not %d); rebuild it "
             "with this libjx",
             JX_GLOO_PLUGIN_SYMBOL, api ? api->abi : -1, JX_MPI_ABI);
  return api && api->abi == JX_MPI_ABI ? api : NULL;
}

/* ---- the table ---- */

static int c_init(double timeout_s, int *rank, int *size, char *msg, size_t cap) {
  const char *token = job_token();
  char why[1024] = "", host[64];
  if (my_id == 0 && !jx_env_flag("JX_COORDINATOR_SERVED")) {
    int bound;
    server = jx_kv_server_start(coord_port, token, nproc, &bound, why, sizeof why);
    if (!server) {
      snprintf(msg, cap, "process 0 cannot serve as the coordinator at %s: %s", coord_addr, why);
      leave();
      return 1;
    }
  }
  kv = jx_kv_connect(coord_addr, token, timeout_s, why, sizeof why);
  if (!kv) {
    snprintf(msg, cap, "process %d %s%s", my_id, why,
             strstr(why, "could not reach") ? " (is process 0 running?)" : "");
    leave();
    return 1;
  }
  jx_kv_local_host(kv, host, sizeof host);
  /* the whole timeout (the time left would be the one named in messages) */
  if (jx_kv_join(kv, my_id, nproc, host, timeout_s, why, sizeof why)) {
    snprintf(msg, cap, "%s", why);
    leave();
    return 1;
  }
  const jx_mpi_api *api = open_gloo(host, msg, cap);
  if (api) api = jx_hosts_engine(api, kv, my_id, nproc);
  if (!api || api->init(timeout_s, rank, size, msg, cap)) {
    leave();
    return 1;
  }
  gloo = api;
  return 0;
}

static int c_split(int member, int key, uint64_t check, const char *label, double timeout_s,
                   jx_mpi_comm **out, char *msg, size_t cap) {
  int st = gloo->split(member, key, check, label, timeout_s, out, msg, cap);
  if (st) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
  return st;
}

static int c_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  int st = gloo->run(c, op, timeout_s, msg, cap);
  if (st) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
  return st;
}

static int c_finalize(int abort_now, int code) {
  if (!gloo) return 0;
  if (server && (abort_now || __atomic_load_n(&failed, __ATOMIC_RELAXED))) {
    double end = jx_tcp_now() + LINGER_S;
    struct timespec pause = {0, 10 * 1000 * 1000};
    while (jx_kv_server_processes(server) > 1 && jx_tcp_now() < end) nanosleep(&pause, NULL);
  }
  int st = gloo->finalize(abort_now, code);
  leave();
  return st;
}

static const char *c_version(void) {
  static char v[600];
  snprintf(v, sizeof v, "%s, coordinator %s", gloo ? gloo->version() : "Gloo", coord_addr);
  return v;
}

static const jx_mpi_api coordinator_api = {JX_MPI_ABI, c_init,     c_split,
                                           c_run,      c_finalize, c_version};

const jx_mpi_api *jx_coordinator_engine(const char *coordinator, int num_processes,
                                        int process_id) {
  char host[256];
  if (jx_tcp_split_address(coordinator, host, sizeof host, &coord_port)) return NULL;
  snprintf(coord_addr, sizeof coord_addr, "%s", coordinator);
  nproc = num_processes;
  my_id = process_id;
  return &coordinator_api;
}
