/* jx launch: starts a job's processes on this node and watches them, as
 * torchrun does for PyTorch.
 *
 *   jx launch --nproc N [--nnodes M|MIN:MAX --node-rank I --coordinator HOST:PORT]
 *             [--max-restarts R] -- PROGRAM ARGS...
 *
 * Each process gets JX_COORDINATOR_ADDRESS, JX_NUM_PROCESSES, JX_PROCESS_ID,
 * JX_LOCAL_PROCESS_ID, JX_LOCAL_PROCESS_COUNT, JX_JOB_TOKEN and
 * JX_RESTART_COUNT (the first six are what jx_distributed_initialize reads); its output comes
 * out line by line prefixed "[p<id>] " (stdout to stdout, stderr to
 * stderr). When a process fails, every node stops its processes and the job
 * starts again (at most R times); a program that resumes from its latest
 * checkpoint (jx train --resume) goes on from there. The nodes meet at a
 * rendezvous (launch.h) served by node rank 0's launcher at the
 * coordinator's port; each attempt's process 0 serves the job at the port
 * after it. Alone (--nnodes 1, no --coordinator) everything is on this
 * host's loopback, at ports the system picks. */
#define _GNU_SOURCE /* execvpe, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/base/env.h"
#include "cli.h"
#include "launch.h"

extern char **environ;

enum { MAX_LOCAL = 256, OUT_CAP = 8192 };

typedef struct {
  int nproc, min_nodes, max_nodes, node_rank, max_restarts;
  char host[256];
  int port; /* the rendezvous; 0: alone, on the loopback */
  double settle_s, join_timeout_s, stop_grace_s;
  char **program;
} options;

typedef struct {
  pid_t pid;
  int id, status, exited;
  int fd[2]; /* stdout, stderr pipes (-1: closed) */
  char buf[2][OUT_CAP];
  size_t len[2];
} child;

static void usage(FILE *f) {
  fprintf(f, "usage: jx launch --nproc N [options] -- PROGRAM ARGS...\n"
             "  --nproc N            processes on this node\n"
             "  --nnodes M|MIN:MAX   nodes of the job (default 1); MIN:MAX: a restart goes on\n"
             "                       with as few as MIN nodes when others do not come back\n"
             "  --node-rank I        this node's rank (0 serves the rendezvous)\n"
             "  --coordinator H:P    node 0's host and port (the job's process 0 serves at P+1)\n"
             "  --max-restarts R     restart the whole job up to R times (default 0)\n"
             "  --join-settle S      with MIN:MAX, seconds to wait for more than MIN nodes\n"
             "                       (default 10)\n"
             "  --join-timeout S     seconds for the nodes to meet (default 300)\n"
             "  --stop-grace S       seconds a process gets to end after SIGTERM (default 5)\n");
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.nproc = 1,
                 .min_nodes = 1,
                 .max_nodes = 1,
                 .settle_s = 10,
                 .join_timeout_s = 300,
                 .stop_grace_s = 5};
  int have_coordinator = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--")) {
      o->program = argv + i + 1;
      break;
    }
    if (a[0] != '-') {
      o->program = argv + i;
      break;
    }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "jx launch: %s needs a value\n", a);
      return 0;
    }
    i++;
    char *end = NULL;
    if (!strcmp(a, "--nproc")) {
      o->nproc = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--nnodes")) {
      o->min_nodes = o->max_nodes = (int)strtol(v, &end, 10);
      if (*end == ':') o->max_nodes = (int)strtol(end + 1, &end, 10);
    } else if (!strcmp(a, "--node-rank")) {
      o->node_rank = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--max-restarts")) {
      o->max_restarts = (int)strtol(v, &end, 10);
    } else if (!strcmp(a, "--join-settle")) {
      o->settle_s = strtod(v, &end);
    } else if (!strcmp(a, "--join-timeout")) {
      o->join_timeout_s = strtod(v, &end);
    } else if (!strcmp(a, "--stop-grace")) {
      o->stop_grace_s = strtod(v, &end);
    } else if (!strcmp(a, "--coordinator")) {
      const char *colon = strrchr(v, ':');
      if (!colon || colon == v || (size_t)(colon - v) >= sizeof o->host) {
        fprintf(stderr, "jx launch: --coordinator '%s' is not host:port\n", v);
        return 0;
      }
      snprintf(o->host, sizeof o->host, "%.*s", (int)(colon - v), v);
      o->port = (int)strtol(colon + 1, &end, 10);
      have_coordinator = 1;
      if (o->port < 1 || o->port > 65534) end = (char *)colon;
    } else {
      fprintf(stderr, "jx launch: unknown option '%s'\n", a);
      usage(stderr);
      return 0;
    }
    if (!end || *end) {
      fprintf(stderr, "jx launch: %s '%s' is not a valid value\n", a, v);
      return 0;
    }
  }
  if (!o->program || !o->program[0]) {
    fprintf(stderr, "jx launch: no program to run (jx launch --nproc N -- PROGRAM ARGS)\n");
    return 0;
  }
  if (o->nproc < 1 || o->nproc > MAX_LOCAL || o->min_nodes < 1 || o->max_nodes < o->min_nodes ||
      o->node_rank < 0 || o->node_rank >= o->max_nodes || o->max_restarts < 0 || o->settle_s < 0 ||
      o->join_timeout_s <= 0 || o->stop_grace_s < 0) {
    fprintf(stderr,
            "jx launch: want 1 <= --nproc <= %d, 1 <= MIN <= MAX nodes, 0 <= --node-rank "
            "< MAX, --max-restarts >= 0\n",
            MAX_LOCAL);
    return 0;
  }
  if (o->max_nodes > 1 && !have_coordinator) {
    fprintf(stderr, "jx launch: a job of several nodes needs --coordinator HOST:PORT (node 0's "
                    "address, the same on every node)\n");
    return 0;
  }
  return 1;
}

/* A port nobody listens on now (the system's choice). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) &&
      !getsockname(fd, (struct sockaddr *)&a, &len))
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* ---- the processes ---- */

static const char *const job_vars[] = {
    "JX_COORDINATOR_ADDRESS", "JX_NUM_PROCESSES", "JX_PROCESS_ID",   "JX_LOCAL_PROCESS_ID",
    "JX_LOCAL_PROCESS_COUNT", "JX_JOB_TOKEN",     "JX_RESTART_COUNT"};
enum { NJOB_VARS = sizeof job_vars / sizeof *job_vars };

/* This environment without job_vars, plus them with values (built before
 * fork: the rendezvous thread may hold malloc's lock). */
static char **job_environment(char values[NJOB_VARS][320]) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + NJOB_VARS + 1, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int ours = 0;
    for (int j = 0; j < NJOB_VARS; j++) {
      size_t len = strlen(job_vars[j]);
      ours |= !strncmp(environ[i], job_vars[j], len) && environ[i][len] == '=';
    }
    if (!ours) env[k++] = environ[i];
  }
  for (int j = 0; j < NJOB_VARS; j++) env[k++] = values[j];
  return env;
}

static int start(child *c, char **program, char **env) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) return -1;
  pid_t parent = getpid();
  c->pid = fork();
  if (c->pid < 0) return -1;
  if (c->pid == 0) {
    /* the process ends with its launcher (a node that is lost loses all of it) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(program[0], program, env);
    dprintf(2, "jx launch: cannot run %s: %s\n", program[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  c->fd[0] = out[0];
  c->fd[1] = err[0];
  c->len[0] = c->len[1] = 0;
  c->exited = 0;
  return 0;
}

/* Writes the complete lines of c's stream s (all of it when flush) with its prefix. */
static void emit(child *c, int s, int flush) {
  FILE *f = s ? stderr : stdout;
  char *b = c->buf[s];
  size_t at = 0;
  for (;;) {
    char *nl = memchr(b + at, '\n', c->len[s] - at);
    size_t end = nl ? (size_t)(nl - b) + 1 : (flush || c->len[s] == OUT_CAP ? c->len[s] : at);
    if (end == at) break;
    fprintf(f, "[p%d] %.*s%s", c->id, (int)(end - at), b + at, nl ? "" : "\n");
    at = end;
  }
  fflush(f);
  memmove(b, b + at, c->len[s] - at);
  c->len[s] -= at;
}

static void read_output(child *c, int s) {
  ssize_t got = read(c->fd[s], c->buf[s] + c->len[s], OUT_CAP - c->len[s]);
  if (got > 0) {
    c->len[s] += (size_t)got;
    emit(c, s, 0);
  } else if (got == 0 || errno != EINTR) {
    emit(c, s, 1);
    close(c->fd[s]);
    c->fd[s] = -1;
  }
}

static void describe(const child *c, char *out, size_t cap) {
  if (WIFSIGNALED(c->status))
    snprintf(out, cap, "process %d (pid %d) was killed by signal %d (%s)", c->id, (int)c->pid,
             WTERMSIG(c->status), strsignal(WTERMSIG(c->status)));
  else
    snprintf(out, cap, "process %d (pid %d) exited with status %d", c->id, (int)c->pid,
             WEXITSTATUS(c->status));
}

/* Reaps the processes that ended; the first that failed is described in why. */
static int reap(child *k, int n, char *why, size_t cap) {
  int failed = 0, status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
    for (int i = 0; i < n; i++)
      if (k[i].pid == pid && !k[i].exited) {
        k[i].exited = 1;
        k[i].status = status;
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
          if (!failed && why) describe(&k[i], why, cap);
          failed = 1;
        }
      }
  return failed;
}

static void drain(child *k, int n) {
  for (int i = 0; i < n; i++)
    for (int s = 0; s < 2; s++) {
      while (k[i].fd[s] >= 0) {
        struct pollfd p = {.fd = k[i].fd[s], .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) break;
        read_output(&k[i], s);
      }
      if (k[i].fd[s] >= 0) {
        emit(&k[i], s, 1);
        close(k[i].fd[s]);
        k[i].fd[s] = -1;
      }
    }
}

/* SIGTERM (and SIGCONT, for a stopped one) to every running process's group,
 * SIGKILL to those still there after the grace time. */
static void stop_all(child *k, int n, double grace_s) {
  for (int i = 0; i < n; i++)
    if (!k[i].exited) {
      kill(-k[i].pid, SIGTERM);
      kill(-k[i].pid, SIGCONT);
    }
  double until = jx_rdzv_now() + grace_s;
  for (;;) {
    reap(k, n, NULL, 0);
    int left = 0;
    for (int i = 0; i < n; i++) left += !k[i].exited;
    if (!left) break;
    if (jx_rdzv_now() >= until) {
      for (int i = 0; i < n; i++)
        if (!k[i].exited) kill(-k[i].pid, SIGKILL), kill(k[i].pid, SIGKILL);
      until = jx_rdzv_now() + 60;
    }
    usleep(20 * 1000);
  }
  drain(k, n);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "jx launch: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* ---- one attempt ---- */

static volatile sig_atomic_t interrupted; /* SIGINT or SIGTERM to the launcher */
static void on_signal(int sig) { interrupted = sig; }

enum { ATTEMPT_DONE, ATTEMPT_STOPPED, ATTEMPT_ENDED };

typedef struct {
  int fd;
  char buf[1024];
  size_t len;
  double heard;    /* when node 0 last said something */
  double silent_s; /* JX_HEARTBEAT_TIMEOUT: node 0 is lost after this long without a word
                      (0: never) */
} link_t;

/* The next line from node 0 within timeout_s, BEATs skipped: 1; 0 when the
 * connection closed; -1 on timeout; -2 when node 0 said nothing for
 * silent_s (why says so). What node 0 sent while this launcher was busy
 * elsewhere is read before its silence is judged. */
static int next_line(link_t *rv, char *line, size_t cap, double timeout_s, char *why,
                     size_t why_cap) {
  double until = jx_rdzv_now() + timeout_s;
  for (;;) {
    double now = jx_rdzv_now(), wait = until - now;
    if (rv->silent_s > 0 && wait > rv->heard + rv->silent_s - now)
      wait = rv->heard + rv->silent_s - now + 0.01;
    int r = jx_rdzv_read_line(rv->fd, rv->buf, sizeof rv->buf, &rv->len, line, cap,
                              wait > 0 ? wait : 0);
    now = jx_rdzv_now();
    if (r == 1) rv->heard = now;
    if (r == 1 && !strcmp(line, "BEAT")) continue;
    if (r != -1) return r;
    if (rv->silent_s > 0 && now - rv->heard > rv->silent_s) {
      snprintf(why, why_cap,
               "node 0 (the rendezvous) said nothing for %g s (JX_HEARTBEAT_TIMEOUT): its "
               "launcher or its host hangs, or the network between is cut",
               rv->silent_s);
      return -2;
    }
    if (now >= until) return -1;
  }
}

/* Runs the attempt the server started with go until its processes all end
 * well (DONE), the server stops it (STOPPED: join again) or ends the job. */
static int run_attempt(const options *o, link_t *rv, const char *go, char *why, size_t cap) {
  int attempt, nodes, index, first, total, port;
  char token[64];
  if (sscanf(go, "GO %d %d %d %d %d %d %63s", &attempt, &nodes, &index, &first, &total, &port,
             token) != 7) {
    snprintf(why, cap, "the rendezvous sent '%.200s'", go);
    return ATTEMPT_ENDED;
  }
  say("attempt %d: node %d of %d, processes %d..%d of %d", attempt, index, nodes, first,
      first + o->nproc - 1, total);
  child *k = calloc((size_t)o->nproc, sizeof *k); /* 16 KiB of output buffers each */
  if (!k) {
    snprintf(why, cap, "out of memory");
    return ATTEMPT_ENDED;
  }
  int n = 0, st = ATTEMPT_DONE, failed = 0;
  for (int i = 0; i < o->nproc; i++) {
    char v[NJOB_VARS][320];
    snprintf(v[0], sizeof v[0], "JX_COORDINATOR_ADDRESS=%s:%d", o->port ? o->host : "127.0.0.1",
             port);
    snprintf(v[1], sizeof v[1], "JX_NUM_PROCESSES=%d", total);
    snprintf(v[2], sizeof v[2], "JX_PROCESS_ID=%d", first + i);
    snprintf(v[3], sizeof v[3], "JX_LOCAL_PROCESS_ID=%d", i);
    snprintf(v[4], sizeof v[4], "JX_LOCAL_PROCESS_COUNT=%d", o->nproc);
    snprintf(v[5], sizeof v[5], "JX_JOB_TOKEN=%s", token);
    snprintf(v[6], sizeof v[6], "JX_RESTART_COUNT=%d", attempt);
    char **env = job_environment(v);
    k[i].id = first + i;
    k[i].fd[0] = k[i].fd[1] = -1;
    if (!env || start(&k[i], o->program, env)) {
      free(env);
      snprintf(why, cap, "cannot start process %d: %s", first + i, strerror(errno));
      failed = 1;
      break;
    }
    free(env);
    n++;
  }
  if (failed) jx_rdzv_send(rv->fd, "FAIL node %d: %s", o->node_rank, why);
  for (;;) {
    struct pollfd p[2 * MAX_LOCAL + 1];
    int at[2 * MAX_LOCAL], np = 0;
    p[np++] = (struct pollfd){.fd = rv->fd, .events = POLLIN};
    for (int i = 0; i < n; i++)
      for (int s = 0; s < 2; s++)
        if (k[i].fd[s] >= 0) {
          at[np - 1] = 2 * i + s;
          p[np++] = (struct pollfd){.fd = k[i].fd[s], .events = POLLIN};
        }
    poll(p, (nfds_t)np, 100);
    for (int j = 1; j < np; j++)
      if (p[j].revents) read_output(&k[at[j - 1] / 2], at[j - 1] % 2);
    char what[512];
    if (!failed && reap(k, n, what, sizeof what)) {
      failed = 1;
      say("%s; stopping the job", what);
      jx_rdzv_send(rv->fd, "FAIL %s on node %d", what, o->node_rank);
      stop_all(k, n, o->stop_grace_s);
    }
    int running = 0;
    for (int i = 0; i < n; i++) running += !k[i].exited;
    if (!running && !failed && st == ATTEMPT_DONE) {
      drain(k, n);
      free(k);
      jx_rdzv_send(rv->fd, "DONE");
      return ATTEMPT_DONE;
    }
    if (interrupted) {
      snprintf(why, cap, "the launcher got signal %d", (int)interrupted);
      jx_rdzv_send(rv->fd, "FAIL node %d: %s", o->node_rank, why);
      stop_all(k, n, o->stop_grace_s);
      free(k);
      return ATTEMPT_ENDED;
    }
    /* every line node 0 sent (a BEAT may come with a STOP), and its silence */
    for (int r = 1; r == 1 && st == ATTEMPT_DONE;) {
      char line[1024];
      r = next_line(rv, line, sizeof line, 0, why, cap);
      if (r == 0) {
        snprintf(why, cap, "the rendezvous at node 0 closed (node 0's launcher is gone)");
        st = ATTEMPT_ENDED;
      } else if (r == -2) {
        st = ATTEMPT_ENDED;
      } else if (r == 1 && (!strncmp(line, "STOP ", 5) || !strncmp(line, "END ", 4))) {
        st = line[0] == 'S' ? ATTEMPT_STOPPED : ATTEMPT_ENDED;
        snprintf(why, cap, "%s", strchr(line, ' ') + 1);
      }
    }
    if (st != ATTEMPT_DONE) {
      stop_all(k, n, o->stop_grace_s);
      free(k);
      return st;
    }
  }
}

int jx_cmd_launch(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  double silent_s = 30; /* the processes' heartbeat timeout guards the launchers too */
  if (jx_env_double("JX_HEARTBEAT_TIMEOUT", &silent_s) < 0 || silent_s < 0) {
    fprintf(stderr, "jx launch: JX_HEARTBEAT_TIMEOUT='%s' is not a number of seconds >= 0\n",
            jx_env_string("JX_HEARTBEAT_TIMEOUT"));
    return 2;
  }
  const char *host = o.port ? o.host : "127.0.0.1";
  int rv_port = o.port;
  if (o.node_rank == 0) {
    jx_rdzv_config c = {.min_nodes = o.min_nodes,
                        .max_nodes = o.max_nodes,
                        .max_restarts = o.max_restarts,
                        .settle_s = o.settle_s,
                        .join_timeout_s = o.join_timeout_s,
                        .job_port = o.port ? o.port + 1 : free_port(),
                        .beat_s = silent_s / 5};
    if (c.job_port < 0 || (rv_port = jx_rdzv_serve(&c, o.port)) < 0) return 1;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  link_t rv = {.fd = jx_rdzv_connect(host, rv_port, o.join_timeout_s),
               .heard = jx_rdzv_now(),
               .silent_s = silent_s};
  if (rv.fd < 0) {
    say("cannot reach the rendezvous at %s:%d within %g s (is node 0's launcher running?)", host,
        rv_port, o.join_timeout_s);
    return 1;
  }
  int rc = 1;
  char why[1024] = "";
  for (;;) {
    jx_rdzv_send(rv.fd, "JOIN %d %d", o.node_rank, o.nproc);
    char line[1024];
    int r = next_line(&rv, line, sizeof line, o.join_timeout_s + o.settle_s + 5, why, sizeof why);
    if (r == -2) {
      say("the job failed: %s", why);
      break;
    }
    if (r != 1) {
      say("the rendezvous at %s:%d %s", host, rv_port,
          r ? "did not start the job in time" : "closed (node 0's launcher is gone)");
      break;
    }
    if (!strncmp(line, "END ", 4)) {
      say("the job failed: %s", line + 4);
      break;
    }
    int st = run_attempt(&o, &rv, line, why, sizeof why);
    if (st == ATTEMPT_DONE) {
      rc = 0;
      break;
    }
    if (st == ATTEMPT_ENDED) {
      say("the job failed: %s", why);
      break;
    }
    say("stopped: %s", why);
    if (interrupted) break;
  }
  close(rv.fd);
  if (o.node_rank == 0) jx_rdzv_wait();
  return rc;
}
