/* The TCP engine's job (tcp_engine.h): the rendezvous at the coordinator,
 * the communicators, and the end.
 *
 * Rendezvous. Every process listens on a port of its own (ephemeral), then
 * connects to the coordinator (retrying until the deadline: process 0 may
 * start last) and sends its process id, the process count it was given and
 * its address (the interface it reached the coordinator through, and its
 * port). Process 0 serves the coordinator on a thread: it checks the ids (a
 * count that differs, an id out of range, two processes with one id: a
 * message naming them, sent to every process that came) and answers with
 * the table of addresses, or at the deadline names the processes that did
 * not arrive.
 *
 * Communicators. Each has its own connections, one per pair of members: the
 * member with the higher place connects to the one with the lower, and
 * says which communicator (its serial number: splits are collective, so
 * every process numbers them alike) and which process it is. A connection
 * accepted for a later communicator waits in a stash until it is wanted. A
 * split first agrees, over the control communicator of all processes made
 * at the rendezvous, on what is being made (check) and who is in it.
 *
 * The end. A process that ends after a failed collective first connects to
 * every other's listener with a notice (MAGIC_GONE): a failure spreads as
 * the failing processes end, and the notices let the others name the
 * process that failed first (tcp_transport.c's blame) rather than those
 * that followed. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_engine.h"

#define MAGIC_JOIN 0x6a78746aU /* "jxtj": a process joining */
#define MAGIC_LINK 0x6a78746cU /* "jxtl": a communicator's connection */
#define MAGIC_GONE 0x6a787461U /* "jxta": a process ending after a failure of its own */
#define HOST_CAP   64

/* the job, as configured by jx_tcp_engine and met by init */
static char coord_host[256], coord_addr[300];
static int coord_port, nproc, my_id;
static double default_timeout;
static int started, any_failure;
static int listen_fd = -1;
static char (*peer_host)[HOST_CAP];
static int *peer_port;
static jx_mpi_comm *control, *all_comms;
static unsigned split_serial;
static pthread_mutex_t split_mu = PTHREAD_MUTEX_INITIALIZER, list_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
  int fd;
  uint32_t serial, id;
} pending_link;
static pending_link *stash;
static int nstash, stash_cap;
static char *aborted;                                         /* per process: it sent MAGIC_GONE */
static pthread_mutex_t listen_mu = PTHREAD_MUTEX_INITIALIZER; /* listen_fd, stash, aborted */

void jx_tcp_note_failure(void) { __atomic_store_n(&any_failure, 1, __ATOMIC_RELAXED); }

/* ---- the coordinator (process 0's thread) ---- */

typedef struct {
  uint32_t magic, id, nproc, port;
  char host[HOST_CAP];
} join_msg;

typedef struct {
  int lfd, n;
  double deadline, timeout_s;
  char err[JX_MPI_MSG];
} coordinator;

static void put_list(char *buf, size_t cap, const char *head, const int *ids, int count) {
  size_t len = strlen(buf);
  snprintf(buf + len, cap - len, "%s%s", head, count == 1 ? "process" : "processes");
  for (int i = 0; i < count; i++) {
    len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%d", i ? ", " : " ", ids[i]);
  }
}

static void *coordinator_main(void *arg) {
  coordinator *k = arg;
  int n = k->n, got = 0, nextra = 0;
  int *fd_of = malloc(sizeof *fd_of * (size_t)n), *extra = malloc(sizeof *extra * 64);
  join_msg *who = calloc((size_t)n, sizeof *who);
  if (!fd_of || !extra || !who) snprintf(k->err, sizeof k->err, "the coordinator: out of memory");
  for (int q = 0; q < n && fd_of; q++) fd_of[q] = -1;
  while (got < n && !k->err[0]) {
    int fd = jx_tcp_accept(k->lfd, k->deadline);
    if (fd < 0) {
      int *missing = malloc(sizeof *missing * (size_t)n), m = 0;
      for (int q = 0; q < n && missing; q++)
        if (fd_of[q] < 0) missing[m++] = q;
      k->err[0] = 0;
      put_list(k->err, sizeof k->err, "", missing, m);
      size_t len = strlen(k->err);
      snprintf(k->err + len, sizeof k->err - len,
               " did not arrive within %g s (at the coordinator %s; %d of %d came)", k->timeout_s,
               coord_addr, got, n);
      free(missing);
      break;
    }
    join_msg j;
    double wait = jx_tcp_now() + 5 < k->deadline ? jx_tcp_now() + 5 : k->deadline;
    if (jx_tcp_recv_all(fd, &j, sizeof j, wait) || ntohl(j.magic) != MAGIC_JOIN) {
      close(fd); /* not a jx process, or one that went away */
      continue;
    }
    int id = (int)ntohl(j.id), np = (int)ntohl(j.nproc);
    j.host[HOST_CAP - 1] = 0;
    if (np != n)
      snprintf(k->err, sizeof k->err,
               "process %d (at %s) was started with %d processes, but process 0 with %d", id,
               j.host, np, n);
    else if (id < 0 || id >= n)
      snprintf(k->err, sizeof k->err,
               "a process (at %s) says it is process %d, but the process ids of a job of %d are 0 "
               "to %d",
               j.host, id, n, n - 1);
    else if (fd_of[id] >= 0)
      snprintf(k->err, sizeof k->err,
               "two processes say they are process %d (at %s:%u and at %s:%u): every process "
               "needs an id of its own",
               id, who[id].host, ntohl(who[id].port), j.host, ntohl(j.port));
    if (k->err[0]) {
      if (nextra < 64)
        extra[nextra++] = fd;
      else
        close(fd);
    } else {
      fd_of[id] = fd;
      who[id] = j;
      got++;
    }
  }
  if (k->err[0]) /* tell everyone who came, and those still queued, why the job cannot start */
    for (int fd; nextra < 64 && (fd = accept(k->lfd, NULL, NULL)) >= 0;) extra[nextra++] = fd;
  double end = jx_tcp_now() + 2;
  for (int q = 0; q < n + nextra && fd_of && extra && who; q++) {
    int fd = q < n ? fd_of[q] : extra[q - n];
    if (fd < 0) continue;
    uint32_t head[2] = {htonl(k->err[0] ? 1 : 0), htonl((uint32_t)strlen(k->err))};
    if (!jx_tcp_send_all(fd, head, sizeof head, end)) {
      if (k->err[0])
        jx_tcp_send_all(fd, k->err, strlen(k->err), end);
      else
        jx_tcp_send_all(fd, who, sizeof *who * (size_t)n, end);
    }
  }
  /* close once each process has read its answer and closed (closing a socket with unread
   * bytes, a join message never read, would reset it and could lose the answer) */
  for (int q = 0; q < n + nextra && fd_of && extra; q++) {
    int fd = q < n ? fd_of[q] : extra[q - n];
    if (fd < 0) continue;
    shutdown(fd, SHUT_WR);
    char sink[256];
    while (jx_tcp_recv_all(fd, sink, sizeof sink, end) == 0) continue;
    close(fd);
  }
  close(k->lfd);
  free(fd_of), free(extra), free(who);
  return NULL;
}

/* ---- communicators ---- */

static jx_mpi_comm *new_comm(int size, int rank, const char *label) {
  jx_mpi_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->size = size;
  c->rank = rank;
  c->world = calloc((size_t)size, sizeof *c->world);
  c->fd = malloc(sizeof *c->fd * (size_t)size);
  if (!c->world || !c->fd) {
    free(c->world), free(c->fd), free(c);
    return NULL;
  }
  for (int q = 0; q < size; q++) c->fd[q] = -1;
  snprintf(c->label, sizeof c->label, "%s", label);
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_lock(&list_mu);
  c->next_all = all_comms;
  all_comms = c;
  pthread_mutex_unlock(&list_mu);
  return c;
}

static void close_comm(jx_mpi_comm *c) {
  for (int q = 0; q < c->size; q++)
    if (c->fd[q] >= 0) close(c->fd[q]), c->fd[q] = -1;
}

/* Reads what an accepted connection is: a communicator's connection goes to
 * the stash (1), an abort notice is noted (0, closed). Under listen_mu. */
static int sort_arrival(int fd, double deadline) {
  uint32_t h[3];
  if (jx_tcp_recv_all(fd, h, sizeof h, deadline)) {
    close(fd);
    return 0;
  }
  uint32_t magic = ntohl(h[0]), id = ntohl(h[2]);
  if (magic == MAGIC_GONE && aborted && id < (uint32_t)nproc) aborted[id] = 1;
  if (magic != MAGIC_LINK) {
    close(fd);
    return 0;
  }
  if (nstash == stash_cap) {
    int cap = stash_cap ? 2 * stash_cap : 16;
    pending_link *p = realloc(stash, sizeof *p * (size_t)cap);
    if (!p) {
      close(fd);
      return 0;
    }
    stash = p, stash_cap = cap;
  }
  stash[nstash++] = (pending_link){fd, ntohl(h[1]), id};
  return 1;
}

/* The connection from process id for communicator serial: from the stash,
 * else accepted (stashing those for later communicators). */
static int take_link(uint32_t serial, int id, double deadline) {
  pthread_mutex_lock(&listen_mu);
  int fd = -1;
  for (;;) {
    for (int i = 0; i < nstash && fd < 0; i++)
      if (stash[i].serial == serial && (int)stash[i].id == id) {
        fd = stash[i].fd;
        stash[i] = stash[--nstash];
      }
    if (fd >= 0) break;
    int a = jx_tcp_accept(listen_fd, deadline);
    if (a < 0) break;
    sort_arrival(a, deadline);
  }
  pthread_mutex_unlock(&listen_mu);
  return fd;
}

int jx_tcp_aborted(int id, double wait_s) {
  /* a split waiting for its connections holds the listener: answer from what
   * arrived so far rather than wait for it */
  if (pthread_mutex_trylock(&listen_mu)) return aborted && aborted[id];
  double end = jx_tcp_now() + wait_s;
  while (listen_fd >= 0 && aborted && !aborted[id]) {
    int a = jx_tcp_accept(listen_fd, end);
    if (a < 0) break;
    sort_arrival(a, end);
  }
  int r = aborted && aborted[id];
  pthread_mutex_unlock(&listen_mu);
  return r;
}

/* Tells every other process that this one ends after a failure of its own,
 * before its connections close (so that they name the process that failed
 * first, not this one). */
static void send_notices(void) {
  double end = jx_tcp_now() + 0.5;
  char why[256];
  for (int q = 0; q < nproc && peer_host; q++) {
    if (q == my_id) continue;
    int fd = jx_tcp_connect(peer_host[q], peer_port[q], end, why, sizeof why);
    if (fd < 0) continue;
    uint32_t h[3] = {htonl(MAGIC_GONE), 0, htonl((uint32_t)my_id)};
    jx_tcp_send_all(fd, h, sizeof h, end);
    close(fd);
  }
}

/* Connects c's members pairwise (c->world set): 0, or 1 with the reason. */
static int link_members(jx_mpi_comm *c, uint32_t serial, double deadline, double timeout_s,
                        char *msg, size_t cap) {
  char why[512] = "it closed the connection";
  for (int q = 0; q < c->rank; q++) { /* lower places first: their listeners queue us */
    int id = c->world[q];
    int fd = jx_tcp_connect(peer_host[id], peer_port[id], deadline, why, sizeof why);
    uint32_t h[3] = {htonl(MAGIC_LINK), htonl(serial), htonl((uint32_t)my_id)};
    if (fd >= 0 && jx_tcp_send_all(fd, h, sizeof h, deadline)) close(fd), fd = -1;
    if (fd < 0) {
      snprintf(msg, cap, "connecting %s: process %d did not arrive within %g s (%s)", c->label, id,
               timeout_s, why);
      return 1;
    }
    c->fd[q] = fd;
  }
  for (int q = c->rank + 1; q < c->size; q++) {
    int fd = take_link(serial, c->world[q], deadline);
    if (fd < 0) {
      snprintf(msg, cap, "connecting %s: process %d did not arrive within %g s", c->label,
               c->world[q], timeout_s);
      return 1;
    }
    c->fd[q] = fd;
  }
  return 0;
}

/* ---- the table ---- */

static int t_init(double timeout_s, int *rank, int *size, char *msg, size_t cap) {
  double deadline = jx_tcp_now() + timeout_s;
  default_timeout = timeout_s;
  char why[512] = "";
  int port = 0, cfd = -1, st = 1;
  coordinator *k = NULL;
  pthread_t thread;
  int have_thread = 0;
  join_msg *table = NULL;
  listen_fd = jx_tcp_listen(0, &port, why, sizeof why);
  if (listen_fd < 0) {
    snprintf(msg, cap, "process %d: %s", my_id, why);
    return 1;
  }
  if (my_id == 0) { /* listen before connecting to ourselves: our own connection queues */
    k = calloc(1, sizeof *k);
    int bound;
    if (k) k->lfd = jx_tcp_listen(coord_port, &bound, why, sizeof why);
    if (!k || k->lfd < 0) {
      snprintf(msg, cap, "process 0 cannot serve as the coordinator at %s: %s", coord_addr, why);
      goto done;
    }
    k->n = nproc, k->deadline = deadline, k->timeout_s = timeout_s;
  }
  cfd = jx_tcp_connect(coord_host, coord_port, deadline, why, sizeof why);
  if (k && k->lfd >= 0) {
    if (pthread_create(&thread, NULL, coordinator_main, k)) {
      close(k->lfd);
      k->lfd = -1;
      snprintf(msg, cap, "process 0 cannot start the coordinator's thread");
      goto done;
    }
    have_thread = 1;
  }
  if (cfd < 0) {
    snprintf(msg, cap,
             "process %d could not reach the coordinator at %s within %g s (is process 0 "
             "running? %s)",
             my_id, coord_addr, timeout_s, why);
    goto done;
  }
  join_msg j = {htonl(MAGIC_JOIN), htonl((uint32_t)my_id), htonl((uint32_t)nproc),
                htonl((uint32_t)port), ""};
  struct sockaddr_storage self;
  socklen_t len = sizeof self;
  /* our address: the interface through which we reach the coordinator */
  if (getsockname(cfd, (struct sockaddr *)&self, &len) == 0 && self.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&self)->sin_addr, j.host, sizeof j.host);
  else
    snprintf(j.host, sizeof j.host, "127.0.0.1");
  uint32_t head[2];
  double answer_by = deadline + 3; /* the coordinator answers at its deadline at the latest */
  if (jx_tcp_send_all(cfd, &j, sizeof j, deadline) ||
      jx_tcp_recv_all(cfd, head, sizeof head, answer_by)) {
    snprintf(msg, cap, "process %d: the coordinator at %s did not answer within %g s", my_id,
             coord_addr, timeout_s);
    goto done;
  }
  if (ntohl(head[0])) {
    char text[JX_MPI_MSG] = "";
    size_t n = ntohl(head[1]) < sizeof text - 1 ? ntohl(head[1]) : sizeof text - 1;
    jx_tcp_recv_all(cfd, text, n, answer_by);
    snprintf(msg, cap, "the coordinator at %s refused the job: %s", coord_addr, text);
    goto done;
  }
  table = malloc(sizeof *table * (size_t)nproc);
  int got_table = table && !jx_tcp_recv_all(cfd, table, sizeof *table * (size_t)nproc, answer_by);
  close(cfd); /* the coordinator waits for it */
  cfd = -1;
  peer_host = malloc(sizeof *peer_host * (size_t)nproc);
  peer_port = malloc(sizeof *peer_port * (size_t)nproc);
  aborted = calloc((size_t)nproc, 1);
  if (!table || !peer_host || !peer_port || !aborted) {
    snprintf(msg, cap, "out of memory");
    goto done;
  }
  if (!got_table) {
    snprintf(msg, cap, "process %d: the coordinator at %s closed before sending the table", my_id,
             coord_addr);
    goto done;
  }
  for (int q = 0; q < nproc; q++) {
    memcpy(peer_host[q], table[q].host, HOST_CAP);
    peer_host[q][HOST_CAP - 1] = 0;
    peer_port[q] = (int)ntohl(table[q].port);
  }
  control = new_comm(nproc, my_id, "all processes");
  if (!control) {
    snprintf(msg, cap, "out of memory");
    goto done;
  }
  for (int q = 0; q < nproc; q++) control->world[q] = q;
  if (link_members(control, 0, deadline, timeout_s, msg, cap)) goto done;
  *rank = my_id;
  *size = nproc;
  started = 1;
  st = 0;
done:
  if (cfd >= 0) close(cfd);
  if (st) { /* no job: nothing stays open */
    if (control) close_comm(control);
    close(listen_fd);
    listen_fd = -1;
  }
  if (have_thread) {
    pthread_join(thread, NULL);
    if (st && k->err[0]) snprintf(msg, cap, "the coordinator at %s: %s", coord_addr, k->err);
  } else if (k && k->lfd >= 0) {
    close(k->lfd);
  }
  free(k);
  free(table);
  return st;
}

static int by_key(const void *a, const void *b) {
  const int64_t *x = a, *y = b; /* {key, id} */
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

static int t_split(int member, int key, uint64_t check, const char *label, double timeout_s,
                   jx_mpi_comm **out, char *msg, size_t cap) {
  *out = NULL;
  pthread_mutex_lock(&split_mu);
  double deadline = jx_tcp_now() + timeout_s;
  uint64_t *all = calloc((size_t)nproc * 3, sizeof *all);
  int64_t *counts = malloc(sizeof *counts * 2 * (size_t)nproc), *order = NULL;
  int st = 1, n = 0, *differ = NULL;
  char why[JX_MPI_MSG] = "";
  if (!all || !counts) {
    snprintf(msg, cap, "making the communicators of %s: out of memory", label);
    goto done;
  }
  for (int q = 0; q < nproc; q++) counts[q] = 24, counts[nproc + q] = 24 * q;
  uint64_t *mine = all + 3 * my_id;
  mine[0] = check, mine[1] = (uint64_t)(member != 0), mine[2] = (uint64_t)(int64_t)key;
  jx_mpi_op o = {
      .kind = JX_MPI_ALLGATHERV, .recv = all, .rcounts = counts, .rdispls = counts + nproc};
  if (jx_tcp_run(control, &o, timeout_s, why, sizeof why)) {
    snprintf(msg, cap, "making the communicators of %s: %s", label, why);
    goto done;
  }
  differ = malloc(sizeof *differ * (size_t)nproc);
  order = malloc(sizeof *order * 2 * (size_t)nproc);
  if (!differ || !order) {
    snprintf(msg, cap, "making the communicators of %s: out of memory", label);
    goto done;
  }
  int nd = 0;
  for (int q = 1; q < nproc; q++)
    if (all[3 * q] != all[0]) differ[nd++] = q;
  if (nd) {
    snprintf(msg, cap, "making the communicators of %s: ", label);
    put_list(msg, cap, "", differ, nd);
    size_t len = strlen(msg);
    snprintf(msg + len, cap - len,
             " disagree with process 0 on what they make (every process must create the same "
             "meshes that span processes, in the same order)");
    goto done;
  }
  uint32_t serial = ++split_serial; /* every process counts every split */
  for (int q = 0; q < nproc; q++)
    if (all[3 * q + 1]) order[2 * n] = (int64_t)all[3 * q + 2], order[2 * n + 1] = q, n++;
  qsort(order, (size_t)n, 2 * sizeof *order, by_key);
  if (!member) {
    st = 0;
    goto done;
  }
  int me = 0;
  for (int i = 0; i < n; i++)
    if (order[2 * i + 1] == my_id) me = i;
  jx_mpi_comm *c = new_comm(n, me, label);
  if (!c) {
    snprintf(msg, cap, "making the communicators of %s: out of memory", label);
    goto done;
  }
  for (int i = 0; i < n; i++) c->world[i] = (int)order[2 * i + 1];
  if (link_members(c, serial, deadline, timeout_s, msg, cap)) goto done;
  *out = c;
  st = 0;
done:
  if (st) jx_tcp_note_failure();
  free(all), free(counts), free(order), free(differ);
  pthread_mutex_unlock(&split_mu);
  return st;
}

static int t_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  return jx_tcp_run(c, op, timeout_s, msg, cap);
}

static void close_everything(void) {
  pthread_mutex_lock(&list_mu);
  for (jx_mpi_comm *c = all_comms; c; c = c->next_all) close_comm(c);
  pthread_mutex_unlock(&list_mu);
  pthread_mutex_lock(&listen_mu);
  for (int i = 0; i < nstash; i++) close(stash[i].fd);
  nstash = 0;
  if (listen_fd >= 0) close(listen_fd), listen_fd = -1;
  pthread_mutex_unlock(&listen_mu);
}

/* Orderly: a barrier of all processes within the deadline, then every
 * connection closes. After a failure (or abort_now) this process ends at
 * once with code, as MPI_Abort ends a job: it notifies the others, its
 * connections close, and every other process's next (or current)
 * collective fails at once. */
static int t_finalize(int abort_now, int code) {
  if (!started) return 0;
  if (abort_now || __atomic_load_n(&any_failure, __ATOMIC_RELAXED)) {
    send_notices();
    close_everything();
    fflush(NULL);
    _exit(code ? code : 1);
  }
  jx_mpi_op b = {.kind = JX_MPI_BARRIER};
  char msg[JX_MPI_MSG] = "";
  int st = jx_tcp_run(control, &b, default_timeout, msg, sizeof msg);
  if (st) fprintf(stderr, "jx: the TCP engine's final barrier failed: %s\n", msg);
  close_everything();
  pthread_mutex_lock(&list_mu);
  while (all_comms) { /* meshes keep their pointers, but never use them after shutdown */
    jx_mpi_comm *c = all_comms;
    all_comms = c->next_all;
    pthread_mutex_destroy(&c->mu);
    free(c->world), free(c->fd), free(c);
  }
  pthread_mutex_unlock(&list_mu);
  free(stash), free(peer_host), free(peer_port), free(aborted);
  stash = NULL, stash_cap = 0, peer_host = NULL, peer_port = NULL, aborted = NULL, control = NULL;
  started = 0;
  return st;
}

static const char *t_version(void) {
  static char v[400];
  snprintf(v, sizeof v, "jx TCP engine (coordinator %s)", coord_addr);
  return v;
}

static const jx_mpi_api tcp_api = {JX_MPI_ABI, t_init, t_split, t_run, t_finalize, t_version};

const jx_mpi_api *jx_tcp_engine(const char *coordinator, int num_processes, int process_id) {
  if (jx_tcp_split_address(coordinator, coord_host, sizeof coord_host, &coord_port)) return NULL;
  snprintf(coord_addr, sizeof coord_addr, "%s", coordinator);
  nproc = num_processes;
  my_id = process_id;
  return &tcp_api;
}
