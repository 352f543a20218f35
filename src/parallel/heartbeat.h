/* Heartbeats of a job whose processes meet at a coordinator (heartbeat.c),
 * over the job's key-value store (kv_store.h).
 *
 * Every process beats (adds 1 to "heartbeat/<id>") every fifth of
 * JX_HEARTBEAT_TIMEOUT (default 30 s; 0: no heartbeats) on a thread and
 * connection of its own. Process 0 watches: a process whose count stands
 * still for the timeout (killed, hung by SIGSTOP, its host gone), or whose
 * connection to the store closed without leaving the job, is lost; process
 * 0 writes "lost" naming it, and every process, waiting on that key between
 * beats, says which process was lost and why, fails every collective of its
 * own at once with that reason (jx_coordinator_interrupt: those in flight do
 * not wait for their deadline), and ends with status 1 a second later if its
 * program has not ended it on that error. A process whose
 * store does not take a beat (process 0 itself lost: its connection closed,
 * or no answer within the store's 5 s) ends the same way, naming process 0.
 * JAX's coordination service ends its processes so too. */
#ifndef JX_SRC_PARALLEL_HEARTBEAT_H
#define JX_SRC_PARALLEL_HEARTBEAT_H

#include <stddef.h>

/* The timeout: JX_HEARTBEAT_TIMEOUT seconds, 30 when unset, 0 for none. */
double jx_heartbeat_timeout(void);
/* Starts beating (and, on process 0, watching) for process id of nproc of
 * the job at the coordinator (joined: coordinator.h), on a store client of
 * its own: 0, or 1 with the reason in msg. */
int jx_heartbeat_start(int id, int nproc, char *msg, size_t cap);
/* Stops the thread; left: this process leaves the job in good order (its
 * store connection closing is then no loss). */
void jx_heartbeat_stop(int left);

#endif
