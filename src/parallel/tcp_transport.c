/* The TCP engine's transport (tcp_engine.h): sockets that never block past
 * a deadline (non-blocking, waited on with poll for the time left), and the
 * transfer loop that moves every message of one step of a collective at
 * once, so that exchanges in any pattern cannot deadlock on full socket
 * buffers. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp_engine.h"
#include "../base/str_append.h"

double jx_tcp_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* poll's timeout for the time left until deadline: at least 1 ms, so that
 * the last wait does not spin */
static int poll_ms(double deadline) {
  double left = deadline - jx_tcp_now();
  if (left <= 0) return 0;
  return left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

static void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
}

int jx_tcp_split_address(const char *addr, char *host, size_t hcap, int *port) {
  const char *colon = addr ? strrchr(addr, ':') : NULL;
  if (!colon || colon == addr || (size_t)(colon - addr) >= hcap) return -1;
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || p < 1 || p > 65535) return -1;
  const char *h = addr, *he = colon;
  if (*h == '[' && he[-1] == ']') h++, he--; /* [::1]:port */
  snprintf(host, hcap, "%.*s", (int)(he - h), h);
  *port = (int)p;
  return 0;
}

int jx_tcp_listen(int port, int *bound_port, char *msg, size_t cap) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(msg, cap, "socket: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, SOMAXCONN)) {
    snprintf(msg, cap, "cannot listen on port %d: %s", port, strerror(errno));
    close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  *bound_port = ntohs(a.sin_port);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  return fd;
}

/* One non-blocking connect to ai within deadline: the socket, or -1 (errno). */
static int connect_once(const struct addrinfo *ai, double deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return -1;
  tune(fd);
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  struct pollfd p = {fd, POLLOUT, 0};
  int r;
  while ((r = poll(&p, 1, poll_ms(deadline))) < 0 && errno == EINTR) continue;
  int err = 0;
  socklen_t len = sizeof err;
  if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) return fd;
  close(fd);
  errno = r == 1 ? err : ETIMEDOUT;
  return -1;
}

int jx_tcp_connect(const char *host, int port, double deadline, char *msg, size_t cap) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc) {
    snprintf(msg, cap, "cannot resolve '%s': %s", host, gai_strerror(rc));
    return -1;
  }
  int err = 0;
  for (;;) {
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int fd = connect_once(ai, deadline);
      if (fd >= 0) {
        freeaddrinfo(res);
        return fd;
      }
      err = errno;
    }
    if (jx_tcp_now() >= deadline) break;
    struct timespec pause = {0, 20 * 1000 * 1000}; /* nobody listens yet: try again soon */
    nanosleep(&pause, NULL);
  }
  freeaddrinfo(res);
  snprintf(msg, cap, "could not connect to %s:%d (%s)", host, port, strerror(err));
  return -1;
}

int jx_tcp_accept(int lfd, double deadline) {
  for (;;) {
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
      tune(fd);
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return -1;
    if (jx_tcp_now() >= deadline) return -1;
    struct pollfd p = {lfd, POLLIN, 0};
    poll(&p, 1, poll_ms(deadline));
  }
}

/* Moves bytes of one message as far as the socket allows: 0 when it made
 * progress or would block; 1 when the peer closed or the socket failed. */
static int step(int fd, tcp_xfer *x) {
  while (x->done < x->len) {
    ssize_t r = x->is_send ? send(fd, x->buf + x->done, x->len - x->done, MSG_NOSIGNAL)
                           : recv(fd, x->buf + x->done, x->len - x->done, 0);
    if (r > 0) {
      x->done += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return 1;
  }
  return 0;
}

static int waits(const tcp_xfer *x) { return x->done < x->len; }

int jx_tcp_send_all(int fd, const void *buf, size_t len, double deadline) {
  tcp_xfer x = {0, 1, (char *)buf, len, 0};
  for (;;) {
    if (step(fd, &x)) return -1;
    if (!waits(&x)) return 0;
    if (jx_tcp_now() >= deadline) return -2;
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, poll_ms(deadline));
  }
}

int jx_tcp_recv_all(int fd, void *buf, size_t len, double deadline) {
  tcp_xfer x = {0, 0, buf, len, 0};
  for (;;) {
    if (step(fd, &x)) return -1;
    if (!waits(&x)) return 0;
    if (jx_tcp_now() >= deadline) return -2;
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, poll_ms(deadline));
  }
}

/* 1 when the connection to member q is closed (or failed): its process
 * ended. failed: the member whose connection step() already found so (the
 * error is reported once), or -1. */
static int ended(const jx_mpi_comm *c, int q, int failed) {
  if (q == failed) return 1;
  char b;
  ssize_t r = recv(c->fd[q], &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return !(r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)));
}

/* Who did not arrive: the members that ended, else those this process
 * still waits on that are alive, else those that ended after a failure of
 * their own (which announce it, tcp_rendezvous.c: a failure spreads, and the
 * process that failed first is the one to name). failed: a member step()
 * found ended. */
static void blame(const jx_mpi_comm *c, const tcp_xfer *x, int n, int failed, double timeout_s,
                  const char *what, char *msg, size_t cap) {
  char *state = calloc((size_t)c->size, 1), *out = calloc((size_t)c->size, 1);
  int count = 0, why = 0; /* 1: they ended, 2: after a failure of their own */
  double wait = 0.1;      /* for notices still on their way */
  for (int q = 0; q < c->size && state; q++)
    if (q != c->rank && ended(c, q, failed)) {
      state[q] = jx_tcp_aborted(c->world[q], wait) ? 2 : 1;
      wait = 0;
    }
  for (int q = 0; q < c->size && out && state; q++)
    if (state[q] == 1) out[q] = 1, count++, why = 1;
  for (int i = 0; i < n && out && state && !count; i++)
    if (waits(&x[i]) && !state[x[i].peer] && !out[x[i].peer]) out[x[i].peer] = 1, count++;
  for (int q = 0; q < c->size && out && state && !count; q++)
    if (state[q] == 2) out[q] = 1, count++, why = 2;
  snprintf(msg, cap, "%s over TCP among processes", what);
  for (int q = 0; q < c->size; q++) jx_str_append(msg, cap, "%s%d", q ? "," : " ", c->world[q]);
  jx_str_append(msg, cap, " (%s): %s", c->label, count == 1 ? "process" : "processes");
  int listed = 0;
  for (int q = 0; q < c->size && out; q++)
    if (out[q]) jx_str_append(msg, cap, "%s%d", listed++ ? ", " : " ", c->world[q]);
  jx_str_append(msg, cap, " did not arrive within %g s%s", timeout_s,
                why == 1   ? (count == 1 ? " (it ended)" : " (they ended)")
                : why == 2 ? (count == 1 ? " (it ended after a failure of its own)"
                                         : " (they ended after failures of their own)")
                           : "");
  free(state);
  free(out);
}

int jx_tcp_transfer(jx_mpi_comm *c, tcp_xfer *x, int n, double deadline, double timeout_s,
                    const char *what, char *msg, size_t cap) {
  struct pollfd small[16], *pf = n <= 16 ? small : malloc(sizeof *pf * (size_t)n);
  int st = 0;
  if (!pf) {
    snprintf(msg, cap, "%s: out of memory", what);
    st = 1;
  }
  while (!st) {
    int k = 0;
    for (int i = 0; i < n && !st; i++) {
      if (!waits(&x[i])) continue;
      int how = step(c->fd[x[i].peer], &x[i]); /* try first: most messages fit the buffers */
      if (how) {
        blame(c, x, n, x[i].peer, timeout_s, what, msg, cap);
        st = 1;
      } else if (waits(&x[i])) {
        pf[k++] = (struct pollfd){c->fd[x[i].peer], x[i].is_send ? POLLOUT : POLLIN, 0};
      }
    }
    if (st || !k) break;
    if (jx_tcp_now() >= deadline) {
      blame(c, x, n, -1, timeout_s, what, msg, cap);
      st = 1;
      break;
    }
    if (poll(pf, (nfds_t)k, poll_ms(deadline)) < 0 && errno != EINTR) {
      snprintf(msg, cap, "%s: poll: %s", what, strerror(errno));
      st = 1;
    }
  } /* the next pass steps every waiting message again */
  if (pf != small) free(pf);
  return st;
}
