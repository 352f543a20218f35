/* Sockets that never block past a deadline (tcp_socket.h): non-blocking,
 * waited on with poll for the time left. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tcp_socket.h"

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

/* Moves bytes of one buffer as far as the socket allows: 0 when it made
 * progress or would block; 1 when the peer closed or the socket failed. */
static int step(int fd, int is_send, char *buf, size_t len, size_t *done) {
  while (*done < len) {
    ssize_t r = is_send ? send(fd, buf + *done, len - *done, MSG_NOSIGNAL)
                        : recv(fd, buf + *done, len - *done, 0);
    if (r > 0) {
      *done += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return 1;
  }
  return 0;
}

/* One whole buffer in one direction before deadline: 0, -1, -2 (tcp_socket.h). */
static int move_all(int fd, int is_send, char *buf, size_t len, double deadline) {
  size_t done = 0;
  for (;;) {
    if (step(fd, is_send, buf, len, &done)) return -1;
    if (done == len) return 0;
    if (jx_tcp_now() >= deadline) return -2;
    struct pollfd p = {fd, is_send ? POLLOUT : POLLIN, 0};
    poll(&p, 1, poll_ms(deadline));
  }
}

int jx_tcp_send_all(int fd, const void *buf, size_t len, double deadline) {
  return move_all(fd, 1, (char *)buf, len, deadline);
}

int jx_tcp_recv_all(int fd, void *buf, size_t len, double deadline) {
  return move_all(fd, 0, buf, len, deadline);
}
