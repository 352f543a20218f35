/* jx launch's rendezvous of nodes (launch_rendezvous.c): the launcher of
 * node rank 0 serves it; every node's launcher (node 0's too) joins it for
 * each attempt of the job. Lines of text over one TCP connection per node:
 *   launcher -> server  "JOIN <node rank> <processes>"  ready for an attempt
 *                       "FAIL <why>"   a process of this node failed
 *                       "DONE"         every process of this node exited 0
 *   server -> launcher  "GO <attempt> <nodes> <node index> <first process id>
 *                        <processes in all> <job port> <job token>"
 *                       "STOP <why>"   stop the processes; JOIN again
 *                       "END <why>"    stop the processes; the job failed
 *                       "BEAT"         every fifth of JX_HEARTBEAT_TIMEOUT: a launcher
 *                                      that hears nothing from node 0 for that long
 *                                      (its host hangs or is cut off, and no
 *                                      connection closes) stops its processes and ends
 * An attempt starts when the most nodes have joined, or the fewest (elastic
 * --nnodes MIN:MAX) have and no other came within the settle time. A failed
 * process, or a node's launcher that goes away (its connection closes: the
 * host is gone), stops the attempt everywhere; the next one starts with the
 * nodes that join it, up to --max-restarts times. */
#ifndef JX_TOOLS_LAUNCH_H
#define JX_TOOLS_LAUNCH_H

typedef struct {
  int min_nodes, max_nodes, max_restarts;
  double settle_s, join_timeout_s;
  int job_port;  /* where each attempt's process 0 serves (JX_COORDINATOR_ADDRESS) */
  double beat_s; /* seconds between two BEATs to every node (0: none) */
} jx_rdzv_config;

/* Starts the server on a thread, listening on port (0: any; the port is
 * returned); -1 with a message on stderr. */
int jx_rdzv_serve(const jx_rdzv_config *c, int port);
/* Waits until the server has ended (every node done, or the job failed). */
void jx_rdzv_wait(void);

/* A line from fd within timeout_s (0 terminated, no newline): 1; 0 on EOF
 * or error; -1 on timeout. buf/len keep bytes read past the line. */
int jx_rdzv_read_line(int fd, char *buf, size_t cap, size_t *len, char *line, size_t lcap,
                      double timeout_s);
int jx_rdzv_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A connection to host:port, retrying until timeout_s: the socket, or -1. */
int jx_rdzv_connect(const char *host, int port, double timeout_s);
double jx_rdzv_now(void);

#endif
