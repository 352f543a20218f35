/* Which launcher started this process (launcher.h): its variables, Slurm's
 * node lists, and the GPU a local rank takes. */
#include "../base/env.h"
#include "launcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "tcp_socket.h"

enum { MAX_HOSTS = 1 << 24, MAX_GROUPS = 8 };

/* A launcher's variable, or one of jx's own (src/base/env.c's table). */
static const char *env_raw(const char *name) {
  return strncmp(name, "JX_", 3) ? getenv(name) : jx_env_string(name);
}

static int env_int(const char *name, int *out) {
  const char *v = env_raw(name);
  if (!v || !*v) return 0;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > MAX_HOSTS) return 0;
  *out = (int)x;
  return 1;
}

static const char *env_text(const char *name) {
  const char *v = env_raw(name);
  return v && *v ? v : NULL;
}

/* ---- Slurm's node lists ---- */

static int digits(const char *p, const char *end) {
  int n = 0;
  while (p + n < end && p[n] >= '0' && p[n] <= '9') n++;
  return n;
}

static long number(const char *p, int n) {
  long x = 0;
  for (int i = 0; i < n && x < MAX_HOSTS; i++) x = x * 10 + (p[i] - '0');
  return x;
}

/* The values of one bracket group's text ("01-04,07"): their count, or -1;
 * value k (zero-padded as written) in out when 0 <= k < the count. */
static long group_values(const char *g, const char *end, long k, char *out, size_t cap) {
  long count = 0;
  for (const char *p = g; p < end;) {
    int n = digits(p, end);
    if (!n) return -1;
    long lo = number(p, n), hi = lo;
    const char *q = p + n;
    if (q < end && *q == '-') {
      int m = digits(q + 1, end);
      if (!m) return -1;
      hi = number(q + 1, m);
      q += 1 + m;
    }
    if (hi < lo || count + (hi - lo + 1) > MAX_HOSTS) return -1;
    if (out && k >= count && k <= count + hi - lo) snprintf(out, cap, "%0*ld", n, lo + (k - count));
    count += hi - lo + 1;
    if (q < end && (*q != ',' || q + 1 == end)) return -1;
    p = q < end ? q + 1 : q;
  }
  return count ? count : -1;
}

/* One element of the list ("rack[1-2]-n[01-04]"): its host count, or -1;
 * host k in host (groups vary last-fastest, as Slurm orders them). */
static long element_hosts(const char *e, const char *end, long k, char *host, size_t cap) {
  const char *open[MAX_GROUPS], *close[MAX_GROUPS];
  long size[MAX_GROUPS], count = 1;
  int ng = 0;
  for (const char *p = e; p < end; p++) {
    if (*p == ']') return -1;
    if (*p != '[') continue;
    const char *q = memchr(p, ']', (size_t)(end - p));
    if (!q || ng == MAX_GROUPS) return -1;
    open[ng] = p;
    close[ng] = q;
    size[ng] = group_values(p + 1, q, -1, NULL, 0);
    if (size[ng] < 0 || count * size[ng] > MAX_HOSTS) return -1;
    count *= size[ng++];
    p = q;
  }
  if (e == end) return -1;
  if (!host || k < 0 || k >= count) return count;
  long index[MAX_GROUPS];
  for (int g = ng - 1; g >= 0; g--) {
    index[g] = k % size[g];
    k /= size[g];
  }
  size_t len = 0;
  const char *p = e;
  for (int g = 0; g <= ng; g++) {
    const char *lit_end = g < ng ? open[g] : end;
    len += (size_t)snprintf(host + (len < cap ? len : cap), len < cap ? cap - len : 0, "%.*s",
                            (int)(lit_end - p), p);
    if (g == ng) break;
    char value[32];
    group_values(open[g] + 1, close[g], index[g], value, sizeof value);
    len += (size_t)snprintf(host + (len < cap ? len : cap), len < cap ? cap - len : 0, "%s", value);
    p = close[g] + 1;
  }
  return count;
}

int jx_slurm_host(const char *list, int i, char *host, size_t cap) {
  if (!list || !*list) return -1;
  long total = 0;
  const char *e = list;
  for (const char *p = list;; p++) {
    if (*p == '[') {
      const char *q = strchr(p, ']');
      if (!q) return -1;
      p = q;
      continue;
    }
    if (*p != ',' && *p) continue;
    long n = element_hosts(e, p, i - total, host, cap);
    if (n < 0 || total + n > MAX_HOSTS) return -1;
    total += n;
    if (!*p) break;
    e = p + 1;
  }
  return (int)total;
}

/* "2(x3),1": the tasks on node `node` (0 when the spec does not say) */
static int tasks_on_node(const char *spec, int node) {
  for (const char *p = spec; p && *p;) {
    char *end;
    long n = strtol(p, &end, 10), times = 1;
    if (end == p) return 0;
    if (!strncmp(end, "(x", 2)) {
      times = strtol(end + 2, &end, 10);
      if (*end != ')') return 0;
      end++;
    }
    if (node < times) return (int)n;
    node -= (int)times;
    p = *end == ',' ? end + 1 : NULL;
  }
  return 0;
}

/* ---- the launchers ---- */

/* need_coordinator: derive it from the node list (else an explicit one is used) */
static jx_status from_slurm(jx_launch *l, int need_coordinator) {
  const char *op = "jx_distributed_initialize";
  int node = 0;
  env_int("SLURM_NODEID", &node);
  if (!env_int("SLURM_STEP_NUM_TASKS", &l->size)) env_int("SLURM_NTASKS", &l->size);
  env_int("SLURM_LOCALID", &l->local_rank);
  const char *per_node = env_text("SLURM_STEP_TASKS_PER_NODE");
  l->local_count = tasks_on_node(per_node ? per_node : getenv("SLURM_TASKS_PER_NODE"), node);
  if (l->size < 2 || !need_coordinator) return JX_OK;
  const char *which = "SLURM_STEP_NODELIST", *list = env_text(which);
  if (!list) list = env_text(which = "SLURM_JOB_NODELIST");
  int job;
  char host[256];
  if (!list)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: srun says process %d of %d but neither SLURM_STEP_NODELIST nor "
                        "SLURM_JOB_NODELIST names the hosts (process 0 serves on the first)",
                        op, l->rank, l->size);
  if (jx_slurm_host(list, 0, host, sizeof host) < 1)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s='%s' is not a Slurm node list (e.g. node[01-04,07],gpu3)", op,
                        which, list);
  if (!env_int("SLURM_JOB_ID", &job))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: srun says process %d of %d but SLURM_JOB_ID ('%s') is not a job "
                        "number; the coordinator's port is derived from it",
                        op, l->rank, l->size, getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "");
  snprintf(l->coordinator, sizeof l->coordinator, "%s:%d", host, 61440 + job % 4096);
  return JX_OK;
}

/* The launcher's rank, size and local rank; l->name NULL when none (or, when
 * an explicit coordinator is given, when the launcher's variables are
 * incomplete). */
static jx_status from_launcher(jx_launch *l, int explicit_coordinator) {
  const char *op = "jx_distributed_initialize";
  *l = (jx_launch){.size = 1};
  if (env_int("OMPI_COMM_WORLD_RANK", &l->rank) && env_int("OMPI_COMM_WORLD_SIZE", &l->size)) {
    l->name = "mpirun";
    l->use_mpi = 1;
    env_int("OMPI_COMM_WORLD_LOCAL_RANK", &l->local_rank);
    env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &l->local_count);
    return JX_OK;
  }
  if (env_int("PMIX_RANK", &l->rank) && env_text("PMIX_NAMESPACE")) {
    l->name = "PMIx";
    l->use_mpi = 1;
    if (!env_int("OMPI_COMM_WORLD_SIZE", &l->size) && !env_int("SLURM_STEP_NUM_TASKS", &l->size) &&
        !env_int("SLURM_NTASKS", &l->size) && !env_int("PMI_SIZE", &l->size)) {
      if (explicit_coordinator) {
        *l = (jx_launch){.size = 1};
        return JX_OK;
      }
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: a PMIx launcher started this process (PMIX_RANK=%d, "
                          "PMIX_NAMESPACE=%s) but no variable gives the process count "
                          "(OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE); jx reads the "
                          "launcher's variables, not the PMIx library",
                          op, l->rank, getenv("PMIX_NAMESPACE"));
    }
    if (!env_int("SLURM_LOCALID", &l->local_rank)) env_int("PMIX_LOCAL_RANK", &l->local_rank);
    return JX_OK;
  }
  if (env_int("PMI_RANK", &l->rank) && env_int("PMI_SIZE", &l->size)) {
    l->name = "PMI (mpiexec)";
    l->use_mpi = 1;
    env_int("MPI_LOCALRANKID", &l->local_rank);
    env_int("MPI_LOCALNRANKS", &l->local_count);
    return JX_OK;
  }
  if (env_int("SLURM_PROCID", &l->rank) &&
      (env_int("SLURM_STEP_NUM_TASKS", &l->size) || env_int("SLURM_NTASKS", &l->size))) {
    l->name = "srun";
    return from_slurm(l, !explicit_coordinator);
  }
  *l = (jx_launch){.size = 1};
  return JX_OK;
}

static jx_status check_shape(const jx_launch *l) {
  if (l->size < 1 || l->rank >= l->size)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_distributed_initialize: %s says process %d of %d; the process ids "
                        "of a job of %d are 0 to %d",
                        l->name, l->rank, l->size, l->size, l->size - 1);
  return JX_OK;
}

jx_status jx_launch_detect(const jx_distributed_options *opts, jx_launch *l) {
  const char *op = "jx_distributed_initialize";
  const char *env = env_text("JX_COORDINATOR_ADDRESS");
  int numbers_given = opts && (opts->num_processes || opts->process_id);
  jx_launch found;
  jx_status st = from_launcher(&found, (opts && opts->coordinator) || (env && !numbers_given));
  if (st) return st;
  *l = found;
  if (opts && opts->coordinator) {
    if (opts->num_processes < 1 || opts->process_id < 0 || opts->process_id >= opts->num_processes)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: with a coordinator ('%s') the options must give num_processes >= 1 "
                          "and process_id in 0 .. num_processes-1, not %d and %d",
                          op, opts->coordinator, opts->num_processes, opts->process_id);
    l->name = "the options";
    l->rank = opts->process_id;
    l->size = opts->num_processes;
    snprintf(l->coordinator, sizeof l->coordinator, "%s", opts->coordinator);
  } else if (env && !numbers_given) {
    /* jx launch, or by hand; a launcher's numbers stand in for missing ones */
    int has_size = env_int("JX_NUM_PROCESSES", &l->size) || found.name;
    int has_rank = env_int("JX_PROCESS_ID", &l->rank) || found.name;
    if (!has_size || !has_rank || l->size < 1 || l->rank >= l->size)
      return jx_error_set(
          JX_ERR_INVALID_ARGUMENT,
          "%s: JX_COORDINATOR_ADDRESS=%s needs JX_NUM_PROCESSES (>= 1) and JX_PROCESS_ID "
          "(0 .. JX_NUM_PROCESSES-1), given '%s' and '%s'",
          op, env, env_text("JX_NUM_PROCESSES") ? env_text("JX_NUM_PROCESSES") : "",
          env_text("JX_PROCESS_ID") ? env_text("JX_PROCESS_ID") : "");
    l->name = "JX_COORDINATOR_ADDRESS";
    l->use_mpi = 0;
    env_int("JX_LOCAL_PROCESS_ID", &l->local_rank);
    env_int("JX_LOCAL_PROCESS_COUNT", &l->local_count);
    snprintf(l->coordinator, sizeof l->coordinator, "%s", env);
  } else if (!found.name) {
    return JX_OK;
  }
  if ((st = check_shape(l))) return st;
  char host[256];
  int port;
  if (!l->use_mpi && l->size > 1 && jx_tcp_split_address(l->coordinator, host, sizeof host, &port))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: the coordinator address '%s' is not host:port (e.g. 10.0.0.1:1234)",
                        op, l->coordinator);
  if (l->local_count && l->local_rank >= l->local_count)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s says this is local process %d of %d on its host", op, l->name,
                        l->local_rank, l->local_count);
  return JX_OK;
}

/* ---- GPUs ---- */

int jx_gpu_for_local_rank(int local_rank, int local_count, const char *visible, int gpus, char *why,
                          size_t cap) {
  int n = gpus;
  if (visible) {
    n = *visible ? 1 : 0;
    for (const char *p = visible; *p; p++) n += *p == ',';
  }
  if (local_count <= 1) return -1;
  if (local_count > n) {
    snprintf(why, cap,
             "this host has %d processes of the job but %d visible GPU(s)%s%s%s: each process "
             "takes one GPU (local process %d takes GPU %d)",
             local_count, n, visible ? " (CUDA_VISIBLE_DEVICES=" : "", visible ? visible : "",
             visible ? ")" : "", local_rank, local_rank);
    return -2;
  }
  return local_rank;
}
