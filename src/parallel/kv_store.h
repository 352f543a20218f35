/* The job's key-value store: what the processes of a job share before (and
 * beside) their collectives. The coordinator serves it (process 0 on a
 * thread, or a process of its own); every process holds a client.
 *
 * Operations, as PyTorch's TCPStore and JAX's coordination service offer:
 *   set(key, value)          stores (replaces) a value
 *   get(key, timeout)        the value, waiting for the key to be set
 *   wait(keys, timeout)      returns once every key is set; at the deadline
 *                            fails naming the keys still missing
 *   add(key, delta)          adds to an integer counter (created at 0) and
 *                            returns the new value
 *   join(id, nproc, timeout) the rendezvous: returns once every process of
 *                            the job joined; refuses ids out of range, two
 *                            processes with one id and process counts that
 *                            differ from the job's (naming them, on every
 *                            process that came); at the deadline names the
 *                            processes that did not arrive
 * When the connection of a process that joined closes (the process ended,
 * or left the job), the server sets the key "closed/<id>".
 *
 * Jobs. A server holds the keys of each job apart: a job is its token (a
 * secret string shared by its processes; JX_JOB_TOKEN, or empty) and its
 * process count. A client says its token first; the server accepts only
 * the tokens of the jobs it serves, so a process of another job (or a
 * stray connection) is turned away and cannot read or write the job's keys.
 *
 * Every call returns by its deadline. A client may be used from many
 * threads: one request at a time goes over its connection. Errors: 1 with
 * the reason in msg (the calls name the coordinator's address). */
#ifndef JX_SRC_PARALLEL_KV_STORE_H
#define JX_SRC_PARALLEL_KV_STORE_H

#include <stddef.h>
#include <stdint.h>

/* ---- the server ---- */

typedef struct jx_kv_server jx_kv_server;

/* Serves the job of nproc processes whose clients say token on port (0:
 * ephemeral; the port taken in *bound_port) from a thread of its own: the
 * server, or NULL with the reason in msg. */
jx_kv_server *jx_kv_server_start(int port, const char *token, int nproc, int *bound_port, char *msg,
                                 size_t cap);
/* Serves another job (a token may serve one job): 0, or 1 with the
 * reason. */
int jx_kv_server_add_job(jx_kv_server *s, const char *token, int nproc, char *msg, size_t cap);
/* How many processes that joined a job still hold their connection. */
int jx_kv_server_processes(jx_kv_server *s);
/* Stops serving: the clients' connections close. NULL is fine. */
void jx_kv_server_stop(jx_kv_server *s);

/* ---- the client ---- */

typedef struct jx_kv jx_kv;

/* Connects to the server at addr ("host:port"), retrying until timeout_s
 * passes (the server may start later), and presents token: the client, or
 * NULL with the reason. */
jx_kv *jx_kv_connect(const char *addr, const char *token, double timeout_s, char *msg, size_t cap);
void jx_kv_close(jx_kv *kv); /* NULL is fine */

int jx_kv_set(jx_kv *kv, const char *key, const void *value, size_t len, char *msg, size_t cap);
/* *value: malloc'd (free it), *len bytes, with a 0 after them. */
int jx_kv_get(jx_kv *kv, const char *key, double timeout_s, void **value, size_t *len, char *msg,
              size_t cap);
int jx_kv_wait(jx_kv *kv, const char *const *keys, int n, double timeout_s, char *msg, size_t cap);
int jx_kv_add(jx_kv *kv, const char *key, int64_t delta, int64_t *value, char *msg, size_t cap);
/* The rendezvous: this is process id of nproc; host names it in messages. */
int jx_kv_join(jx_kv *kv, int id, int nproc, const char *host, double timeout_s, char *msg,
               size_t cap);
/* The address this client's connection leaves from (the interface through
 * which the coordinator is reached), as text. */
void jx_kv_local_host(const jx_kv *kv, char *host, size_t cap);

#endif
