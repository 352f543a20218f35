/* A profile over the processes of a job: one trace, written by process 0.
 *
 * Clocks. Every process records in its own CLOCK_MONOTONIC seconds from a
 * common origin: process 0's moment at the end of jx_profiler_start. A
 * process running on the same kernel as process 0 (same boot id: one host,
 * or containers on it) reads the very same clock, so its offset is exactly
 * 0. Elsewhere the offset is measured: ROUNDS all-gathers of each process's
 * clock, each read as soon as the previous all-gather returned; each round
 * gives (its reading - process 0's), and the offset is their median. A
 * round's error is how far apart the processes leave a collective: on one
 * host (where the offset is not needed) the same rounds measure under 1 us
 * (processes poll for completion), across hosts the error is bounded by the
 * network's one-way latency (a few us on InfiniBand, tens of us on
 * Ethernet): enough to see which process a collective waited for, not to
 * order events a few microseconds apart on different hosts.
 *
 * Events. At stop every process sends process 0 one block: its record
 * (jx_prof_process) and its events as they are in memory (the processes run
 * the same program). The sizes go first (an all-gather), then the blocks (an
 * all-to-all in which only process 0 receives: a gather). Both have the
 * collective deadline, so a process that never stops fails the others with
 * the error naming it instead of hanging them. MPI counts bytes in an int:
 * when the blocks would pass 2 GiB on process 0 each process sends its
 * first events only, and the summary says how many were dropped. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jx/distributed.h>

#include "../base/error.h"
#include "../parallel/dist.h"
#include "../base/hooks.h"
#include "profiler_internal.h"

enum { ROUNDS = 9 };

static jx_mpi_comm *comm; /* every process, by index; made at the first profile */

static uint64_t fnv(uint64_t h, const char *s) {
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* Which CLOCK_MONOTONIC this process reads: the kernel's boot id, else the host. */
static uint64_t clock_id(void) {
  char id[128] = "";
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(id, sizeof id, f)) id[0] = '\0';
    fclose(f);
  }
  if (!id[0] && gethostname(id, sizeof id - 1)) id[0] = '\0';
  return fnv(1469598103934665603ULL, id);
}

static jx_status run(const char *what, jx_mpi_op *op) {
  char msg[JX_MPI_MSG] = "";
  jx_status st = jx_dist_run(comm, op, 0, msg, sizeof msg);
  if (st) jx_error_set(st, "%s: %s", what, msg);
  return st;
}

/* All-gather of size bytes per process: recv[q*size ..] = process q's send. */
static jx_status all_gather(const char *what, const void *send, void *recv, size_t size) {
  int P = jx_process_count();
  int64_t *counts = malloc(sizeof *counts * 2 * (size_t)P);
  if (!counts) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
  for (int q = 0; q < P; q++) {
    counts[q] = (int64_t)size;
    counts[P + q] = (int64_t)size * q;
  }
  memcpy((char *)recv + size * (size_t)jx_process_index(), send, size);
  jx_mpi_op op = {
      .kind = JX_MPI_ALLGATHERV, .recv = recv, .rcounts = counts, .rdispls = counts + P};
  jx_status st = run(what, &op);
  free(counts);
  return st;
}

typedef struct {
  int32_t ok;
  uint64_t clock;
  char why[240];
} start_note;

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

jx_status jx_prof_sync_start(int ok_here, const char *why_here, double *origin, double *offset,
                             int *shared) {
  const char *op = "jx_profiler_start";
  int P = jx_process_count(), me = jx_process_index();
  if (!comm && jx_dist_split(1, me, 0x6a7870726f66ULL, "the profiler", &comm))
    return jx_last_status();
  start_note mine = {.ok = ok_here, .clock = clock_id()}, *all = calloc((size_t)P, sizeof *all);
  double *t = calloc((size_t)P * ROUNDS, sizeof *t), d[ROUNDS];
  jx_status st = all && t ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  snprintf(mine.why, sizeof mine.why, "%s", why_here ? why_here : "");
  if (!st) st = all_gather(op, &mine, all, sizeof mine);
  char bad[1024] = "";
  for (int q = 0, len = 0; q < P && !st; q++)
    if (!all[q].ok && len < (int)sizeof bad)
      len += snprintf(bad + len, sizeof bad - (size_t)len, "%sprocess %d: %s", len ? "; " : "", q,
                      all[q].why);
  if (!st && bad[0]) /* every process fails, so that none waits for the others at stop */
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: not every process can profile (%s)", op, bad);
  for (int r = 0; r < ROUNDS && !st; r++) {
    double now = jx_prof_now();
    st = all_gather(op, &now, t + (size_t)r * P, sizeof now);
  }
  if (!st) {
    for (int r = 0; r < ROUNDS; r++) d[r] = t[(size_t)r * P + me] - t[(size_t)r * P];
    qsort(d, ROUNDS, sizeof *d, by_value);
    *shared = all[me].clock == all[0].clock;
    *offset = *shared ? 0 : d[ROUNDS / 2];
    /* process 0's last reading, in this clock: the origin every process counts from */
    *origin = t[(size_t)(ROUNDS - 1) * P] + *offset;
  }
  free(all);
  free(t);
  return st;
}

jx_status jx_prof_gather(const jx_prof_process *mine, const jx_prof_event *events, size_t n,
                         jx_prof_trace *out) {
  const char *op = "jx_profiler_stop";
  int P = jx_process_count(), me = jx_process_index();
  memset(out, 0, sizeof *out);
  int64_t *sizes = calloc((size_t)P * 6, sizeof *sizes), *scounts = sizes + P,
          *sdispls = sizes + 2 * P, *rcounts = sizes + 3 * P, *rdispls = sizes + 4 * P;
  int64_t my_size = (int64_t)(sizeof *mine + n * sizeof *events);
  jx_status st = sizes ? all_gather(op, &my_size, sizes, sizeof my_size)
                       : jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  /* what each process sends: all of its block while the total fits an int */
  int64_t total = 0, share = ((int64_t)INT_MAX / P) / 64 * 64;
  for (int q = 0; q < P && !st; q++) total += sizes[q];
  for (int q = 0; q < P && !st; q++)
    if (total > INT_MAX && sizes[q] > share)
      sizes[q] = (int64_t)sizeof *mine + (share - (int64_t)sizeof *mine) / (int64_t)sizeof *events *
                                             (int64_t)sizeof *events;
  char *block = NULL, *recv = NULL;
  if (!st) {
    block = malloc((size_t)sizes[me]);
    total = 0;
    for (int q = 0; q < P; q++) {
      rcounts[q] = me == 0 ? sizes[q] : 0;
      rdispls[q] = total;
      total += rcounts[q];
    }
    scounts[0] = sizes[me];
    recv = malloc((size_t)total + 1);
    if (!block || !recv) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  if (!st) {
    memcpy(block, mine, sizeof *mine);
    memcpy(block + sizeof *mine, events, (size_t)sizes[me] - sizeof *mine);
    jx_mpi_op o = {.kind = JX_MPI_ALLTOALLV,
                   .send = block,
                   .recv = recv,
                   .scounts = scounts,
                   .sdispls = sdispls,
                   .rcounts = rcounts,
                   .rdispls = rdispls};
    st = run(op, &o);
  }
  if (me == 0) { /* the whole trace; after a failure, this process's part alone */
    int nproc = st ? 1 : P;
    size_t nev = 0;
    for (int q = 0; q < nproc; q++)
      nev += st ? n : ((size_t)sizes[q] - sizeof *mine) / sizeof *events;
    out->proc = calloc((size_t)nproc, sizeof *out->proc);
    out->events = malloc(sizeof *out->events * (nev + 1));
    if (out->proc && out->events) {
      out->nproc = nproc;
      for (int q = 0; q < nproc; q++) {
        const char *b = st ? block : recv + rdispls[q];
        size_t k = st ? n : ((size_t)sizes[q] - sizeof *mine) / sizeof *events;
        if (st) {
          out->proc[q] = *mine;
          memcpy(out->events + out->nevents, events, k * sizeof *events);
        } else {
          memcpy(&out->proc[q], b, sizeof *mine);
          memcpy(out->events + out->nevents, b + sizeof *mine, k * sizeof *events);
        }
        out->nevents += k;
      }
    } else {
      free(out->proc);
      free(out->events);
      out->proc = NULL;
      out->events = NULL;
      if (!st) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    }
  }
  if (st && me == 0 && out->nproc)
    fprintf(stderr, "jx profile: the trace holds process 0's events only: %s\n", jx_last_error());
  free(sizes);
  free(block);
  free(recv);
  return st;
}
