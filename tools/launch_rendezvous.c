/* jx launch's rendezvous of nodes (launch.h): the server on node rank 0's
 * launcher, and the socket helpers both sides use. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"

enum { MAX_NODES = 1024, LINE = 1024 };

double jx_rdzv_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int jx_rdzv_send(int fd, const char *fmt, ...) {
  char line[LINE];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return -1;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  for (int done = 0; done < n;) {
    ssize_t w = send(fd, line + done, (size_t)(n - done), MSG_NOSIGNAL);
    if (w <= 0 && errno != EINTR) return -1;
    if (w > 0) done += (int)w;
  }
  return 0;
}

int jx_rdzv_read_line(int fd, char *buf, size_t cap, size_t *len, char *line, size_t lcap,
                      double timeout_s) {
  double deadline = jx_rdzv_now() + timeout_s;
  for (int tried = 0;; tried = 1) {
    char *nl = memchr(buf, '\n', *len);
    if (nl) {
      size_t n = (size_t)(nl - buf);
      snprintf(line, lcap, "%.*s", (int)n, buf);
      memmove(buf, nl + 1, *len - n - 1);
      *len -= n + 1;
      return 1;
    }
    if (*len == cap) *len = 0; /* a line longer than any of the protocol's: drop it */
    double left = deadline - jx_rdzv_now();
    if (left <= 0 && tried) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
    if (r <= 0) continue;
    ssize_t got = recv(fd, buf + *len, cap - *len, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    *len += (size_t)got;
  }
}

int jx_rdzv_connect(const char *host, int port, double timeout_s) {
  double deadline = jx_rdzv_now() + timeout_s;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  while (jx_rdzv_now() < deadline) {
    if (!ai && getaddrinfo(host, service, &hints, &ai)) ai = NULL;
    if (ai) {
      int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        freeaddrinfo(ai);
        return fd;
      }
      if (fd >= 0) close(fd);
    }
    usleep(100 * 1000);
  }
  if (ai) freeaddrinfo(ai);
  return -1;
}

/* ---- the server ---- */

typedef struct {
  int fd, node_rank, nproc;
  int joined, member, done;
  char buf[LINE];
  size_t len;
} node;

static jx_rdzv_config cfg;
static int listen_fd = -1;
static pthread_t thread;
static int serving;
static node *nodes;
static int nnodes;
static int attempt, running, finished;
static double join_start, fewest_since;

static void send_members(const char *kind, const char *why) {
  for (int i = 0; i < nnodes; i++)
    if (nodes[i].joined || nodes[i].member) jx_rdzv_send(nodes[i].fd, "%s %s", kind, why);
}

static void fail_attempt(const char *why) {
  char text[LINE];
  if (attempt >= cfg.max_restarts) {
    snprintf(text, sizeof text, "%s; no restart left (--max-restarts %d)", why, cfg.max_restarts);
    send_members("END", text);
    finished = 1;
  } else {
    snprintf(text, sizeof text, "%s; restart %d of %d", why, attempt + 1, cfg.max_restarts);
    send_members("STOP", text);
    attempt++;
  }
  running = 0;
  for (int i = 0; i < nnodes; i++) nodes[i].joined = nodes[i].member = nodes[i].done = 0;
  join_start = jx_rdzv_now();
  fewest_since = -1;
}

static int by_rank(const void *a, const void *b) {
  const node *x = *(node *const *)a, *y = *(node *const *)b;
  return (x->node_rank > y->node_rank) - (x->node_rank < y->node_rank);
}

static void start_attempt(void) {
  node *order[MAX_NODES];
  int n = 0, total = 0;
  for (int i = 0; i < nnodes; i++)
    if (nodes[i].joined) order[n++] = &nodes[i], total += nodes[i].nproc;
  qsort(order, (size_t)n, sizeof *order, by_rank);
  for (int i = 1; i < n; i++)
    if (order[i]->node_rank == order[i - 1]->node_rank) {
      char why[128];
      snprintf(why, sizeof why, "two launchers say they are node rank %d", order[i]->node_rank);
      send_members("END", why);
      finished = 1;
      return;
    }
  char token[17];
  unsigned long long t = (unsigned long long)time(NULL) * 6364136223846793005ULL ^
                         (unsigned long long)getpid() << 20 ^ (unsigned long long)attempt;
  snprintf(token, sizeof token, "%016llx", t);
  for (int i = 0, first = 0; i < n; first += order[i]->nproc, i++) {
    order[i]->member = 1;
    jx_rdzv_send(order[i]->fd, "GO %d %d %d %d %d %d %s", attempt, n, i, first, total, cfg.job_port,
                 token);
  }
  running = 1;
}

static void drop(int i) {
  char why[160];
  if (running && nodes[i].member && !nodes[i].done) {
    snprintf(why, sizeof why, "the launcher of node %d went away (its host is gone?)",
             nodes[i].node_rank);
    close(nodes[i].fd);
    nodes[i] = nodes[--nnodes];
    fail_attempt(why);
    return;
  }
  close(nodes[i].fd);
  nodes[i] = nodes[--nnodes];
}

static void on_line(node *p, const char *line) {
  if (!strncmp(line, "JOIN ", 5)) {
    if (sscanf(line + 5, "%d %d", &p->node_rank, &p->nproc) == 2 && p->nproc > 0) p->joined = 1;
  } else if (!strncmp(line, "FAIL ", 5)) {
    if (running && p->member) fail_attempt(line + 5);
  } else if (!strcmp(line, "DONE")) {
    p->done = 1;
    int all = running;
    for (int i = 0; i < nnodes; i++) all &= !nodes[i].member || nodes[i].done;
    if (all) finished = 1;
  }
}

static void *serve(void *arg) {
  (void)arg;
  join_start = jx_rdzv_now();
  fewest_since = -1;
  double beat_at = join_start;
  while (!finished) {
    if (cfg.beat_s > 0 && jx_rdzv_now() >= beat_at) {
      for (int i = 0; i < nnodes; i++) jx_rdzv_send(nodes[i].fd, "BEAT");
      beat_at = jx_rdzv_now() + cfg.beat_s;
    }
    struct pollfd p[MAX_NODES + 1];
    p[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    for (int i = 0; i < nnodes; i++)
      p[1 + i] = (struct pollfd){.fd = nodes[i].fd, .events = POLLIN};
    int count = nnodes;
    if (poll(p, (nfds_t)count + 1, 100) > 0) {
      for (int i = count - 1; i >= 0; i--) {
        if (!(p[1 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        node *q = &nodes[i];
        char line[LINE];
        int r;
        while (!finished && (r = jx_rdzv_read_line(q->fd, q->buf, sizeof q->buf, &q->len, line,
                                                   sizeof line, 0)) == 1)
          on_line(q, line);
        if (!finished && r == 0) drop(i);
      }
      if (p[0].revents & POLLIN) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0 && nnodes < MAX_NODES)
          nodes[nnodes++] = (node){.fd = fd};
        else if (fd >= 0)
          close(fd);
      }
    }
    if (running || finished) continue;
    int joined = 0;
    for (int i = 0; i < nnodes; i++) joined += nodes[i].joined;
    double now = jx_rdzv_now();
    if (joined >= cfg.min_nodes && fewest_since < 0) fewest_since = now;
    if (joined < cfg.min_nodes) fewest_since = -1;
    if (joined >= cfg.max_nodes ||
        (joined >= cfg.min_nodes && now - fewest_since >= cfg.settle_s)) {
      start_attempt();
    } else if (now - join_start > cfg.join_timeout_s) {
      char why[160];
      snprintf(why, sizeof why, "only %d of at least %d nodes joined within %g s", joined,
               cfg.min_nodes, cfg.join_timeout_s);
      send_members("END", why);
      finished = 1;
    }
  }
  for (int i = 0; i < nnodes; i++) close(nodes[i].fd);
  close(listen_fd);
  return NULL;
}

int jx_rdzv_serve(const jx_rdzv_config *c, int port) {
  cfg = *c;
  nodes = calloc(MAX_NODES, sizeof *nodes);
  listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (!nodes || listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) ||
      listen(listen_fd, SOMAXCONN) || getsockname(listen_fd, (struct sockaddr *)&a, &len)) {
    fprintf(stderr, "jx launch: cannot serve the rendezvous on port %d: %s\n", port,
            strerror(errno));
    return -1;
  }
  if (pthread_create(&thread, NULL, serve, NULL)) {
    fprintf(stderr, "jx launch: cannot start the rendezvous thread\n");
    return -1;
  }
  serving = 1;
  return ntohs(a.sin_port);
}

void jx_rdzv_wait(void) {
  if (serving) pthread_join(thread, NULL);
  serving = 0;
  free(nodes);
  nodes = NULL;
}
