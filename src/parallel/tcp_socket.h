/* TCP sockets with deadlines, for the job's key-value store (kv_store.h)
 * and the rendezvous at the coordinator: every call returns by its
 * deadline (an absolute jx_tcp_now() time). Descriptors are close-on-exec
 * and non-blocking, connections have TCP_NODELAY. */
#ifndef JX_SRC_PARALLEL_TCP_SOCKET_H
#define JX_SRC_PARALLEL_TCP_SOCKET_H

#include <stddef.h>

/* seconds on the monotonic clock */
double jx_tcp_now(void);
/* "host:port" or "[v6]:port" -> host, port: 0, or -1 when it is not one. */
int jx_tcp_split_address(const char *addr, char *host, size_t hcap, int *port);
/* A listener on port (0: ephemeral) of every interface: the descriptor and
 * its port in *bound_port, or -1 with the reason in msg. */
int jx_tcp_listen(int port, int *bound_port, char *msg, size_t cap);
/* Connects, retrying refused attempts until deadline (the listener may start
 * later): the descriptor, or -1 with the reason in msg. */
int jx_tcp_connect(const char *host, int port, double deadline, char *msg, size_t cap);
/* The next connection on listener lfd before deadline (-1: none). */
int jx_tcp_accept(int lfd, double deadline);
/* Whole buffers on one socket: 0, -1 closed / error, -2 deadline. */
int jx_tcp_send_all(int fd, const void *buf, size_t len, double deadline);
int jx_tcp_recv_all(int fd, void *buf, size_t len, double deadline);

#endif
