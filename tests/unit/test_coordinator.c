/* The job's key-value store (src/parallel/kv_store.h) and the engine of
 * jobs that meet at a coordinator (coordinator.h, the Gloo plugin) without
 * the rest of jx.
 *   - the store: set, get (waiting for a later set), wait (naming the keys
 *     still missing at the deadline), add from several clients; a client
 *     with another job's token is refused, and two jobs on one server do not
 *     see each other's keys;
 * Each case below forks the processes of a small job on this machine, each
 * joins the coordinator through the engine's own table, and reports what it
 * got through a pipe.
 *   - the rendezvous refuses a process id out of range, two processes with
 *     one id, and a process count that differs, with a message naming them,
 *     on every process that came;
 *   - a coordinator that some processes never reach names them at the
 *     deadline; a process that never reaches a coordinator says so;
 *   - a process that ends, or stalls, before a collective is named by the
 *     others: at once, or at their deadline; a collective interrupted by
 *     another thread (jx_coordinator_interrupt) fails at once, saying why; a
 *     process killed while its peers read its buffers (single copy: in an
 *     all-reduce, in an all-to-all) is named by them at once;
 *   - a job of 3 processes (not a power of two): every collective against
 *     values computed here from the definitions, small and large, and the
 *     same bits on every process for a float sum whose
 *     rounding depends on the order; every process sets a key through a
 *     client of its own (jx_coordinator_connect) and sees the others';
 *   - 4 processes on one host, with buffers of 64 KiB or more read from the
 *     peers' processes (single copy: all-reduce, reduce-scatter, all-gather,
 *     broadcast, all-to-all) and with all copied through the
 *     segment (JX_SHM_SINGLE_COPY=0): every collective against the
 *     definitions, and the bits of a large f64 sum in member order on both
 *     paths; a JX_SHM_SINGLE_COPY that is no size is refused, naming it;
 *   - jx_distributed_initialize: options or environment that cannot work
 *     are refused naming what is wrong; two processes join through the
 *     options and meet; two join a store served by another process
 *     (JX_COORDINATOR_SERVED) with their token, and a third with another
 *     token is turned away. */
#define _GNU_SOURCE /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jx/jx.h>

#include "parallel/coordinator.h"
#include "parallel/kv_store.h"
#include "parallel/tcp_socket.h"

enum { MAXP = 4, MSG = 2048 };

/* the cases whose processes get as far as collectives need the Gloo plugin */
#ifdef JX_GLOO_PLUGIN_FILE
#define NEEDS_GLOO() ((void)0)
#else
#define NEEDS_GLOO() skip()
#endif

/* ---- the store ---- */

static jx_kv *client(const char *addr, const char *token) {
  char msg[MSG] = "";
  jx_kv *kv = jx_kv_connect(addr, token, 5, msg, sizeof msg);
  if (!kv) fprintf(stderr, "  %s\n", msg);
  assert_non_null(kv);
  return kv;
}

static void *set_later(void *arg) {
  struct timespec pause = {0, 200 * 1000 * 1000};
  nanosleep(&pause, NULL);
  char msg[MSG];
  assert_int_equal(jx_kv_set(arg, "late", "here", 4, msg, sizeof msg), 0);
  return NULL;
}

static void store_sets_gets_waits_and_adds(void **state) {
  (void)state;
  char msg[MSG] = "", addr[64];
  int port = 0;
  jx_kv_server *s = jx_kv_server_start(0, "secret", 2, &port, msg, sizeof msg);
  assert_non_null(s);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  jx_kv *a = client(addr, "secret"), *b = client(addr, "secret");
  assert_int_equal(jx_kv_set(a, "k", "value", 5, msg, sizeof msg), 0);
  void *v = NULL;
  size_t len = 0;
  assert_int_equal(jx_kv_get(b, "k", 1, &v, &len, msg, sizeof msg), 0);
  assert_int_equal(len, 5);
  assert_string_equal(v, "value");
  free(v);
  /* a get waits for the key: b sets it while a waits */
  pthread_t t;
  double t0 = jx_tcp_now();
  assert_int_equal(pthread_create(&t, NULL, set_later, b), 0);
  assert_int_equal(jx_kv_get(a, "late", 5, &v, &len, msg, sizeof msg), 0);
  pthread_join(t, NULL);
  assert_string_equal(v, "here");
  assert_true(jx_tcp_now() - t0 < 3);
  free(v);
  /* wait names the keys missing at its deadline */
  const char *keys[] = {"k", "x", "late", "y"};
  assert_int_equal(jx_kv_wait(a, keys, 3, 1, msg, sizeof msg), 1);
  fprintf(stderr, "  %s\n", msg);
  assert_non_null(strstr(msg, "'x' was not set within 1 s"));
  assert_int_equal(jx_kv_wait(a, keys, 4, 0.2, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "'x', 'y' were not set within 0.2 s"));
  assert_int_equal(jx_kv_wait(a, (const char *[]){"k", "late"}, 2, 1, msg, sizeof msg), 0);
  /* counters: every client's adds count, negative ones too */
  int64_t x = 0;
  assert_int_equal(jx_kv_add(a, "n", 5, &x, msg, sizeof msg), 0);
  assert_int_equal(x, 5);
  assert_int_equal(jx_kv_add(b, "n", -7, &x, msg, sizeof msg), 0);
  assert_int_equal(x, -2);
  assert_int_equal(jx_kv_get(a, "n", 1, &v, &len, msg, sizeof msg), 0);
  assert_string_equal(v, "-2");
  free(v);
  jx_kv_close(a);
  jx_kv_close(b);
  jx_kv_server_stop(s);
}

static void store_keeps_jobs_apart(void **state) {
  (void)state;
  char msg[MSG] = "", addr[64];
  int port = 0;
  jx_kv_server *s = jx_kv_server_start(0, "one", 1, &port, msg, sizeof msg);
  assert_non_null(s);
  assert_int_equal(jx_kv_server_add_job(s, "two", 1, msg, sizeof msg), 0);
  assert_int_equal(jx_kv_server_add_job(s, "two", 3, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "already serves a job with this token"));
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  assert_null(jx_kv_connect(addr, "three", 5, msg, sizeof msg));
  fprintf(stderr, "  %s\n", msg);
  assert_non_null(strstr(msg, "serves no job with this process's token"));
  jx_kv *a = client(addr, "one"), *b = client(addr, "two");
  assert_int_equal(jx_kv_set(a, "k", "1", 1, msg, sizeof msg), 0);
  void *v = NULL;
  size_t len = 0;
  assert_int_equal(jx_kv_get(b, "k", 0.2, &v, &len, msg, sizeof msg), 1);
  assert_non_null(strstr(msg, "'k' was not set within 0.2 s"));
  assert_int_equal(jx_kv_set(b, "k", "2", 1, msg, sizeof msg), 0);
  assert_int_equal(jx_kv_get(a, "k", 1, &v, &len, msg, sizeof msg), 0);
  assert_string_equal(v, "1");
  free(v);
  jx_kv_close(a);
  jx_kv_close(b);
  jx_kv_server_stop(s);
}

/* a port nobody listens on now */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  getsockname(fd, (struct sockaddr *)&a, &len);
  close(fd);
  return ntohs(a.sin_port);
}

typedef int (*job_body)(const jx_mpi_api *api, int id, char *out, size_t cap);

/* The host each process of the next run_job says it is on (JX_HOST_ID, a
 * test hook); NULL: this machine, all on one host (shared memory). */
static const char *const *job_hosts;
/* The process of the next run_job that may end killed by a signal (-1: none). */
static int job_killed = -1;

/* Forks one process per entry of ids (claiming id ids[i] in a job of
 * counts[i]), each joining with timeout_s and then running body (NULL: just
 * the join); out[i] gets what process i reported. Returns the seconds taken. */
static double run_job(int n, const int *ids, const int *counts, double timeout_s, job_body body,
                      char out[][MSG]) {
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", free_port());
  int pipes[MAXP][2];
  pid_t pid[MAXP];
  double t0 = jx_tcp_now();
  for (int i = 0; i < n; i++) {
    assert_int_equal(pipe(pipes[i]), 0);
    pid[i] = fork();
    assert_true(pid[i] >= 0);
    if (pid[i] == 0) {
      close(pipes[i][0]);
      if (job_hosts) setenv("JX_HOST_ID", job_hosts[i], 1);
      char msg[MSG] = "";
      const jx_mpi_api *api = jx_coordinator_engine(addr, counts[i], ids[i]);
      int rank = -1, size = -1, joined = !api->init(timeout_s, &rank, &size, msg, sizeof msg);
      int failed = !joined;
      if (joined && (rank != ids[i] || size != counts[i]))
        failed = 1, snprintf(msg, sizeof msg, "joined as %d of %d", rank, size);
      else if (joined && !body)
        snprintf(msg, sizeof msg, "joined");
      else if (joined)
        failed = body(api, ids[i], msg, sizeof msg);
      if (joined && !failed && api->finalize(0, 0)) snprintf(msg, sizeof msg, "finalize failed");
      ssize_t w = write(pipes[i][1], msg, strlen(msg) + 1);
      /* after a failure the engine ends the process (resetting its connections) */
      if (joined && failed) api->finalize(0, 1);
      _exit(w > 0 ? 0 : 1);
    }
    close(pipes[i][1]);
  }
  for (int i = 0; i < n; i++) {
    memset(out[i], 0, MSG);
    size_t got = 0;
    ssize_t r;
    while (got < MSG - 1 && (r = read(pipes[i][0], out[i] + got, MSG - 1 - got)) > 0)
      got += (size_t)r;
    close(pipes[i][0]);
    int status = 0;
    waitpid(pid[i], &status, 0);
    assert_true(WIFEXITED(status) || (i == job_killed && WIFSIGNALED(status)));
    fprintf(stderr, "  process %d: %s\n", i, out[i]);
  }
  return jx_tcp_now() - t0;
}

static void refuses_an_id_out_of_range(void **state) {
  (void)state;
  char out[2][MSG];
  run_job(2, (int[]){0, 5}, (int[]){2, 2}, 5, NULL, out);
  for (int i = 0; i < 2; i++) {
    assert_non_null(strstr(out[i], "says it is process 5"));
    assert_non_null(strstr(out[i], "0 to 1"));
  }
}

static void refuses_two_processes_with_one_id(void **state) {
  (void)state;
  char out[3][MSG];
  run_job(3, (int[]){0, 1, 1}, (int[]){3, 3, 3}, 5, NULL, out);
  for (int i = 0; i < 3; i++)
    assert_non_null(strstr(out[i], "two processes say they are process 1"));
}

static void refuses_a_process_count_that_differs(void **state) {
  (void)state;
  char out[2][MSG];
  run_job(2, (int[]){0, 1}, (int[]){2, 3}, 5, NULL, out);
  for (int i = 0; i < 2; i++)
    assert_non_null(strstr(out[i], "process 1 (at 127.0.0.1) was started with 3 processes, but "
                                   "the job has 2"));
}

static void names_the_processes_that_never_came(void **state) {
  (void)state;
  char out[2][MSG];
  double t = run_job(2, (int[]){0, 2}, (int[]){4, 4}, 1, NULL, out);
  for (int i = 0; i < 2; i++)
    assert_non_null(strstr(out[i], "processes 1, 3 did not arrive within 1 s"));
  assert_true(t < 4);
}

static void says_when_nobody_serves_the_coordinator(void **state) {
  (void)state;
  char out[1][MSG];
  double t = run_job(1, (int[]){1}, (int[]){2}, 1, NULL, out);
  assert_non_null(strstr(out[0], "process 1 could not reach the coordinator"));
  assert_non_null(strstr(out[0], "within 1 s"));
  assert_true(t >= 1 && t < 4);
}

/* ---- collectives on a job of 3 ---- */

static int report(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  return 1;
}

#define RUN(c, o)                                                                                  \
  do {                                                                                             \
    if (api->run(c, o, 10, out, cap)) return 1;                                                    \
  } while (0)

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
  return h;
}

static int collectives(const jx_mpi_api *api, int me, char *out, size_t cap) {
  enum { P = 3 };
  jx_mpi_comm *c = NULL, *odd = NULL;
  /* reversed order by key: member m is process P-1-m */
  if (api->split(1, -me, 42, "a test group", 10, &c, out, cap)) return 1;
  if (api->split(me != 1, me, 43, "processes 0 and 2", 10, &odd, out, cap)) return 1;
  if (!c || (me == 1) != (odd == NULL)) return report(out, cap, "wrong membership");
  int rank = P - 1 - me;
  /* all-reduce, small and large (several of Gloo's segments), sum of integer values: exact */
  for (size_t count = 5; count <= 100000; count *= 20000) {
    float *x = malloc(sizeof *x * count), *y = malloc(sizeof *y * count);
    for (size_t i = 0; i < count; i++) x[i] = (float)((me * 7 + (int)i * 3) % 11);
    jx_mpi_op o = {
        .kind = JX_MPI_ALLREDUCE, .dtype = 11 /* f32 */, .count = count, .send = x, .recv = y};
    RUN(c, &o);
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int p = 0; p < P; p++) want += (float)((p * 7 + (int)i * 3) % 11);
      if (y[i] != want) return report(out, cap, "all_reduce[%zu] = %g, want %g", i, y[i], want);
    }
    free(x), free(y);
  }
  /* i64 max, u8 prod, bool (sum = or), in place */
  int64_t a[3] = {me, -me, me * me};
  jx_mpi_op o = {
      .kind = JX_MPI_ALLREDUCE, .dtype = 4, .op = JX_MPI_MAX, .count = 3, .send = a, .recv = a};
  RUN(c, &o);
  if (a[0] != 2 || a[1] != 0 || a[2] != 4) return report(out, cap, "i64 max wrong");
  uint8_t u[2] = {(uint8_t)(me + 2), me == 1}, v[2];
  o = (jx_mpi_op){
      .kind = JX_MPI_ALLREDUCE, .dtype = 5, .op = JX_MPI_PROD, .count = 1, .send = u, .recv = v};
  RUN(c, &o);
  o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 0, .count = 1, .send = u + 1, .recv = v + 1};
  RUN(c, &o);
  if (v[0] != 24 || v[1] != 1) return report(out, cap, "u8 prod %d / bool or %d", v[0], v[1]);
  /* a float sum whose rounding depends on the order: the same bits everywhere */
  enum { N = 40000 };
  double *f = malloc(sizeof *f * N);
  for (int i = 0; i < N; i++) f[i] = 1.0 / (1 + i + me * 0.37) * (i % 2 ? 1e8 : 1e-8);
  o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 12, .count = N, .send = f, .recv = f};
  RUN(c, &o);
  uint64_t h[P] = {0}, hs[P];
  h[rank] = fnv(f, sizeof *f * N);
  free(f);
  o = (jx_mpi_op){
      .kind = JX_MPI_ALLREDUCE, .dtype = 8, .op = JX_MPI_MAX, .count = P, .send = h, .recv = hs};
  RUN(c, &o);
  if (hs[0] != hs[1] || hs[1] != hs[2]) return report(out, cap, "the f64 sums differ in bits");
  /* reduce-scatter, in place, uneven blocks (member q gets q+1 elements) */
  int32_t rs[6];
  for (int i = 0; i < 6; i++) rs[i] = i * 10 + me;
  int64_t rc[P] = {1, 2, 3};
  o = (jx_mpi_op){.kind = JX_MPI_REDUCE_SCATTER, .dtype = 3, .recv = rs, .rcounts = rc};
  RUN(c, &o);
  int start = rank == 0 ? 0 : rank == 1 ? 1 : 3;
  for (int k = 0; k <= rank; k++)
    if (rs[k] != 3 * (start + k) * 10 + 3) return report(out, cap, "reduce_scatter wrong");
  /* reduce-scatter of f64 sums whose rounding depends on the order, out of place, at several
   * sizes (member q gets (q+1)*size elements): each block is the sum in member order,
   * computed here (member m is process P-1-m) */
  for (size_t size = 1; size <= 40000; size *= 200) {
    size_t total = 6 * size, first = rank == 0 ? 0 : rank == 1 ? size : 3 * size;
    double *x = malloc(sizeof *x * total), *y = malloc(sizeof *y * (rank + 1) * size);
    for (size_t i = 0; i < total; i++) x[i] = 1.0 / (1 + i + me * 0.37) * (i % 2 ? 1e8 : 1e-8);
    int64_t bc[P] = {(int64_t)size, 2 * (int64_t)size, 3 * (int64_t)size};
    o = (jx_mpi_op){
        .kind = JX_MPI_REDUCE_SCATTER, .dtype = 12, .send = x, .recv = y, .rcounts = bc};
    RUN(c, &o);
    for (size_t k = 0; k < (size_t)(rank + 1) * size; k++) {
      size_t i = first + k;
      double want = 0;
      for (int m = 0; m < P; m++) want += 1.0 / (1 + i + (P - 1 - m) * 0.37) * (i % 2 ? 1e8 : 1e-8);
      if (memcmp(&y[k], &want, sizeof want))
        return report(out, cap, "reduce_scatter of %zu: [%zu] = %.17g, want %.17g", total, i, y[k],
                      want);
    }
    free(x), free(y);
  }
  /* reduce-scatter where member 0 gets nothing: member q gets q elements */
  int32_t rz[3] = {me, 10 + me, 20 + me};
  int64_t zc[P] = {0, 1, 2};
  o = (jx_mpi_op){.kind = JX_MPI_REDUCE_SCATTER, .dtype = 3, .recv = rz, .rcounts = zc};
  RUN(c, &o);
  for (int k = 0; k < rank; k++)
    if (rz[k] != 3 * (rank == 1 ? 0 : 10 * (k + 1)) + 3)
      return report(out, cap, "reduce_scatter with an empty block: [%d] = %d", k, rz[k]);
  /* all-gather with uneven counts: member q sends q+1 bytes of value q */
  char g[6] = {0}, mine[3];
  memset(mine, 'a' + rank, sizeof mine);
  int64_t gc[P] = {1, 2, 3}, gd[P] = {0, 1, 3};
  o = (jx_mpi_op){.kind = JX_MPI_ALLGATHERV, .send = mine, .recv = g, .rcounts = gc, .rdispls = gd};
  RUN(c, &o);
  if (memcmp(g, "abbccc", 6)) return report(out, cap, "all_gather got %.6s", g);
  /* all-to-all: member q sends to member r the byte 10*q + r */
  char s[P], r[P];
  int64_t one[P] = {1, 1, 1}, at[P] = {0, 1, 2};
  for (int q = 0; q < P; q++) s[q] = (char)(10 * rank + q);
  o = (jx_mpi_op){.kind = JX_MPI_ALLTOALLV,
                  .send = s,
                  .recv = r,
                  .scounts = one,
                  .sdispls = at,
                  .rcounts = one,
                  .rdispls = at};
  RUN(c, &o);
  for (int q = 0; q < P; q++)
    if (r[q] != 10 * q + rank) return report(out, cap, "all_to_all wrong");
  /* broadcast from member 2 (process 0), on the group of processes 0 and 2 too */
  char b[300000];
  memset(b, me == 0 ? 7 : 0, sizeof b);
  o = (jx_mpi_op){.kind = JX_MPI_BCAST, .root = 2, .count = sizeof b, .recv = b};
  RUN(c, &o);
  if (b[0] != 7 || b[sizeof b - 1] != 7) return report(out, cap, "broadcast wrong");
  o = (jx_mpi_op){.kind = JX_MPI_BARRIER};
  RUN(c, &o);
  if (odd) {
    int32_t w = me, z;
    o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &w, .recv = &z};
    RUN(odd, &o);
    if (z != 2) return report(out, cap, "sum over processes 0 and 2: %d", z);
  }
  /* the job's store: keys set through a client of one's own, waited for through the engine's */
  char key[32];
  snprintf(key, sizeof key, "hello/%d", me);
  jx_kv *own = jx_coordinator_connect(5, out, cap);
  if (!own || jx_kv_set(own, key, "x", 1, out, cap)) return 1;
  jx_kv_close(own);
  const char *hellos[P] = {"hello/0", "hello/1", "hello/2"};
  if (jx_kv_wait(jx_coordinator_store(), hellos, P, 10, out, cap)) return 1;
  snprintf(out, cap, "ok");
  return 0;
}

/* in shared memory (one host), then over Gloo (each process a host of its own) */
static const char *const three_hosts[] = {"a", "b", "c"};

static void every_collective_on_three_processes(void **state) {
  (void)state;
  NEEDS_GLOO();
  for (int layout = 0; layout < 2; layout++) {
    job_hosts = layout ? three_hosts : NULL;
    char out[3][MSG];
    run_job(3, (int[]){0, 1, 2}, (int[]){3, 3, 3}, 10, collectives, out);
    job_hosts = NULL;
    for (int i = 0; i < 3; i++) assert_string_equal(out[i], "ok");
  }
}

/* a process that ends before a collective: the others name it at once */
static int one_leaves(const jx_mpi_api *api, int me, char *out, size_t cap) {
  jx_mpi_comm *c = NULL;
  if (api->split(1, me, 7, "all", 10, &c, out, cap)) return 1;
  if (me == 1) _exit(0); /* without a word, as a crash */
  int32_t v = 1;
  jx_mpi_op o = {.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &v, .recv = &v};
  if (!api->run(c, &o, 10, out, cap)) snprintf(out, cap, "the collective succeeded");
  return 1;
}

static void names_a_process_that_ended(void **state) {
  (void)state;
  NEEDS_GLOO();
  char out[3][MSG];
  double t = run_job(3, (int[]){0, 1, 2}, (int[]){3, 3, 3}, 10, one_leaves, out);
  for (int i = 0; i < 3; i += 2)
    assert_non_null(strstr(out[i], "process 1 did not arrive within 10 s (it ended)"));
  assert_true(t < 8); /* at once, not at the deadline */
}

/* a process that is alive but late: the others name it at their deadline */
static int one_stalls(const jx_mpi_api *api, int me, char *out, size_t cap) {
  jx_mpi_comm *c = NULL;
  if (api->split(1, me, 7, "all", 10, &c, out, cap)) return 1;
  if (me == 1) {
    sleep(2);
    return report(out, cap, "slept");
  }
  int32_t v = 1;
  jx_mpi_op o = {.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &v, .recv = &v};
  if (!api->run(c, &o, 1, out, cap)) snprintf(out, cap, "the collective succeeded");
  return 1;
}

static void names_a_process_that_stalls_at_the_deadline(void **state) {
  (void)state;
  NEEDS_GLOO();
  for (int layout = 0; layout < 2; layout++) {
    job_hosts = layout ? three_hosts : NULL;
    char out[3][MSG], want[200];
    run_job(3, (int[]){0, 1, 2}, (int[]){3, 3, 3}, 10, one_stalls, out);
    job_hosts = NULL;
    snprintf(want, sizeof want,
             "all_reduce %s among processes 0,1,2 (all): process 1 did not arrive within 1 s",
             layout ? "over Gloo" : "in shared memory");
    for (int i = 0; i < 3; i += 2) {
      assert_non_null(strstr(out[i], want));
      assert_null(strstr(out[i], "ended"));
    }
  }
}

/* a collective in flight is interrupted by another thread: it fails at once,
 * long before its deadline, saying why */
static void *interrupt_soon(void *arg) {
  (void)arg;
  struct timespec pause = {0, 500 * 1000 * 1000};
  nanosleep(&pause, NULL);
  jx_coordinator_interrupt("process 1 stopped beating");
  return NULL;
}

static int one_is_interrupted(const jx_mpi_api *api, int me, char *out, size_t cap) {
  jx_mpi_comm *c = NULL;
  if (api->split(1, me, 7, "all", 10, &c, out, cap)) return 1;
  if (me == 1) {
    sleep(3);
    return report(out, cap, "slept");
  }
  pthread_t t;
  pthread_create(&t, NULL, interrupt_soon, NULL);
  int32_t v = 1;
  jx_mpi_op o = {.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &v, .recv = &v};
  double t0 = jx_tcp_now();
  if (!api->run(c, &o, 30, out, cap)) snprintf(out, cap, "the collective succeeded");
  pthread_join(t, NULL);
  if (jx_tcp_now() - t0 > 5)
    report(out, cap, "the interrupted collective took %g s", jx_tcp_now() - t0);
  return 1;
}

static void an_interrupted_collective_fails_at_once(void **state) {
  (void)state;
  NEEDS_GLOO();
  for (int layout = 0; layout < 2; layout++) {
    job_hosts = layout ? three_hosts : NULL;
    char out[2][MSG], want[200];
    run_job(2, (int[]){0, 1}, (int[]){2, 2}, 10, one_is_interrupted, out);
    job_hosts = NULL;
    snprintf(want, sizeof want,
             "all_reduce %s among processes 0,1 (all): interrupted: process 1 stopped beating",
             layout ? "over Gloo" : "in shared memory");
    assert_non_null(strstr(out[0], want));
  }
}

static void refuses_a_single_copy_size_that_is_no_size(void **state) {
  (void)state;
  NEEDS_GLOO();
  setenv("JX_SHM_SINGLE_COPY", "16M", 1);
  char out[2][MSG];
  run_job(2, (int[]){0, 1}, (int[]){2, 2}, 10, NULL, out);
  unsetenv("JX_SHM_SINGLE_COPY");
  for (int i = 0; i < 2; i++)
    assert_non_null(strstr(out[i], "JX_SHM_SINGLE_COPY='16M' is not a size in bytes"));
}

/* process 1 is killed (SIGKILL, from a thread of its own) while the three
 * run all-reduces of 16 MiB, or all-to-alls of 3 MiB sent by each (single
 * copy from 1 MiB), whose members read each other's buffers: the others
 * name it at once, whether they were reading its buffer or waiting */
static void *kill_soon(void *arg) {
  (void)arg;
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  raise(SIGKILL);
  return NULL;
}

static int killed_in; /* the collective one_is_killed runs: JX_MPI_ALLREDUCE or _ALLTOALLV */

static int one_is_killed(const jx_mpi_api *api, int me, char *out, size_t cap) {
  enum { N = 4 << 20, PIECE = 1 << 20 };
  jx_mpi_comm *c = NULL;
  if (api->split(1, me, 7, "all", 10, &c, out, cap)) return 1;
  int64_t counts[3] = {PIECE, PIECE, PIECE}, displs[3] = {0, PIECE, 2 * PIECE};
  jx_mpi_op o;
  if (killed_in == JX_MPI_ALLTOALLV) {
    o = (jx_mpi_op){.kind = JX_MPI_ALLTOALLV,
                    .send = calloc(3, PIECE),
                    .recv = malloc(3 * (size_t)PIECE),
                    .scounts = counts,
                    .sdispls = displs,
                    .rcounts = counts,
                    .rdispls = displs};
  } else {
    float *x = malloc(sizeof *x * N);
    for (size_t i = 0; i < N; i++) x[i] = (float)(i % 7);
    o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 11, .count = N, .send = x, .recv = x};
  }
  pthread_t t;
  for (int it = 0; it < 1000; it++) {
    if (api->run(c, &o, 10, out, cap)) return 1;
    if (it == 0 && me == 1) pthread_create(&t, NULL, kill_soon, NULL); /* all are in the loop */
  }
  return report(out, cap, "1000 collectives succeeded");
}

static void names_a_process_killed_while_read(void **state) {
  (void)state;
  NEEDS_GLOO();
  static const int kinds[] = {JX_MPI_ALLREDUCE, JX_MPI_ALLTOALLV};
  static const char *const says[] = {"all_reduce", "all_to_all"};
  for (int k = 0; k < 2; k++) {
    char out[3][MSG], want[128];
    job_killed = 1;
    killed_in = kinds[k];
    if (killed_in == JX_MPI_ALLTOALLV) setenv("JX_SHM_SINGLE_COPY", "1048576", 1);
    double t = run_job(3, (int[]){0, 1, 2}, (int[]){3, 3, 3}, 10, one_is_killed, out);
    unsetenv("JX_SHM_SINGLE_COPY");
    job_killed = -1;
    snprintf(want, sizeof want, "%s in shared memory among processes 0,1,2 (all): ", says[k]);
    for (int i = 0; i < 3; i += 2) {
      assert_non_null(strstr(out[i], want));
      assert_non_null(strstr(out[i], "process 1 "));
      assert_non_null(strstr(out[i], "ended"));
    }
    assert_true(t < 8); /* at once, not at the deadline */
  }
}

/* ---- two hosts of two processes each (JX_HOST_ID): shared memory within a host, Gloo
 * between the hosts' first members ---- */

static const char *const two_hosts[] = {"a", "a", "b", "b"};

static double term(size_t i, int p) { return 1.0 / (1 + i + p * 0.37) * (i % 2 ? 1e8 : 1e-8); }

/* reduce-scatter, all-gather and all-to-all of uneven blocks larger than the shared memory's
 * slots (several steps, blocks that straddle them), integer values: exact */
static int uneven_and_large(const jx_mpi_api *api, jx_mpi_comm *c, int rank, char *out,
                            size_t cap) {
  enum { P = 4 };
  int64_t rc[P], start[P + 1] = {0};
  for (int q = 0; q < P; q++) start[q + 1] = start[q] + (rc[q] = (q + 1) * 200003);
  int32_t *x = malloc(sizeof *x * (size_t)start[P]), *y = malloc(sizeof *y * (size_t)rc[rank]);
  for (int64_t i = 0; i < start[P]; i++) x[i] = (int32_t)(i % 1009) * (rank + 1);
  jx_mpi_op o = {.kind = JX_MPI_REDUCE_SCATTER, .dtype = 3, .send = x, .recv = y, .rcounts = rc};
  RUN(c, &o);
  for (int64_t k = 0; k < rc[rank]; k++)
    if (y[k] != (int32_t)((start[rank] + k) % 1009) * 10)
      return report(out, cap, "large reduce_scatter [%lld] = %d", (long long)k, y[k]);
  free(x), free(y);
  /* all-gather: member q sends (q+1)*300001 bytes of value 'a'+q+i%7 */
  int64_t gc[P], gd[P], total = 0;
  for (int q = 0; q < P; q++) gd[q] = total, total += gc[q] = (q + 1) * 300001;
  char *mine = malloc((size_t)gc[rank]), *all = malloc((size_t)total);
  for (int64_t i = 0; i < gc[rank]; i++) mine[i] = (char)('a' + rank + i % 7);
  o = (jx_mpi_op){
      .kind = JX_MPI_ALLGATHERV, .send = mine, .recv = all, .rcounts = gc, .rdispls = gd};
  RUN(c, &o);
  for (int q = 0; q < P; q++)
    for (int64_t i = 0; i < gc[q]; i++)
      if (all[gd[q] + i] != (char)('a' + q + i % 7))
        return report(out, cap, "large all_gather: member %d's [%lld]", q, (long long)i);
  free(mine), free(all);
  /* all-to-all: member q sends member r (q+r+1)*100003 bytes of value 10*q+r+i%5 */
  int64_t sc[P], sd[P], rcv[P], rd[P], st = 0, rt = 0;
  for (int q = 0; q < P; q++) {
    sd[q] = st, st += sc[q] = (rank + q + 1) * 100003;
    rd[q] = rt, rt += rcv[q] = (q + rank + 1) * 100003;
  }
  char *s = malloc((size_t)st), *r = malloc((size_t)rt);
  for (int q = 0; q < P; q++)
    for (int64_t i = 0; i < sc[q]; i++) s[sd[q] + i] = (char)(10 * rank + q + i % 5);
  o = (jx_mpi_op){.kind = JX_MPI_ALLTOALLV,
                  .send = s,
                  .recv = r,
                  .scounts = sc,
                  .sdispls = sd,
                  .rcounts = rcv,
                  .rdispls = rd};
  RUN(c, &o);
  for (int q = 0; q < P; q++)
    for (int64_t i = 0; i < rcv[q]; i++)
      if (r[rd[q] + i] != (char)(10 * q + rank + i % 5))
        return report(out, cap, "large all_to_all: from member %d [%lld]", q, (long long)i);
  free(s), free(r);
  return 0;
}

static int across_hosts(const jx_mpi_api *api, int me, char *out, size_t cap) {
  enum { P = 4 };
  /* members in the order of processes 0, 2, 1, 3: each host's members are apart */
  static const int key[P] = {0, 2, 1, 3}, member_of[P] = {0, 2, 1, 3};
  jx_mpi_comm *c = NULL, *three = NULL, *host_b = NULL;
  if (api->split(1, key[me], 50, "two hosts", 10, &c, out, cap) ||
      api->split(me != 0, me, 51, "processes 1 to 3", 10, &three, out, cap) ||
      api->split(me >= 2, me, 52, "host b", 10, &host_b, out, cap))
    return 1;
  int rank = member_of[me];
  /* all-reduce, small and large (several slots), integer values: exact */
  for (size_t count = 5; count <= 500000; count *= 100000) {
    float *x = malloc(sizeof *x * count);
    for (size_t i = 0; i < count; i++) x[i] = (float)((me * 7 + (int)i * 3) % 11);
    jx_mpi_op o = {
        .kind = JX_MPI_ALLREDUCE, .dtype = 11 /* f32 */, .count = count, .send = x, .recv = x};
    RUN(c, &o);
    for (size_t i = 0; i < count; i++) {
      float want = 0;
      for (int p = 0; p < P; p++) want += (float)((p * 7 + (int)i * 3) % 11);
      if (x[i] != want) return report(out, cap, "all_reduce[%zu] = %g, want %g", i, x[i], want);
    }
    free(x);
  }
  /* a float sum whose rounding depends on the order: on one host in member order; on two,
   * each host's members in member order, then the hosts in the order of their first members;
   * small, and large (read from the peers' processes unless JX_SHM_SINGLE_COPY=0) */
  jx_mpi_op o;
  for (size_t n = 1000; n <= 160000; n *= 160) {
    double *f = malloc(sizeof *f * n);
    for (size_t i = 0; i < n; i++) f[i] = term(i, me);
    o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 12, .count = n, .send = f, .recv = f};
    RUN(c, &o);
    for (size_t i = 0; i < n; i++) {
      double want = job_hosts ? (term(i, 0) + term(i, 1)) + (term(i, 2) + term(i, 3))
                              : ((term(i, 0) + term(i, 2)) + term(i, 1)) + term(i, 3);
      if (memcmp(&f[i], &want, sizeof want))
        return report(out, cap, "f64 sum of %zu [%zu] = %.17g, want %.17g", n, i, f[i], want);
    }
    free(f);
  }
  /* reduce-scatter, uneven blocks (member q gets q+1 elements), in place */
  int32_t rs[10];
  for (int i = 0; i < 10; i++) rs[i] = i * 10 + me;
  int64_t rc[P] = {1, 2, 3, 4};
  o = (jx_mpi_op){.kind = JX_MPI_REDUCE_SCATTER, .dtype = 3, .recv = rs, .rcounts = rc};
  RUN(c, &o);
  int start = rank * (rank + 1) / 2;
  for (int k = 0; k <= rank; k++)
    if (rs[k] != 4 * (start + k) * 10 + 6) return report(out, cap, "reduce_scatter wrong");
  /* all-gather with uneven counts: member q sends q+1 bytes of value q */
  char g[10], mine[4];
  memset(mine, 'a' + rank, sizeof mine);
  int64_t gc[P] = {1, 2, 3, 4}, gd[P] = {0, 1, 3, 6};
  o = (jx_mpi_op){.kind = JX_MPI_ALLGATHERV, .send = mine, .recv = g, .rcounts = gc, .rdispls = gd};
  RUN(c, &o);
  if (memcmp(g, "abbcccdddd", 10)) return report(out, cap, "all_gather got %.10s", g);
  /* all-to-all: member q sends to member r the byte 10*q + r */
  char s[P], r[P];
  int64_t one[P] = {1, 1, 1, 1}, at[P] = {0, 1, 2, 3};
  for (int q = 0; q < P; q++) s[q] = (char)(10 * rank + q);
  o = (jx_mpi_op){.kind = JX_MPI_ALLTOALLV,
                  .send = s,
                  .recv = r,
                  .scounts = one,
                  .sdispls = at,
                  .rcounts = one,
                  .rdispls = at};
  RUN(c, &o);
  for (int q = 0; q < P; q++)
    if (r[q] != 10 * q + rank) return report(out, cap, "all_to_all wrong");
  /* broadcast from member 3 (process 3: not the first of its host), larger than a slot */
  static char b[600000];
  memset(b, me == 3 ? 9 : 0, sizeof b);
  o = (jx_mpi_op){.kind = JX_MPI_BCAST, .root = 3, .count = sizeof b, .recv = b};
  RUN(c, &o);
  if (b[0] != 9 || b[sizeof b - 1] != 9) return report(out, cap, "broadcast wrong");
  o = (jx_mpi_op){.kind = JX_MPI_BARRIER};
  RUN(c, &o);
  if (uneven_and_large(api, c, rank, out, cap)) return 1;
  /* groups of a part of the processes: across the hosts, and within host b */
  int32_t w = me + 1, z = 0;
  o = (jx_mpi_op){.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &w, .recv = &z};
  if (three) RUN(three, &o);
  if (three && z != 9) return report(out, cap, "sum over processes 1 to 3: %d", z);
  if (host_b) RUN(host_b, &o);
  if (host_b && z != 7) return report(out, cap, "sum over host b: %d", z);
  snprintf(out, cap, "ok");
  return 0;
}

static void collectives_on_four_processes_on_one_host(void **state) {
  (void)state;
  NEEDS_GLOO();
  /* buffers of 64 KiB or more read from the peers' processes, then all copied through the
   * segment */
  for (int copy = 0; copy < 2; copy++) {
    setenv("JX_SHM_SINGLE_COPY", copy ? "0" : "65536", 1);
    char out[4][MSG];
    run_job(4, (int[]){0, 1, 2, 3}, (int[]){4, 4, 4, 4}, 10, across_hosts, out);
    unsetenv("JX_SHM_SINGLE_COPY");
    for (int i = 0; i < 4; i++) assert_string_equal(out[i], "ok");
  }
}

static void collectives_across_two_hosts(void **state) {
  (void)state;
  NEEDS_GLOO();
  job_hosts = two_hosts;
  char out[4][MSG];
  run_job(4, (int[]){0, 1, 2, 3}, (int[]){4, 4, 4, 4}, 10, across_hosts, out);
  job_hosts = NULL;
  for (int i = 0; i < 4; i++) assert_string_equal(out[i], "ok");
}

/* process 3 ends before a hierarchical all-reduce: process 2 (its host) names it at once;
 * the others fail at once too, through the hosts' first members */
static int one_leaves_a_host(const jx_mpi_api *api, int me, char *out, size_t cap) {
  jx_mpi_comm *c = NULL;
  if (api->split(1, me, 7, "all", 10, &c, out, cap)) return 1;
  if (me == 3) _exit(0);
  int32_t v = 1;
  jx_mpi_op o = {.kind = JX_MPI_ALLREDUCE, .dtype = 3, .count = 1, .send = &v, .recv = &v};
  if (!api->run(c, &o, 10, out, cap)) snprintf(out, cap, "the collective succeeded");
  return 1;
}

static void names_a_process_that_ended_on_another_host(void **state) {
  (void)state;
  NEEDS_GLOO();
  job_hosts = two_hosts;
  char out[4][MSG];
  double t = run_job(4, (int[]){0, 1, 2, 3}, (int[]){4, 4, 4, 4}, 10, one_leaves_a_host, out);
  job_hosts = NULL;
  assert_non_null(strstr(out[2], "all_reduce in shared memory among processes 2,3 (all): process "
                                 "3 did not arrive within 10 s (it ended)"));
  for (int i = 0; i < 2; i++) assert_non_null(strstr(out[i], "process 2"));
  assert_true(t < 8); /* at once, not at the deadline */
}

/* ---- jx_distributed_initialize with a coordinator ---- */

static void expect_refusal(const jx_distributed_options *o, const char *says) {
  jx_clear_error();
  assert_int_equal(jx_distributed_initialize(o), JX_ERR_INVALID_ARGUMENT);
  fprintf(stderr, "  %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), says));
  jx_clear_error();
}

static void refuses_options_that_cannot_work(void **state) {
  (void)state;
  expect_refusal(&(jx_distributed_options){"127.0.0.1:1234", 0, 0, 1}, "num_processes >= 1");
  expect_refusal(&(jx_distributed_options){"127.0.0.1:1234", 2, 2, 1}, "not 2 and 2");
  expect_refusal(&(jx_distributed_options){"no-port-here", 2, 0, 1}, "is not host:port");
  setenv("JX_COORDINATOR_ADDRESS", "127.0.0.1:1234", 1);
  setenv("JX_NUM_PROCESSES", "2", 1);
  unsetenv("JX_PROCESS_ID");
  expect_refusal(NULL, "needs JX_NUM_PROCESSES (>= 1) and JX_PROCESS_ID");
  unsetenv("JX_COORDINATOR_ADDRESS");
  unsetenv("JX_NUM_PROCESSES");
  assert_int_equal(jx_process_count(), 1); /* nothing was joined */
}

static int join_through_options(const char *addr, int id) {
  jx_distributed_options o = {addr, 2, id, 10};
  if (jx_distributed_initialize(&o) || jx_process_count() != 2 || jx_process_index() != id ||
      jx_sync_global_devices("met") || jx_distributed_shutdown()) {
    fprintf(stderr, "process %d: %s\n", id, jx_last_error());
    return 1;
  }
  return 0;
}

static void joins_through_the_options(void **state) {
  (void)state;
  NEEDS_GLOO();
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", free_port());
  pid_t pid[2];
  for (int id = 0; id < 2; id++)
    if ((pid[id] = fork()) == 0) _exit(join_through_options(addr, id));
  for (int id = 0; id < 2; id++) {
    int status = -1;
    waitpid(pid[id], &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
}

/* a store served by another process (this one), with a token: the job's
 * processes only join it; a process with another token is turned away */
static void joins_a_store_served_elsewhere(void **state) {
  (void)state;
  NEEDS_GLOO();
  char msg[MSG] = "", addr[64];
  int port = 0;
  jx_kv_server *s = jx_kv_server_start(0, "job-7", 2, &port, msg, sizeof msg);
  assert_non_null(s);
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  pid_t pid[3];
  for (int i = 0; i < 3; i++)
    if ((pid[i] = fork()) == 0) {
      setenv("JX_COORDINATOR_SERVED", "1", 1);
      setenv("JX_JOB_TOKEN", i < 2 ? "job-7" : "job-8", 1);
      if (i < 2) _exit(join_through_options(addr, i));
      jx_distributed_options o = {addr, 2, 1, 5};
      _exit(jx_distributed_initialize(&o) == JX_ERR_INVALID_ARGUMENT &&
                    strstr(jx_last_error(), "serves no job with this process's token")
                ? 0
                : 1);
    }
  for (int i = 0; i < 3; i++) {
    int status = -1;
    waitpid(pid[i], &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
  }
  jx_kv_server_stop(s);
}

int main(void) {
#ifdef JX_GLOO_PLUGIN_FILE
  setenv("JX_GLOO_PLUGIN", JX_GLOO_PLUGIN_FILE, 1);
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(store_sets_gets_waits_and_adds),
      cmocka_unit_test(store_keeps_jobs_apart),
      cmocka_unit_test(refuses_an_id_out_of_range),
      cmocka_unit_test(refuses_two_processes_with_one_id),
      cmocka_unit_test(refuses_a_process_count_that_differs),
      cmocka_unit_test(names_the_processes_that_never_came),
      cmocka_unit_test(says_when_nobody_serves_the_coordinator),
      cmocka_unit_test(every_collective_on_three_processes),
      cmocka_unit_test(names_a_process_that_ended),
      cmocka_unit_test(names_a_process_that_stalls_at_the_deadline),
      cmocka_unit_test(an_interrupted_collective_fails_at_once),
      cmocka_unit_test(names_a_process_killed_while_read),
      cmocka_unit_test(refuses_a_single_copy_size_that_is_no_size),
      cmocka_unit_test(collectives_on_four_processes_on_one_host),
      cmocka_unit_test(collectives_across_two_hosts),
      cmocka_unit_test(names_a_process_that_ended_on_another_host),
      cmocka_unit_test(joins_through_the_options),
      cmocka_unit_test(joins_a_store_served_elsewhere),
      cmocka_unit_test(refuses_options_that_cannot_work),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
