/* The key-value store's client (kv_store.h): one connection, one request
 * at a time under a mutex, each answered by the server within the request's
 * own deadline (the server answers a wait that ran out itself, so the
 * client allows a few seconds more before it gives up on the server). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kv_store.h"
#include "kv_wire.h"
#include "tcp_socket.h"

#define ANSWER_GRACE_S 5

struct jx_kv {
  int fd;
  char addr[300];
  pthread_mutex_t mu;
  kv_buf out;
};

/* Sends the request in kv->out (sealed here) and reads the answer within
 * wait_s (+ the grace): 0 with the body in *body (malloc'd, a 0 after it),
 * or 1 with the reason (the server's, or why there is none). */
static int exchange(jx_kv *kv, double wait_s, char **body, size_t *len, const char *what, char *msg,
                    size_t cap) {
  *body = NULL;
  kv_seal(&kv->out);
  if (kv->out.failed) {
    snprintf(msg, cap, "%s: out of memory", what);
    return 1;
  }
  double deadline = jx_tcp_now() + wait_s + ANSWER_GRACE_S;
  uint32_t n = 0;
  int st = jx_tcp_send_all(kv->fd, kv->out.p, kv->out.len, deadline);
  if (!st) st = jx_tcp_recv_all(kv->fd, &n, sizeof n, deadline);
  char *b = !st && n >= 1 && n <= KV_MAX_MESSAGE ? malloc((size_t)n + 1) : NULL;
  if (!st && b) st = jx_tcp_recv_all(kv->fd, b, n, deadline);
  if (st || !b) {
    free(b);
    snprintf(msg, cap, "%s: the coordinator at %s %s", what, kv->addr,
             st == -2 ? "did not answer in time"
             : st     ? "closed the connection"
                      : "sent nonsense");
    return 1;
  }
  b[n] = 0;
  if (b[0]) { /* refused: the reason follows */
    snprintf(msg, cap, "%s: the coordinator at %s: %s", what, kv->addr, b + 1);
    free(b);
    return 1;
  }
  memmove(b, b + 1, n); /* the value and its 0 */
  *body = b;
  *len = n - 1;
  return 0;
}

static int exchange_done(jx_kv *kv, double wait_s, const char *what, char *msg, size_t cap) {
  char *body;
  size_t len;
  int st = exchange(kv, wait_s, &body, &len, what, msg, cap);
  free(body);
  return st;
}

static int64_t ms(double s) { return s <= 0 ? 0 : s > 1e9 ? (int64_t)1e12 : (int64_t)(s * 1000); }

jx_kv *jx_kv_connect(const char *addr, const char *token, double timeout_s, char *msg, size_t cap) {
  char host[256], why[512] = "";
  int port;
  if (jx_tcp_split_address(addr, host, sizeof host, &port)) {
    snprintf(msg, cap, "the coordinator address '%s' is not host:port (e.g. 10.0.0.1:1234)", addr);
    return NULL;
  }
  jx_kv *kv = calloc(1, sizeof *kv);
  if (!kv) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  snprintf(kv->addr, sizeof kv->addr, "%s", addr);
  pthread_mutex_init(&kv->mu, NULL);
  kv->fd = jx_tcp_connect(host, port, jx_tcp_now() + timeout_s, why, sizeof why);
  if (kv->fd < 0) {
    snprintf(msg, cap, "could not reach the coordinator at %s within %g s (%s)", addr, timeout_s,
             why);
    jx_kv_close(kv);
    return NULL;
  }
  kv_begin(&kv->out, KV_HELLO);
  kv_put_str(&kv->out, token ? token : "");
  if (exchange_done(kv, 0, "joining", msg, cap)) {
    jx_kv_close(kv);
    return NULL;
  }
  return kv;
}

void jx_kv_close(jx_kv *kv) {
  if (!kv) return;
  if (kv->fd >= 0) close(kv->fd);
  pthread_mutex_destroy(&kv->mu);
  free(kv->out.p);
  free(kv);
}

int jx_kv_set(jx_kv *kv, const char *key, const void *value, size_t len, char *msg, size_t cap) {
  pthread_mutex_lock(&kv->mu);
  kv_begin(&kv->out, KV_SET);
  kv_put_str(&kv->out, key);
  kv_put_bytes(&kv->out, value, len);
  int st = exchange_done(kv, 0, "setting a key", msg, cap);
  pthread_mutex_unlock(&kv->mu);
  return st;
}

int jx_kv_get(jx_kv *kv, const char *key, double timeout_s, void **value, size_t *len, char *msg,
              size_t cap) {
  pthread_mutex_lock(&kv->mu);
  kv_begin(&kv->out, KV_GET);
  kv_put_str(&kv->out, key);
  kv_put_i64(&kv->out, ms(timeout_s));
  char *body;
  int st = exchange(kv, timeout_s, &body, len, "getting a key", msg, cap);
  pthread_mutex_unlock(&kv->mu);
  *value = st ? NULL : body;
  return st;
}

int jx_kv_wait(jx_kv *kv, const char *const *keys, int n, double timeout_s, char *msg, size_t cap) {
  char count[16];
  snprintf(count, sizeof count, "%d", n);
  pthread_mutex_lock(&kv->mu);
  kv_begin(&kv->out, KV_WAIT);
  kv_put_str(&kv->out, count);
  for (int i = 0; i < n; i++) kv_put_str(&kv->out, keys[i]);
  kv_put_i64(&kv->out, ms(timeout_s));
  int st = exchange_done(kv, timeout_s, "waiting for keys", msg, cap);
  pthread_mutex_unlock(&kv->mu);
  return st;
}

int jx_kv_add(jx_kv *kv, const char *key, int64_t delta, int64_t *value, char *msg, size_t cap) {
  pthread_mutex_lock(&kv->mu);
  kv_begin(&kv->out, KV_ADD);
  kv_put_str(&kv->out, key);
  kv_put_i64(&kv->out, delta);
  char *body;
  size_t len = 0;
  int st = exchange(kv, 0, &body, &len, "adding to a counter", msg, cap);
  pthread_mutex_unlock(&kv->mu);
  if (!st && len == sizeof *value) memcpy(value, body, sizeof *value);
  free(body);
  return st;
}

int jx_kv_join(jx_kv *kv, int id, int nproc, const char *host, double timeout_s, char *msg,
               size_t cap) {
  char ids[16];
  snprintf(ids, sizeof ids, "%d", id);
  pthread_mutex_lock(&kv->mu);
  kv_begin(&kv->out, KV_JOIN);
  kv_put_str(&kv->out, ids);
  kv_put_i64(&kv->out, nproc);
  kv_put_str(&kv->out, host);
  kv_put_i64(&kv->out, ms(timeout_s));
  int st = exchange_done(kv, timeout_s, "the rendezvous", msg, cap);
  pthread_mutex_unlock(&kv->mu);
  return st;
}

void jx_kv_local_host(const jx_kv *kv, char *host, size_t cap) {
  struct sockaddr_storage self;
  socklen_t len = sizeof self;
  if (getsockname(kv->fd, (struct sockaddr *)&self, &len) == 0 && self.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&self)->sin_addr, host, (socklen_t)cap);
  else if (len && self.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&self)->sin6_addr, host, (socklen_t)cap);
  else
    snprintf(host, cap, "127.0.0.1");
}
