/* The collectives of a job at a coordinator, by host (comm_hosts.h). */
#include "comm_hosts.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jx/array.h>

#include "../base/env.h"
#include "shm_group.h"

typedef struct hcomm {
  int n, me;  /* members; this process's place among them */
  int *world; /* per member: its process id */
  int *host;  /* per member: its host (the host's lowest process id) */
  char label[160];
  int spans;           /* hosts the members are on */
  int crowded;         /* some host has several members */
  int first;           /* this process is its host's first member (it talks to the other hosts) */
  jx_shm_group *local; /* the members on this host, in member order */
  jx_mpi_comm *flat;   /* Gloo: every member (spans > 1) */
  jx_mpi_comm *hosts;  /* Gloo: each host's first member (spans > 1 and crowded) */
  pthread_mutex_t mu;  /* one collective at a time */
  int broken;
  char reason[JX_MPI_MSG];
  struct hcomm *next;
} hcomm;

static const jx_mpi_api *gloo;
static jx_kv *store;
static int my_id, nproc, nhosts;
static int *host_of;             /* per process: its host's lowest process id */
static jx_mpi_comm *gloo_world;  /* Gloo: every process, for what is gathered across hosts */
static jx_shm_group *host_world; /* every process of this host, in id order */
static pthread_mutex_t split_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned split_serial;
static hcomm *comms; /* under split_mu */
static int any_failure;

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
  return h;
}

static uint64_t host_identity(void) {
  char text[600];
  const char *id = jx_env_string("JX_HOST_ID");
  if (id && *id) {
    snprintf(text, sizeof text, "id %s", id);
  } else {
    char name[256] = "";
    struct stat shm = {0}, ns = {0};
    gethostname(name, sizeof name - 1);
    stat("/dev/shm", &shm);
    stat("/proc/self/ns/pid", &ns);
    snprintf(text, sizeof text, "%s %llu:%llu %llu", name, (unsigned long long)shm.st_dev,
             (unsigned long long)shm.st_ino, (unsigned long long)ns.st_ino);
  }
  return fnv(text, strlen(text));
}

static void fail_note(void) { __atomic_store_n(&any_failure, 1, __ATOMIC_RELAXED); }

/* An all-gather of fixed-size records of every process, in id order. */
static int gather_all(const void *mine, void *all, size_t bytes, double timeout_s, char *msg,
                      size_t cap) {
  int64_t *counts = malloc(sizeof *counts * 2 * (size_t)nproc);
  if (!counts) return snprintf(msg, cap, "out of memory"), 1;
  int64_t *displs = counts + nproc;
  for (int p = 0; p < nproc; p++) {
    counts[p] = (int64_t)bytes;
    displs[p] = p * (int64_t)bytes;
  }
  jx_mpi_op o = {
      .kind = JX_MPI_ALLGATHERV, .send = mine, .recv = all, .rcounts = counts, .rdispls = displs};
  int st = nhosts == 1 && host_world ? jx_shm_group_run(host_world, &o, timeout_s, msg, cap)
                                     : gloo->run(gloo_world, &o, timeout_s, msg, cap);
  free(counts);
  return st;
}

/* The group of this host's processes among those of procs (n, in their
 * order): key names its segment in the store. */
static jx_shm_group *open_local(const int *procs, int n, const char *label, const char *tag,
                                double timeout_s, char *msg, size_t cap) {
  int *mine = malloc(sizeof *mine * (size_t)n), m = 0, me = 0;
  if (!mine) return snprintf(msg, cap, "out of memory"), NULL;
  for (int i = 0; i < n; i++)
    if (host_of[procs[i]] == host_of[my_id]) {
      if (procs[i] == my_id) me = m;
      mine[m++] = procs[i];
    }
  char key[96];
  snprintf(key, sizeof key, "shm/%s/%d", tag, mine[0]);
  jx_shm_group *g = jx_shm_group_open(me, m, mine, label, store, key, timeout_s, msg, cap);
  free(mine);
  return g;
}

static int h_init(double timeout_s, int *rank, int *size, char *msg, size_t cap) {
  if (gloo->init(timeout_s, rank, size, msg, cap)) return 1;
  char why[JX_MPI_MSG] = "";
  uint64_t mine = host_identity(), *all = malloc(sizeof *all * (size_t)nproc);
  host_of = malloc(sizeof *host_of * (size_t)nproc);
  int *everyone = malloc(sizeof *everyone * (size_t)nproc);
  int st = !all || !host_of || !everyone;
  if (st) snprintf(why, sizeof why, "out of memory");
  if (!st)
    st = gloo->split(1, my_id, 0x6a78686f737473ULL, "all processes", timeout_s, &gloo_world, why,
                     sizeof why) ||
         gather_all(&mine, all, sizeof mine, timeout_s, why, sizeof why);
  nhosts = 0;
  for (int p = 0; p < nproc && !st; p++) {
    everyone[p] = p;
    host_of[p] = p;
    for (int q = 0; q < p && host_of[p] == p; q++)
      if (all[q] == all[p]) host_of[p] = q;
    nhosts += host_of[p] == p;
  }
  if (!st)
    host_world =
        open_local(everyone, nproc, "the processes of a host", "host", timeout_s, why, sizeof why);
  free(all);
  free(everyone);
  if (st || !host_world) {
    snprintf(msg, cap, "process %d: meeting the processes of its host: %s", my_id, why);
    fail_note();
    return 1;
  }
  return 0;
}

static void free_comm(hcomm *c) {
  jx_shm_group_close(c->local);
  free(c->world);
  free(c->host);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

typedef struct {
  int64_t key;
  int id;
} member_key;

/* "process 3" / "processes 1, 3": the ids of the first n of m */
static void list_ids(const member_key *m, int n, char *out, size_t cap) {
  size_t len = (size_t)snprintf(out, cap, "%s", n == 1 ? "process" : "processes");
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%d", i ? ", " : " ", m[i].id);
}

static int by_key(const void *a, const void *b) {
  const member_key *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int h_split(int member, int key, uint64_t check, const char *label, double timeout_s,
                   jx_mpi_comm **out, char *msg, size_t cap) {
  *out = NULL;
  pthread_mutex_lock(&split_mu);
  unsigned serial = ++split_serial;
  char what[300], why[JX_MPI_MSG] = "";
  snprintf(what, sizeof what, "making the communicators of %s: ", label);
  uint64_t mine[3] = {check, (uint64_t)(member != 0), (uint64_t)(int64_t)key};
  uint64_t *all = malloc(sizeof *all * 3 * (size_t)nproc);
  member_key *order = malloc(sizeof *order * (size_t)nproc);
  hcomm *c = calloc(1, sizeof *c);
  int st = !all || !order || !c;
  if (st) snprintf(why, sizeof why, "out of memory");
  if (!st) st = gather_all(mine, all, sizeof mine, timeout_s, why, sizeof why);
  int ndiffer = 0;
  for (int q = 1; q < nproc && !st; q++)
    if (all[3 * (size_t)q] != all[0]) order[ndiffer++].id = q;
  if (!st && ndiffer) {
    char who[512];
    list_ids(order, ndiffer, who, sizeof who);
    snprintf(why, sizeof why,
             "%s disagree with process 0 on what they make (every process must create the same "
             "meshes that span processes, in the same order)",
             who);
    st = 1;
  }
  int n = 0;
  for (int q = 0; q < nproc && !st; q++)
    if (all[3 * (size_t)q + 1]) order[n++] = (member_key){(int64_t)all[3 * (size_t)q + 2], q};
  if (!st) {
    qsort(order, (size_t)n, sizeof *order, by_key);
    c->n = n;
    c->world = malloc(sizeof *c->world * (size_t)(n ? n : 1));
    c->host = malloc(sizeof *c->host * (size_t)(n ? n : 1));
    st = !c->world || !c->host;
    if (st) snprintf(why, sizeof why, "out of memory");
  }
  int first_of_mine = -1; /* the member index of this host's first member */
  for (int i = 0; i < n && !st; i++) {
    c->world[i] = order[i].id;
    c->host[i] = host_of[order[i].id];
    if (order[i].id == my_id) c->me = i;
    if (c->host[i] == host_of[my_id] && first_of_mine < 0) first_of_mine = i;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = c->host[j] == c->host[i];
    c->spans += !seen;
    c->crowded |= seen;
  }
  if (!st && nhosts > 1) { /* every process makes both, member or not */
    c->first = member && first_of_mine == c->me;
    char hosts_label[200];
    snprintf(hosts_label, sizeof hosts_label, "%s, one process per host", label);
    st = gloo->split(member && c->spans > 1, key, check, label, timeout_s, &c->flat, why,
                     sizeof why) ||
         gloo->split(c->first && c->spans > 1 && c->crowded, first_of_mine, check, hosts_label,
                     timeout_s, &c->hosts, why, sizeof why);
  }
  if (!st && member) {
    char tag[32];
    snprintf(tag, sizeof tag, "%u", serial);
    snprintf(c->label, sizeof c->label, "%s", label);
    c->local = open_local(c->world, n, label, tag, timeout_s, why, sizeof why);
    st = !c->local;
  }
  free(all);
  free(order);
  if (st) {
    if (c && c->world)
      free_comm(c);
    else
      free(c);
    snprintf(msg, cap, "%s%s", what, why);
    fail_note();
    pthread_mutex_unlock(&split_mu);
    return 1;
  }
  if (!member) {
    free_comm(c);
    pthread_mutex_unlock(&split_mu);
    return 0;
  }
  pthread_mutex_init(&c->mu, NULL);
  c->next = comms;
  comms = c;
  pthread_mutex_unlock(&split_mu);
  *out = (jx_mpi_comm *)c;
  return 0;
}

/* ---- collectives that span hosts with several members on some ---- */

static int local_run(hcomm *c, jx_mpi_op o, double timeout_s, char *msg, size_t cap) {
  return jx_shm_group_run(c->local, &o, timeout_s, msg, cap);
}

/* This host's first member runs o over Gloo with the other hosts'; if it
 * fails, its host's members learn why at once. */
static int hosts_run(hcomm *c, jx_mpi_op o, double timeout_s, char *msg, size_t cap) {
  if (!c->first) return 0;
  if (!gloo->run(c->hosts, &o, timeout_s, msg, cap)) return 0;
  jx_shm_group_abort(c->local, msg);
  return 1;
}

/* buf (bytes) from this host's first member to the host's others */
static int local_share(hcomm *c, void *buf, size_t bytes, double timeout_s, char *msg, size_t cap) {
  jx_mpi_op b = {.kind = JX_MPI_BCAST, .count = bytes, .recv = buf, .root = 0};
  return local_run(c, b, timeout_s, msg, cap);
}

/* recv = the reduction over the members of send (count elements) */
static int reduce_across(hcomm *c, const jx_mpi_op *op, const void *send, void *recv, size_t count,
                         double timeout_s, char *msg, size_t cap) {
  jx_mpi_op r = {.kind = JX_MPI_ALLREDUCE,
                 .dtype = op->dtype,
                 .op = op->op,
                 .count = count,
                 .send = send,
                 .recv = recv};
  if (local_run(c, r, timeout_s, msg, cap)) return 1;
  r.send = recv;
  return hosts_run(c, r, timeout_s, msg, cap) ||
         local_share(c, recv, count * jx_dtype_size((jx_dtype)op->dtype), timeout_s, msg, cap);
}

/* An all-gather in three steps, so each byte crosses between hosts once per
 * host rather than once per member: the members of each host gather their
 * blocks into their host's block (member order within it), the hosts' first
 * members gather the host blocks over Gloo (hosts in the order of their
 * first members), each shares the whole with its host, and every member
 * copies the blocks into place at rdispls. */
static int gather_across(hcomm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  const int n = c->n;
  /* per member: its offset in the whole; per host (0, 1, ... in the order of
   * their first members): its members' bytes and its offset in the whole */
  int64_t *at = malloc(sizeof *at * (size_t)n * 4);
  int *first = malloc(sizeof *first * (size_t)n * 2), *host_of_member = first + n;
  if (!at || !first) {
    free(at);
    free(first);
    return snprintf(msg, cap, "all_gather: out of memory"), 1;
  }
  int64_t *host_count = at + n, *host_at = at + 2 * n, *local_count = at + 3 * n;
  int nh = 0, nl = 0, mine = 0;
  for (int q = 0; q < n; q++) {
    int h = 0;
    while (h < nh && c->host[first[h]] != c->host[q]) h++;
    if (h == nh) {
      first[nh] = q;
      host_count[nh++] = 0;
    }
    host_of_member[q] = h;
    host_count[h] += op->rcounts[q];
    if (q == c->me) mine = h;
  }
  int64_t total = 0;
  for (int h = 0; h < nh; h++) host_at[h] = total, total += host_count[h];
  int64_t *fill = calloc((size_t)n, sizeof *fill); /* per host: bytes placed so far */
  char *whole = malloc(total ? (size_t)total : 1);
  int64_t *local_at = malloc(sizeof *local_at * (size_t)n);
  int st = !fill || !whole || !local_at;
  if (st) snprintf(msg, cap, "all_gather: out of memory");
  for (int q = 0; q < n && !st; q++) {
    int h = host_of_member[q];
    at[q] = host_at[h] + fill[h];
    if (h == mine) {
      local_at[nl] = fill[h];
      local_count[nl++] = op->rcounts[q];
    }
    fill[h] += op->rcounts[q];
  }
  if (!st) {
    const char *send = op->send ? op->send : (const char *)op->recv + op->rdispls[c->me];
    jx_mpi_op g = {.kind = JX_MPI_ALLGATHERV,
                   .send = send,
                   .recv = whole + host_at[mine],
                   .rcounts = local_count,
                   .rdispls = local_at};
    st = local_run(c, g, timeout_s, msg, cap);
  }
  if (!st) {
    jx_mpi_op g = {
        .kind = JX_MPI_ALLGATHERV, .recv = whole, .rcounts = host_count, .rdispls = host_at};
    st = hosts_run(c, g, timeout_s, msg, cap) ||
         local_share(c, whole, (size_t)total, timeout_s, msg, cap);
  }
  for (int q = 0; q < n && !st; q++)
    memcpy((char *)op->recv + op->rdispls[q], whole + at[q], (size_t)op->rcounts[q]);
  free(whole);
  free(fill);
  free(local_at);
  free(at);
  free(first);
  return st;
}

static int hierarchical(hcomm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  switch (op->kind) {
  case JX_MPI_ALLREDUCE:
    return reduce_across(c, op, op->send, op->recv, op->count, timeout_s, msg, cap);
  case JX_MPI_REDUCE_SCATTER: {
    size_t es = jx_dtype_size((jx_dtype)op->dtype), total = 0, first = 0;
    for (int q = 0; q < c->n; q++) {
      if (q == c->me) first = total;
      total += (size_t)op->rcounts[q];
    }
    char *all = malloc(total ? total * es : 1);
    if (!all) return snprintf(msg, cap, "reduce_scatter: out of memory"), 1;
    int st = reduce_across(c, op, op->send ? op->send : op->recv, all, total, timeout_s, msg, cap);
    if (!st && op->rcounts[c->me])
      memcpy(op->recv, all + first * es, (size_t)op->rcounts[c->me] * es);
    free(all);
    return st;
  }
  case JX_MPI_BCAST: {
    /* the root's host shares it first; then the hosts' first members; then the other hosts */
    int root_host = c->host[op->root], local_root = 0, host_rank = 0, home = 0;
    for (int q = 0; q < op->root; q++) local_root += c->host[q] == root_host;
    for (int q = 0; q < c->n; q++) {
      int seen = 0;
      for (int j = 0; j < q && !seen; j++) seen = c->host[j] == c->host[q];
      if (!seen && c->host[q] == root_host) break;
      host_rank += !seen;
    }
    home = c->host[c->me] == root_host;
    jx_mpi_op b = *op;
    if (home) {
      b.root = local_root;
      if (local_run(c, b, timeout_s, msg, cap)) return 1;
    }
    b.root = host_rank;
    if (hosts_run(c, b, timeout_s, msg, cap)) return 1;
    b.root = 0;
    return !home && local_run(c, b, timeout_s, msg, cap);
  }
  case JX_MPI_ALLGATHERV: return gather_across(c, op, timeout_s, msg, cap);
  case JX_MPI_BARRIER:
    return local_run(c, *op, timeout_s, msg, cap) || hosts_run(c, *op, timeout_s, msg, cap) ||
           local_run(c, *op, timeout_s, msg, cap);
  default: return gloo->run(c->flat, op, timeout_s, msg, cap);
  }
}

static int h_run(jx_mpi_comm *comm, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  hcomm *c = (hcomm *)comm;
  pthread_mutex_lock(&c->mu);
  int st;
  if (c->broken) {
    snprintf(msg, cap, "the communicator is unusable after an earlier failure: %s", c->reason);
    st = 1;
  } else if (c->spans == 1) {
    st = jx_shm_group_run(c->local, op, timeout_s, msg, cap);
  } else if (!c->crowded) {
    st = gloo->run(c->flat, op, timeout_s, msg, cap);
  } else {
    st = hierarchical(c, op, timeout_s, msg, cap);
  }
  if (st) {
    if (!c->broken) snprintf(c->reason, sizeof c->reason, "%s", msg);
    c->broken = 1;
    jx_shm_group_abort(c->local, msg);
    fail_note();
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static int h_finalize(int abort_now, int code) {
  int st = gloo->finalize(abort_now || __atomic_load_n(&any_failure, __ATOMIC_RELAXED), code);
  pthread_mutex_lock(&split_mu);
  while (comms) {
    hcomm *c = comms;
    comms = c->next;
    free_comm(c);
  }
  pthread_mutex_unlock(&split_mu);
  jx_shm_group_close(host_world);
  host_world = NULL;
  free(host_of);
  host_of = NULL;
  gloo_world = NULL;
  return st;
}

static const char *h_version(void) {
  static char v[300];
  snprintf(v, sizeof v, "%s; shared memory within a host (%d host%s)", gloo->version(), nhosts,
           nhosts == 1 ? "" : "s");
  return v;
}

static const jx_mpi_api hosts_api = {JX_MPI_ABI, h_init, h_split, h_run, h_finalize, h_version};

const jx_mpi_api *jx_hosts_engine(const jx_mpi_api *inner, jx_kv *kv, int me, int n) {
  gloo = inner;
  store = kv;
  my_id = me;
  nproc = n;
  return &hosts_api;
}

void jx_hosts_interrupt(const char *why) { jx_shm_interrupt(why); }
