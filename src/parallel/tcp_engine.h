/* The TCP engine: jx's collectives over processes without MPI, behind the
 * same function table as the MPI plugin (mpi_plugin.h), so that everything
 * above it (comm_hier.c, meshes, sharded jit) is unchanged. Compiled into
 * libjx: it needs only sockets and threads.
 *
 * Three parts, one file each:
 *   tcp_transport.c    sockets with deadlines, and the transfer loop that
 *                      moves many messages of one communicator at once
 *   tcp_rendezvous.c   the coordinator, the communicators (split), finalize
 *   tcp_collectives.c  run(): the collectives over a communicator's
 *                      connections
 * Every communicator has its own connections (one per pair of members), so
 * two communicators used from different threads never share a socket. Bytes
 * carry no framing: the members of a communicator call the same collectives
 * in the same order with the same sizes (as for MPI), so each side knows
 * what comes next. */
#ifndef JX_SRC_PARALLEL_TCP_ENGINE_H
#define JX_SRC_PARALLEL_TCP_ENGINE_H

#include <pthread.h>
#include <stddef.h>

#include "mpi_plugin.h"

/* The engine's table, configured for this process of the job: coordinator
 * is "host:port", where process 0 listens. init() then meets the others. */
const jx_mpi_api *jx_tcp_engine(const char *coordinator, int num_processes, int process_id);

/* ---- shared by the engine's files ---- */

struct jx_mpi_comm {
  int size, rank;               /* members; this process's place among them */
  int *world;                   /* per member: its process id */
  int *fd;                      /* per member: the connection to it (-1: itself) */
  char label[256];              /* what it is, for messages */
  int broken;                   /* an earlier collective failed: later ones fail at once */
  char reason[JX_MPI_MSG];      /* why */
  pthread_mutex_t mu;           /* one collective at a time */
  struct jx_mpi_comm *next_all; /* every communicator of the process, for finalize */
};

/* One message of a transfer: len bytes sent to or received from member peer. */
typedef struct {
  int peer, is_send;
  char *buf;
  size_t len, done;
} tcp_xfer;

double jx_tcp_now(void);
/* Moves every message of x (any mix of peers and directions) until all are
 * done: 0; or 1 with the reason in msg when a peer closes its connection or
 * the deadline (an absolute jx_tcp_now() time) passes. what names the
 * collective. The message names the processes that did not arrive. */
int jx_tcp_transfer(jx_mpi_comm *c, tcp_xfer *x, int n, double deadline, double timeout_s,
                    const char *what, char *msg, size_t cap);
/* The collectives (mpi_plugin.h's run). */
int jx_tcp_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap);
/* Set by every failed collective or split: finalize then aborts. */
void jx_tcp_note_failure(void);
/* 1 when process id said it ends after a failure of its own (finalize after
 * a failure notifies every process); waits up to wait_s for its notice. */
int jx_tcp_aborted(int id, double wait_s);

/* sockets (0 / a descriptor on success, -1 with the reason in msg) */
int jx_tcp_split_address(const char *addr, char *host, size_t hcap, int *port);
int jx_tcp_listen(int port, int *bound_port, char *msg, size_t cap); /* port 0: ephemeral */
/* Connects, retrying refused attempts until deadline (the listener may start
 * later); the socket is non-blocking with TCP_NODELAY. */
int jx_tcp_connect(const char *host, int port, double deadline, char *msg, size_t cap);
/* The next connection on listener lfd before deadline (-1: none). */
int jx_tcp_accept(int lfd, double deadline);
/* Whole buffers on one non-blocking socket: 0, -1 closed / error, -2 deadline. */
int jx_tcp_send_all(int fd, const void *buf, size_t len, double deadline);
int jx_tcp_recv_all(int fd, void *buf, size_t len, double deadline);

#endif
