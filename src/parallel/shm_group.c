/* The processes of one host in shared memory (shm_group.h). */
#include "shm_group.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <jx/array.h>

#include "../base/cpu_features.h"
#include "../base/env.h"
#include "../base/spin.h"
#include "comm.h"

enum {
  LINE = 128,             /* a member's flag has two cache lines to itself (adjacent prefetch) */
  YIELD_NS = 2000000,     /* after the spin, yield the CPU this long before sleeping */
  NAP_MIN_NS = 20000,     /* then sleep, doubling the nap up to NAP_MAX_NS */
  NAP_MAX_NS = 1000000,   /* (a wait that long is a step of a training loop, or a fault) */
  LIVENESS_NS = 20000000, /* how often a long wait looks whether the missing members live */
  ONE_STEP_BYTES = 128 << 10,   /* all-reduces whose members' buffers take up to this much
                                   together: every member reduces everything */
  SEGMENT_BYTES = 4 << 20,      /* the data of a group's segment (with 64 members or fewer) */
  MOVE_NS = 10000000,           /* the least time between two moves off a CPU (move_off) */
  SINGLE_COPY_BYTES = 16 << 20, /* JX_SHM_SINGLE_COPY's default: collectives of this much
                                   data or more read the members' buffers directly */
  READ_CHUNK_BYTES = 64 << 10   /* a reduction reads its peers' operands this much at a time */
};
#define MAGIC 0x6a78736867ULL

typedef struct {
  uint64_t flag;     /* the last step whose data this member has written */
  uint64_t value[2]; /* a number of the member's per step (by parity) */
  uint64_t send_at;  /* single copy: the addresses of the collective's buffers in this */
  uint64_t recv_at;  /* member's process (written before the step that publishes them) */
  uint64_t probe_at; /* the address of a word that holds MAGIC in this member's process */
  int32_t pid;
  int32_t cpu; /* 1 + the CPU the member ran on when it last waited; 0: not yet */
  char pad[LINE - 6 * sizeof(uint64_t) - 2 * sizeof(int32_t)];
} member_line;

typedef struct {
  uint64_t magic;
  int32_t members, mapped; /* mapped: how many members mapped the segment */
  uint64_t slot;           /* bytes of a slot */
  int32_t abort_by;        /* 1 + process id of the first member that gave up, or 0 */
  int32_t found_here;      /* it gave up on a collective of this group (not elsewhere) */
  char why[512];           /* its reason, written before abort_by */
} header;

struct jx_shm_group {
  int me, m;
  int *procs;
  char label[160];
  char *base;   /* the mapping */
  size_t bytes; /* its length */
  header *h;
  member_line *line; /* m of them */
  char *data;        /* 2 buffers of m slots */
  size_t slot;
  const char **srcs; /* m pointers: a reduction's operands */
  uint64_t step;     /* the steps so far: the same on every member */
  jx_spin_site site;
  int64_t direct; /* single copy from this many bytes on; 0: never (copies through the
                     segment); -1: the members have not agreed yet */
  char *scratch;  /* single copy: a chunk of each peer's operands */
  int broken;
  char reason[JX_MPI_MSG];
};

static pthread_mutex_t interrupt_mu = PTHREAD_MUTEX_INITIALIZER;
static int interrupted; /* read without the lock in waits */
static char interrupt_why[512];

void jx_shm_interrupt(const char *why) {
  pthread_mutex_lock(&interrupt_mu);
  if (!interrupted) snprintf(interrupt_why, sizeof interrupt_why, "%s", why && *why ? why : "?");
  __atomic_store_n(&interrupted, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&interrupt_mu);
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* A slot: the segment's two buffers of m slots are SEGMENT_BYTES (fewer
 * steps, each a point where a preempted member holds up the others, with
 * larger slots; little memory per communicator with smaller ones). */
static size_t slot_bytes(int m) {
  size_t s = SEGMENT_BYTES / 2 / (size_t)m;
  if (s < (32 << 10)) s = 32 << 10;
  return round_up(s, 4096);
}

static size_t header_bytes(int m) {
  return round_up(round_up(sizeof(header), LINE) + (size_t)m * sizeof(member_line), 4096);
}

static void attach(jx_shm_group *g, char *base, size_t bytes) {
  g->base = base;
  g->bytes = bytes;
  g->h = (header *)base;
  g->line = (member_line *)(base + round_up(sizeof(header), LINE));
  g->data = base + header_bytes(g->m);
}

static jx_shm_group *group_new(int me, int m, const int *procs, const char *label) {
  jx_shm_group *g = calloc(1, sizeof *g);
  if (!g || !(g->procs = malloc(sizeof *g->procs * (size_t)m)) ||
      !(g->srcs = malloc(sizeof *g->srcs * (size_t)m))) {
    if (g) free(g->procs);
    free(g);
    return NULL;
  }
  g->me = me;
  g->m = m;
  memcpy(g->procs, procs, sizeof *g->procs * (size_t)m);
  snprintf(g->label, sizeof g->label, "%s", label);
  g->slot = slot_bytes(m);
  g->direct = -1;
  return g;
}

void jx_shm_group_close(jx_shm_group *g) {
  if (!g) return;
  if (g->base) munmap(g->base, g->bytes);
  free(g->procs);
  free(g->srcs);
  free(g->scratch);
  free(g);
}

static void nap(int64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  nanosleep(&t, NULL);
}

/* ---- single copy: permission to read the members' processes ---- */

/* The word a member reads in each peer to learn whether it may (agree_direct). */
static const volatile uint64_t probe_word = MAGIC;

static pthread_once_t allow_once = PTHREAD_ONCE_INIT;
static char local_why[256];   /* why this process reads no peer's memory; "" when it may */
static int64_t local_from;    /* JX_SHM_SINGLE_COPY: single copy from this many bytes on */
static int local_refusal;     /* the kernel refused (a reason to tell), not the setting */
static char bad_setting[160]; /* JX_SHM_SINGLE_COPY that is not a size: the error */

/* Under Yama's ptrace scope 1 (the default of several distributions) a
 * process reads only its descendants' memory unless the target allows it:
 * every member allows the processes of its user, as Open MPI's shared
 * memory transport does for its single copy. Scopes 2 and 3 allow nothing. */
static void allow_reading_once(void) {
  long long from = SINGLE_COPY_BYTES;
  if (jx_env_int("JX_SHM_SINGLE_COPY", &from) < 0 || from < 0) {
    snprintf(bad_setting, sizeof bad_setting,
             "JX_SHM_SINGLE_COPY='%.80s' is not a size in bytes (0: never single copy)",
             jx_env_string("JX_SHM_SINGLE_COPY"));
    return;
  }
  local_from = (int64_t)from;
  if (!from) {
    snprintf(local_why, sizeof local_why, "JX_SHM_SINGLE_COPY=0");
    return;
  }
  local_refusal = 1;
  int scope = 0;
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f) {
    if (fscanf(f, "%d", &scope) != 1) scope = 0;
    fclose(f);
  }
  if (scope >= 2)
    snprintf(local_why, sizeof local_why,
             "the kernel's ptrace scope is %d (kernel.yama.ptrace_scope): no process may read "
             "another's memory",
             scope);
  else if (scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0))
    snprintf(local_why, sizeof local_why, "prctl(PR_SET_PTRACER): %s", strerror(errno));
  else
    local_refusal = 0;
}
static void allow_reading(void) { pthread_once(&allow_once, allow_reading_once); }

/* The creator: a new segment under a name of its own, published in store. */
static int create(jx_shm_group *g, jx_kv *store, const char *key, char *name, size_t name_cap,
                  char *msg, size_t cap) {
  size_t bytes = header_bytes(g->m) + 2 * (size_t)g->m * g->slot;
  static unsigned serial;
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 8; tries++) {
    snprintf(name, name_cap, "/jx.%d.%u.%llx", (int)getpid(),
             __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED),
             (unsigned long long)(jx_now_ns() & 0xffffff));
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    snprintf(msg, cap, "cannot create a shared memory segment (shm_open %s): %s", name,
             strerror(errno));
    return 1;
  }
  /* reserve the pages now: a full /dev/shm is an error here, not a SIGBUS later */
  int err = ftruncate(fd, (off_t)bytes) ? errno : posix_fallocate(fd, 0, (off_t)bytes);
  char *base = err ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (!err && base == MAP_FAILED) err = errno;
  close(fd);
  if (err) {
    shm_unlink(name);
    snprintf(msg, cap, "cannot reserve %zu bytes of shared memory (/dev/shm): %s", bytes,
             strerror(err));
    return 1;
  }
  attach(g, base, bytes);
  g->h->members = g->m;
  g->h->slot = g->slot;
  __atomic_store_n(&g->h->magic, MAGIC, __ATOMIC_RELEASE);
  if (jx_kv_set(store, key, name, strlen(name) + 1, msg, cap)) {
    shm_unlink(name);
    return 1;
  }
  return 0;
}

/* Another member: the segment the creator published in store. */
static int join(jx_shm_group *g, jx_kv *store, const char *key, double timeout_s, char *msg,
                size_t cap) {
  void *v = NULL;
  size_t len = 0;
  if (jx_kv_get(store, key, timeout_s, &v, &len, msg, cap)) return 1;
  char name[128];
  snprintf(name, sizeof name, "%.*s", (int)len, (const char *)v);
  free(v);
  int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    snprintf(msg, cap,
             "cannot open the shared memory segment %s of process %d: %s (do the processes that "
             "say they share a host see one /dev/shm?)",
             name, g->procs[0], strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  char *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(msg, cap, "cannot map the shared memory segment %s: %s", name, strerror(errno));
    return 1;
  }
  attach(g, base, (size_t)st.st_size);
  if (__atomic_load_n(&g->h->magic, __ATOMIC_ACQUIRE) != MAGIC || g->h->members != g->m ||
      g->h->slot != g->slot) {
    snprintf(msg, cap, "the shared memory segment %s is not this group's", name);
    return 1;
  }
  return 0;
}

jx_shm_group *jx_shm_group_open(int me, int m, const int *procs, const char *label, jx_kv *store,
                                const char *key, double timeout_s, char *msg, size_t cap) {
  jx_shm_group *g = group_new(me, m, procs, label);
  if (!g) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  if (m == 1) return g;
  allow_reading();
  if (*bad_setting) {
    snprintf(msg, cap, "%s", bad_setting);
    jx_shm_group_close(g);
    return NULL;
  }
  char name[128] = "";
  if (me == 0 ? create(g, store, key, name, sizeof name, msg, cap)
              : join(g, store, key, timeout_s, msg, cap)) {
    jx_shm_group_close(g);
    return NULL;
  }
  g->line[me].pid = (int32_t)getpid();
  g->line[me].probe_at = (uint64_t)(uintptr_t)&probe_word;
  __atomic_add_fetch(&g->h->mapped, 1, __ATOMIC_ACQ_REL);
  if (me != 0) return g;
  /* the name goes once every member holds the mapping */
  int64_t end = jx_now_ns() + (int64_t)(timeout_s * 1e9);
  while (__atomic_load_n(&g->h->mapped, __ATOMIC_ACQUIRE) < m && jx_now_ns() < end &&
         !__atomic_load_n(&interrupted, __ATOMIC_ACQUIRE))
    nap(100000);
  shm_unlink(name);
  int mapped = __atomic_load_n(&g->h->mapped, __ATOMIC_ACQUIRE);
  if (mapped < m) {
    snprintf(msg, cap,
             "only %d of the %d processes of this host in %s mapped its shared memory "
             "within %g s",
             mapped, m, label, timeout_s);
    jx_shm_group_close(g);
    return NULL;
  }
  return g;
}

/* ---- waiting for the members ---- */

typedef struct {
  const jx_shm_group *g;
  uint64_t step;
} arrival;

static int all_arrived(const void *arg) {
  const arrival *a = arg;
  for (int q = 0; q < a->g->m; q++)
    if (__atomic_load_n(&a->g->line[q].flag, __ATOMIC_ACQUIRE) < a->step) return 0;
  return 1;
}

/* A member that a wait lacks and that runs on this CPU (polling would only
 * keep it from running): its index, or -1. */
static int sharing_my_cpu(const arrival *a, int cpu) {
  for (int q = 0; q < a->g->m; q++)
    if (__atomic_load_n(&a->g->line[q].flag, __ATOMIC_RELAXED) < a->step &&
        __atomic_load_n(&a->g->line[q].cpu, __ATOMIC_RELAXED) == cpu + 1)
      return q;
  return -1;
}

/* Two members on one CPU wait for each other's turn at every step (a few
 * microseconds each, more on a busy machine): the scheduler keeps them
 * together, as they never both want a CPU at once. When the group has no
 * more members than the machine has CPUs, the lower of the two moves this
 * thread off its CPU (its affinity without this CPU, then its affinity as
 * it was: no lasting binding), at most every MOVE_NS in a process. MPI's
 * processes, which never stop polling, get the same from the scheduler.
 * Returns the CPU it runs on now. */
static int move_off(const jx_shm_group *g, int cpu) {
  static int64_t moved_at;
  int64_t now = jx_now_ns();
  if (g->m > jx_cpu_count() || now - __atomic_load_n(&moved_at, __ATOMIC_RELAXED) < MOVE_NS)
    return cpu;
  __atomic_store_n(&moved_at, now, __ATOMIC_RELAXED);
  cpu_set_t was, others;
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof was, &was)) return cpu;
  others = was;
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) && !sched_setaffinity(0, sizeof others, &others))
    sched_setaffinity(0, sizeof was, &was);
  return sched_getcpu();
}

/* Polls for the members while that can pay: while the group's recent waits
 * were short, for at most JX_SPIN_MAX_NS (spin.h), and not while a member
 * it waits for last ran on this CPU (it would only keep that one from
 * running). Unlike jx_spin_until it spins on a machine busy with other
 * work: what matters here is whether the members it waits for run on other
 * CPUs, and on a busy machine a process that stops polling is the one that
 * loses its CPU. 1 when they all arrived. */
static int spin(jx_shm_group *g, const arrival *a, int64_t t0) {
  if (all_arrived(a)) return 1;
  int64_t budget = __atomic_load_n(&g->site.typical_ns, __ATOMIC_RELAXED) < JX_SPIN_MAX_NS / 2
                       ? JX_SPIN_MAX_NS
                       : 0;
  int cpu = sched_getcpu();
  if (budget && sharing_my_cpu(a, cpu) > g->me) cpu = move_off(g, cpu);
  __atomic_store_n(&g->line[g->me].cpu, cpu + 1, __ATOMIC_RELAXED);
  if (!budget || sharing_my_cpu(a, cpu) >= 0) return 0;
  for (int s = 1;; s++) {
    jx_cpu_relax();
    if (all_arrived(a)) return 1;
    if (s % 16 == 0 && (jx_now_ns() - t0 > budget || sharing_my_cpu(a, cpu) >= 0)) return 0;
  }
}

/* The process has ended (or is a zombie nobody reaped yet); pid 0: a member
 * that has not mapped the segment yet (the deadline names it). */
static int ended(int pid) {
  if (pid <= 0) return 0;
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char *paren = strrchr(text, ')');
  return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static const char *kind_name(int k) {
  static const char *const n[] = {"all_reduce", "all_gather", "broadcast",
                                  "barrier",    "all_to_all", "reduce_scatter"};
  return k >= 0 && k <= JX_MPI_REDUCE_SCATTER ? n[k] : "?";
}

/* The members whose flag is short of step, as "process 3" / "processes 1, 3". */
static void missing(const jx_shm_group *g, uint64_t step, int only_ended, char *out, size_t cap) {
  int n = 0;
  size_t len = 0;
  out[0] = '\0';
  for (int q = 0; q < g->m; q++) {
    if (__atomic_load_n(&g->line[q].flag, __ATOMIC_ACQUIRE) >= step) continue;
    if (only_ended && !ended(g->line[q].pid)) continue;
    len +=
        (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%d", n ? ", " : "", g->procs[q]);
    n++;
  }
  if (n) {
    char list[256];
    snprintf(list, sizeof list, "%s", out);
    snprintf(out, cap, "%s %s", n == 1 ? "process" : "processes", list);
  }
}

/* A member gave up (a failed collective, or jx_shm_group_abort): 1 with its
 * reason in why. */
static int gave_up(const jx_shm_group *g, char *why, size_t cap) {
  int by = __atomic_load_n(&g->h->abort_by, __ATOMIC_ACQUIRE); /* -1: being written */
  if (by <= 0) return 0;
  if (g->h->found_here) /* what this member would find: its peer found it first */
    snprintf(why, cap, "%.*s (found by process %d)", 700, g->h->why, by - 1);
  else
    snprintf(why, cap, "process %d gave up: %.*s", by - 1, 700, g->h->why);
  return 1;
}

/* Waits until every member finished writing step: 0, or 1 with the reason
 * (without the collective's name) in why. */
static int wait_step(jx_shm_group *g, uint64_t step, double timeout_s, char *why, size_t cap) {
  arrival a = {g, step};
  int64_t t0 = jx_now_ns();
  if (spin(g, &a, t0)) {
    jx_spin_note(&g->site, jx_now_ns() - t0);
    return 0;
  }
  int64_t deadline = t0 + (int64_t)(timeout_s * 1e9), look = t0 + LIVENESS_NS, sleep_ns = 0;
  for (;;) {
    if (all_arrived(&a)) break;
    int64_t now = jx_now_ns();
    if (__atomic_load_n(&interrupted, __ATOMIC_ACQUIRE)) {
      pthread_mutex_lock(&interrupt_mu);
      snprintf(why, cap, "interrupted: %s", interrupt_why);
      pthread_mutex_unlock(&interrupt_mu);
      return 1;
    }
    if (gave_up(g, why, cap)) return 1;
    char who[300];
    if (now >= look) {
      look = now + LIVENESS_NS;
      missing(g, step, 1, who, sizeof who);
      if (*who) {
        snprintf(why, cap, "%s did not arrive within %g s (%s)", who, timeout_s,
                 strchr(who, ',') ? "they ended" : "it ended");
        return 1;
      }
    }
    if (now >= deadline) {
      missing(g, step, 0, who, sizeof who);
      snprintf(why, cap, "%s did not arrive within %g s", who, timeout_s);
      return 1;
    }
    if (now - t0 < YIELD_NS) {
      sched_yield();
    } else {
      sleep_ns = sleep_ns ? (sleep_ns * 2 < NAP_MAX_NS ? sleep_ns * 2 : NAP_MAX_NS) : NAP_MIN_NS;
      nap(sleep_ns);
    }
  }
  jx_spin_note(&g->site, jx_now_ns() - t0);
  return 0;
}

/* ---- the steps ---- */

typedef struct {
  jx_shm_group *g;
  double timeout_s;
  char *why;
  size_t cap;
} run_ctx;

/* A new step: the buffer this member writes its part of it into. */
static char *begin(jx_shm_group *g) {
  g->step++;
  return g->data + (size_t)(g->step % 2) * (size_t)g->m * g->slot;
}
static char *slot_of(jx_shm_group *g, char *buf, int q) { return buf + (size_t)q * g->slot; }

/* This member's part of the step is written; returns once every member's is. */
static int arrive(run_ctx *k) {
  __atomic_store_n(&k->g->line[k->g->me].flag, k->g->step, __ATOMIC_RELEASE);
  return wait_step(k->g, k->g->step, k->timeout_s, k->why, k->cap);
}

/* [lo, hi): member q's slice of a chunk of n elements cut in slices of `slice` */
static void slice_of(size_t n, size_t slice, int q, size_t *lo, size_t *hi) {
  *lo = (size_t)q * slice < n ? (size_t)q * slice : n;
  *hi = *lo + slice < n ? *lo + slice : n;
}

/* recv = send reduced over the members (count elements of dt), a slot's
 * worth at a time: each member copies its chunk into its slot. Up to
 * ONE_STEP_BYTES (of all members' buffers together, which each member then
 * reads) every member reduces the whole chunk (one step). Above, each
 * member reduces its slice of the chunk into its slot of the next step, and
 * every member copies all slices out: each element is reduced once. (Taking
 * a member's own operand from its buffer and writing its slice straight to
 * its result as well measured up to 3x slower.) */
static int all_reduce(run_ctx *k, int dt, int op, const char *send, char *recv, size_t count) {
  jx_shm_group *g = k->g;
  size_t es = jx_dtype_size((jx_dtype)dt), per_slot = g->slot / es;
  int one_step = count * es * (size_t)g->m <= ONE_STEP_BYTES;
  const char **srcs = g->srcs;
  for (size_t at = 0; at < count; at += per_slot) {
    size_t n = count - at < per_slot ? count - at : per_slot;
    char *buf = begin(g);
    jx_comm_copy(slot_of(g, buf, g->me), send + at * es, n * es, 0);
    if (arrive(k)) return 1;
    for (int q = 0; q < g->m; q++) srcs[q] = slot_of(g, buf, q);
    char *dst = recv + at * es;
    if (one_step) {
      jx_comm_reduce_range((jx_dtype)dt, (jx_reduce_op)op, srcs, g->m, &dst, 1, n, 0);
      continue;
    }
    size_t slice = round_up((n + (size_t)g->m - 1) / (size_t)g->m, 64 / es), lo, hi;
    slice_of(n, slice, g->me, &lo, &hi);
    for (int q = 0; q < g->m; q++) srcs[q] += lo * es;
    char *next = begin(g);
    char *mine = slot_of(g, next, g->me);
    if (hi > lo)
      jx_comm_reduce_range((jx_dtype)dt, (jx_reduce_op)op, srcs, g->m, &mine, 1, hi - lo, 0);
    if (arrive(k)) return 1;
    for (int q = 0; q < g->m; q++) {
      size_t ql, qh;
      slice_of(n, slice, q, &ql, &qh);
      if (qh > ql) jx_comm_copy(dst + ql * es, slot_of(g, next, q), (qh - ql) * es, 0);
    }
  }
  return 0;
}

/* Member me gets its block (rcounts[me] elements, blocks in member order) of
 * the reduction of every member's buffer; it reduces just that block, so
 * the members share the work and each element is reduced in member order. */
static int reduce_scatter(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  size_t es = jx_dtype_size((jx_dtype)op->dtype), per_slot = g->slot / es, total = 0, first = 0;
  for (int q = 0; q < g->m; q++) {
    if (q == g->me) first = total;
    total += (size_t)op->rcounts[q];
  }
  size_t last = first + (size_t)op->rcounts[g->me];
  const char *send = op->send ? op->send : op->recv;
  char *recv = op->recv;
  const char **srcs = g->srcs;
  for (size_t at = 0; at < total; at += per_slot) {
    size_t n = total - at < per_slot ? total - at : per_slot;
    char *buf = begin(g);
    jx_comm_copy(slot_of(g, buf, g->me), send + at * es, n * es, 0);
    if (arrive(k)) return 1;
    size_t lo = first > at ? first : at, hi = last < at + n ? last : at + n;
    if (hi <= lo) continue;
    for (int q = 0; q < g->m; q++) srcs[q] = slot_of(g, buf, q) + (lo - at) * es;
    /* in place, the block lands at the buffer's start: below what is copied in already */
    char *dst = recv + (lo - first) * es;
    jx_comm_reduce_range((jx_dtype)op->dtype, (jx_reduce_op)op->op, srcs, g->m, &dst, 1, hi - lo,
                         0);
  }
  return 0;
}

/* The members' pieces, packed in member order, stream through the whole
 * buffer of each step; each member copies every piece to its place. */
static int all_gather(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  size_t B = (size_t)g->m * g->slot, total = 0, at_me = 0;
  for (int q = 0; q < g->m; q++) {
    if (q == g->me) at_me = total;
    total += (size_t)op->rcounts[q];
  }
  size_t mine = (size_t)op->rcounts[g->me];
  const char *src = op->send ? op->send : (const char *)op->recv + op->rdispls[g->me];
  char *recv = op->recv;
  for (size_t a = 0; a < total; a += B) {
    size_t end = total - a < B ? total : a + B;
    char *buf = begin(g);
    size_t lo = at_me > a ? at_me : a, hi = at_me + mine < end ? at_me + mine : end;
    if (hi > lo) jx_comm_copy(buf + (lo - a), src + (lo - at_me), hi - lo, 0);
    if (arrive(k)) return 1;
    size_t start = 0;
    for (int q = 0; q < g->m; start += (size_t)op->rcounts[q++]) {
      if (q == g->me && !op->send) continue; /* in place: already there */
      size_t ql = start > a ? start : a;
      size_t qh = start + (size_t)op->rcounts[q] < end ? start + (size_t)op->rcounts[q] : end;
      if (qh > ql) jx_comm_copy(recv + op->rdispls[q] + (ql - start), buf + (ql - a), qh - ql, 0);
    }
  }
  return 0;
}

static int broadcast(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  size_t B = (size_t)g->m * g->slot;
  char *data = op->recv;
  for (size_t a = 0; a < op->count; a += B) {
    size_t n = op->count - a < B ? op->count - a : B;
    char *buf = begin(g);
    if (g->me == op->root) jx_comm_copy(buf, data + a, n, 0);
    if (arrive(k)) return 1;
    if (g->me != op->root) jx_comm_copy(data + a, buf, n, 0);
  }
  return 0;
}

static int all_to_all_direct(run_ctx *k, const jx_mpi_op *op, char *said);

/* Each ordered pair of members has a mailbox of a slot's m-th part per
 * step. First the members agree on the steps: each says in its slot the
 * longest piece it sends and, where single copy may apply, where its
 * pieces lie in its send buffer (its displacements), and in its line how
 * much it sends in all; from JX_SHM_SINGLE_COPY bytes sent by one member
 * the pieces are read from the senders' buffers instead. */
static int all_to_all(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  uint64_t longest = 0, sent = 0;
  for (int q = 0; q < g->m; q++) {
    if ((uint64_t)op->scounts[q] > longest) longest = (uint64_t)op->scounts[q];
    sent += (uint64_t)op->scounts[q];
  }
  int may_direct = g->direct > 0 && (size_t)(g->m + 1) * sizeof(uint64_t) <= g->slot;
  char *said = begin(g);
  uint64_t *mine = (uint64_t *)slot_of(g, said, g->me);
  mine[0] = longest;
  if (may_direct) {
    for (int q = 0; q < g->m; q++) mine[1 + q] = (uint64_t)op->sdispls[q];
    g->line[g->me].send_at = (uint64_t)(uintptr_t)op->send;
  }
  g->line[g->me].value[g->step % 2] = sent;
  if (arrive(k)) return 1;
  uint64_t most = 0;
  for (int q = 0; q < g->m; q++) {
    uint64_t l = *(const uint64_t *)slot_of(g, said, q), s = g->line[q].value[g->step % 2];
    if (l > longest) longest = l;
    if (s > most) most = s;
  }
  if (may_direct && most >= (uint64_t)g->direct) return all_to_all_direct(k, op, said);
  size_t box = g->slot / (size_t)g->m / 64 * 64;
  for (size_t a = 0; a < longest; a += box) {
    char *buf = begin(g);
    for (int q = 0; q < g->m; q++) {
      size_t n = (size_t)op->scounts[q] > a ? (size_t)op->scounts[q] - a : 0;
      if (n > box) n = box;
      if (n)
        jx_comm_copy(slot_of(g, buf, g->me) + (size_t)q * box,
                     (const char *)op->send + op->sdispls[q] + a, n, 0);
    }
    if (arrive(k)) return 1;
    for (int q = 0; q < g->m; q++) {
      size_t n = (size_t)op->rcounts[q] > a ? (size_t)op->rcounts[q] - a : 0;
      if (n > box) n = box;
      if (n)
        jx_comm_copy((char *)op->recv + op->rdispls[q] + a,
                     slot_of(g, buf, q) + (size_t)g->me * box, n, 0);
    }
  }
  return 0;
}

/* ---- single copy: the members read each other's buffers ----
 *
 * From JX_SHM_SINGLE_COPY bytes on the members publish the addresses of
 * their buffers in a step, read what they need straight from their peers'
 * processes (process_vm_readv) and meet again before any returns, so no
 * buffer changes while a peer reads it: each byte is copied once, where
 * the segment has it copied in and out. Below 16 MiB the segment measured
 * faster: its slots stay in the cache, and the kernel's copy is slower than
 * jx_comm_copy on some CPUs. */

static int logged_copying; /* this process said once why it copies through the segment */

/* The members agree, once per group (at its first collective that has a
 * single copy path), whether and from what size they read each other's
 * memory: each reads every peer's probe word; single copy when all could,
 * from the largest of their JX_SHM_SINGLE_COPY sizes. */
static int agree_direct(run_ctx *k) {
  jx_shm_group *g = k->g;
  begin(g);
  if (arrive(k)) return 1; /* every member has mapped the segment and said where its probe is */
  char why[400];
  snprintf(why, sizeof why, "%s", local_why);
  for (int q = 0; q < g->m && !*why; q++) {
    uint64_t word = 0;
    struct iovec to = {&word, sizeof word},
                 from = {(void *)(uintptr_t)g->line[q].probe_at, sizeof word};
    if (q == g->me) continue;
    errno = 0;
    if (process_vm_readv(g->line[q].pid, &to, 1, &from, 1, 0) != (ssize_t)sizeof word)
      snprintf(why, sizeof why, "reading the memory of process %d (process_vm_readv): %s%s",
               g->procs[q], strerror(errno),
               errno == EPERM ? " (a container without CAP_SYS_PTRACE, or a seccomp filter)" : "");
    else if (word != MAGIC)
      snprintf(why, sizeof why, "the memory of process %d read back wrong", g->procs[q]);
  }
  begin(g);
  g->line[g->me].value[g->step % 2] = *why ? 0 : (uint64_t)local_from;
  if (arrive(k)) return 1;
  g->direct = 0;
  for (int q = 0; q < g->m; q++) {
    int64_t from = (int64_t)g->line[q].value[g->step % 2];
    if (!from) {
      g->direct = 0;
      break;
    }
    if (from > g->direct) g->direct = from;
  }
  /* the setting is no news; a refusal is, once, by the member refused */
  if (*why && (local_refusal || !*local_why) &&
      !__atomic_exchange_n(&logged_copying, 1, __ATOMIC_RELAXED)) {
    fprintf(stderr,
            "jx: process %d: large collectives in shared memory copy through the segment (no "
            "single copy): %s\n",
            g->procs[g->me], why);
  }
  return 0;
}

/* n bytes at address `from` of member q's process into to. */
static int read_peer(jx_shm_group *g, int q, uint64_t from, char *to, size_t n, char *why,
                     size_t cap) {
  while (n) {
    struct iovec mine = {to, n}, theirs = {(void *)(uintptr_t)from, n};
    ssize_t got = process_vm_readv(g->line[q].pid, &mine, 1, &theirs, 1, 0);
    if (got > 0) {
      to += got, from += (uint64_t)got, n -= (size_t)got;
      continue;
    }
    int e = got < 0 ? errno : EIO;
    if (e == EINTR) continue;
    if (gave_up(g, why, cap)) return 1; /* its buffers may be gone: its reason says why */
    if (e == ESRCH || ended(g->line[q].pid))
      snprintf(why, cap, "process %d ended (while this process read its buffer)", g->procs[q]);
    else
      snprintf(why, cap, "cannot read the buffer of process %d (process_vm_readv): %s", g->procs[q],
               strerror(e));
    return 1;
  }
  return 0;
}

static void publish(jx_shm_group *g, const void *send, const void *recv) {
  begin(g);
  g->line[g->me].send_at = (uint64_t)(uintptr_t)send;
  g->line[g->me].recv_at = (uint64_t)(uintptr_t)recv;
}

/* recv[lo, hi) (count elements of dt) = the members' send[lo, hi) reduced in
 * member order; this member's operand is its own send, its peers' are read a
 * chunk at a time (kept in the cache for the reduction). out: where the
 * result goes (recv + lo, or elsewhere). */
static int reduce_read(run_ctx *k, int dt, int op, const char *send, size_t lo, size_t hi,
                       char *out) {
  jx_shm_group *g = k->g;
  size_t es = jx_dtype_size((jx_dtype)dt), per = READ_CHUNK_BYTES / es;
  if (!g->scratch && !(g->scratch = malloc((size_t)g->m * READ_CHUNK_BYTES))) {
    snprintf(k->why, k->cap, "out of memory");
    return 1;
  }
  const char **srcs = g->srcs;
  for (size_t at = lo; at < hi; at += per) {
    size_t n = hi - at < per ? hi - at : per;
    for (int q = 0; q < g->m; q++) {
      char *mine = g->scratch + (size_t)q * READ_CHUNK_BYTES;
      if (q == g->me)
        srcs[q] = send + at * es;
      else if (read_peer(g, q, g->line[q].send_at + at * es, mine, n * es, k->why, k->cap))
        return 1;
      else
        srcs[q] = mine;
    }
    char *dst = out + (at - lo) * es;
    jx_comm_reduce_range((jx_dtype)dt, (jx_reduce_op)op, srcs, g->m, &dst, 1, n, 0);
  }
  return 0;
}

/* all_reduce, a step's worth of the buffer (the copy path's chunk) at a
 * time: member q reduces slice q of the chunk into its recv; after the step
 * every member reads the other slices from their owners' recv into its own.
 * Each element is reduced once, in member order, as in the copy path: the
 * same bits. In place is fine: a member writes only its slices, which no
 * peer reads before the step after. Steps of a chunk keep the members in
 * step (short waits that poll) where steps of the whole buffer would make
 * the first to finish sleep. */
static int all_reduce_direct(run_ctx *k, int dt, int op, const char *send, char *recv,
                             size_t count) {
  jx_shm_group *g = k->g;
  size_t es = jx_dtype_size((jx_dtype)dt), per_step = (size_t)g->m * g->slot / es;
  publish(g, send, recv);
  if (arrive(k)) return 1;
  for (size_t at = 0; at < count; at += per_step) {
    size_t n = count - at < per_step ? count - at : per_step, lo, hi;
    size_t slice = round_up((n + (size_t)g->m - 1) / (size_t)g->m, 64 / es);
    slice_of(n, slice, g->me, &lo, &hi);
    if (reduce_read(k, dt, op, send, at + lo, at + hi, recv + (at + lo) * es)) return 1;
    begin(g);
    if (arrive(k)) return 1;
    for (int q = 0; q < g->m; q++) {
      size_t ql, qh;
      slice_of(n, slice, q, &ql, &qh);
      if (q != g->me && qh > ql &&
          read_peer(g, q, g->line[q].recv_at + (at + ql) * es, recv + (at + ql) * es,
                    (qh - ql) * es, k->why, k->cap))
        return 1;
    }
  }
  begin(g);
  return arrive(k); /* every member has read this one's recv */
}

/* reduce_scatter: each member reduces its block from every member's send.
 * In place the block is reduced where it lies in the buffer (no peer reads
 * it) and moves to the buffer's start once no peer reads the buffer. */
static int reduce_scatter_direct(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  size_t es = jx_dtype_size((jx_dtype)op->dtype), total = 0, first = 0;
  for (int q = 0; q < g->m; q++) {
    if (q == g->me) first = total;
    total += (size_t)op->rcounts[q];
  }
  size_t last = first + (size_t)op->rcounts[g->me];
  const char *send = op->send ? op->send : op->recv;
  char *out = op->send ? (char *)op->recv : (char *)op->recv + first * es;
  publish(g, send, op->recv);
  if (arrive(k) || reduce_read(k, op->dtype, op->op, send, first, last, out)) return 1;
  begin(g);
  if (arrive(k)) return 1;
  if (out != op->recv) memmove(op->recv, out, (last - first) * es);
  return 0;
}

/* all_gather: each member reads every peer's piece into its place (and
 * copies its own, unless in place). */
static int all_gather_direct(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  char *recv = op->recv;
  publish(g, op->send ? op->send : recv + op->rdispls[g->me], recv);
  if (op->send && op->rcounts[g->me])
    jx_comm_copy(recv + op->rdispls[g->me], op->send, (size_t)op->rcounts[g->me], 0);
  if (arrive(k)) return 1;
  for (int q = 0; q < g->m; q++)
    if (q != g->me && op->rcounts[q] &&
        read_peer(g, q, g->line[q].send_at, recv + op->rdispls[q], (size_t)op->rcounts[q], k->why,
                  k->cap))
      return 1;
  begin(g);
  return arrive(k);
}

/* all_to_all: each member reads its piece from every peer's send buffer,
 * where the peer's displacements (in its slot of the step said, which no
 * member writes again before the step after next) put it; peers in turn
 * from the member after this one, so that they do not all read one
 * process at once. */
static int all_to_all_direct(run_ctx *k, const jx_mpi_op *op, char *said) {
  jx_shm_group *g = k->g;
  char *recv = op->recv;
  if (op->rcounts[g->me])
    jx_comm_copy(recv + op->rdispls[g->me], (const char *)op->send + op->sdispls[g->me],
                 (size_t)op->rcounts[g->me], 0);
  for (int j = 1; j < g->m; j++) {
    int q = (g->me + j) % g->m;
    const uint64_t *theirs = (const uint64_t *)slot_of(g, said, q);
    if (op->rcounts[q] && read_peer(g, q, g->line[q].send_at + theirs[1 + g->me],
                                    recv + op->rdispls[q], (size_t)op->rcounts[q], k->why, k->cap))
      return 1;
  }
  begin(g);
  return arrive(k); /* every member has read this one's send */
}

/* broadcast: every member reads the root's buffer. */
static int broadcast_direct(run_ctx *k, const jx_mpi_op *op) {
  jx_shm_group *g = k->g;
  publish(g, op->recv, op->recv);
  if (arrive(k)) return 1;
  if (g->me != op->root &&
      read_peer(g, op->root, g->line[op->root].recv_at, op->recv, op->count, k->why, k->cap))
    return 1;
  begin(g);
  return arrive(k);
}

/* The bytes a collective would read from peers' buffers by single copy
 * (0: it has no single copy path); the same on every member. all_to_all:
 * 1 (its members agree on its size in its first step). */
static size_t direct_bytes(const jx_mpi_op *op, int m) {
  size_t es = jx_dtype_size((jx_dtype)op->dtype), total = 0;
  switch (op->kind) {
  case JX_MPI_ALLREDUCE: return op->count * es;
  case JX_MPI_REDUCE_SCATTER:
    for (int q = 0; q < m; q++) total += (size_t)op->rcounts[q];
    return total * es;
  case JX_MPI_ALLGATHERV:
    for (int q = 0; q < m; q++) total += (size_t)op->rcounts[q];
    return total;
  case JX_MPI_BCAST: return op->count;
  case JX_MPI_ALLTOALLV: return 1;
  default: return 0;
  }
}

/* The group of one member: copies. */
static void run_alone(const jx_mpi_op *op) {
  switch (op->kind) {
  case JX_MPI_ALLREDUCE:
    if (op->send != op->recv && op->count)
      memcpy(op->recv, op->send, op->count * jx_dtype_size((jx_dtype)op->dtype));
    return;
  case JX_MPI_REDUCE_SCATTER:
    if (op->send && op->rcounts[0])
      memcpy(op->recv, op->send, (size_t)op->rcounts[0] * jx_dtype_size((jx_dtype)op->dtype));
    return;
  case JX_MPI_ALLGATHERV:
    if (op->send && op->rcounts[0])
      memcpy((char *)op->recv + op->rdispls[0], op->send, (size_t)op->rcounts[0]);
    return;
  case JX_MPI_ALLTOALLV:
    if (op->scounts[0])
      memcpy((char *)op->recv + op->rdispls[0], (const char *)op->send + op->sdispls[0],
             (size_t)op->scounts[0]);
    return;
  default: return;
  }
}

static void members_text(const jx_shm_group *g, char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  for (int q = 0; q < g->m && len < cap; q++)
    len += (size_t)snprintf(out + len, cap - len, "%s%d", q ? "," : "", g->procs[q]);
}

/* The group breaks; the first member to give up tells the others why. */
static void give_up(jx_shm_group *g, const char *why, int found_here) {
  if (!g->broken) {
    g->broken = 1;
    snprintf(g->reason, sizeof g->reason, "%s", why);
  }
  if (g->m == 1) return;
  /* the first to give up says why; the others' waits read it after abort_by */
  int32_t expected = 0;
  if (__atomic_load_n(&g->h->abort_by, __ATOMIC_ACQUIRE) == 0) {
    char text[sizeof g->h->why];
    snprintf(text, sizeof text, "%s", why);
    if (__atomic_compare_exchange_n(&g->h->abort_by, &expected, -1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      memcpy(g->h->why, text, sizeof text);
      g->h->found_here = found_here;
      __atomic_store_n(&g->h->abort_by, g->procs[g->me] + 1, __ATOMIC_RELEASE);
    }
  }
}

int jx_shm_group_run(jx_shm_group *g, const jx_mpi_op *op, double timeout_s, char *msg,
                     size_t cap) {
  if (g->broken) {
    snprintf(msg, cap, "the shared memory communicator is unusable after an earlier failure: %s",
             g->reason);
    return 1;
  }
  int reduces = op->kind == JX_MPI_ALLREDUCE || op->kind == JX_MPI_REDUCE_SCATTER;
  if (reduces && (op->dtype == JX_F16 || op->dtype == JX_BF16 || !jx_dtype_size(op->dtype))) {
    snprintf(msg, cap, "%s: dtype %d cannot be reduced here", kind_name(op->kind), op->dtype);
    return 1;
  }
  if (g->m == 1) {
    run_alone(op);
    return 0;
  }
  char why[JX_MPI_MSG] = "";
  run_ctx k = {g, timeout_s, why, sizeof why};
  size_t bytes = direct_bytes(op, g->m);
  int st = bytes && g->direct < 0 ? agree_direct(&k) : 0;
  int direct = g->direct > 0 && bytes >= (size_t)g->direct;
  switch (st ? -1 : op->kind) {
  case -1: break; /* the members could not agree */
  case JX_MPI_ALLREDUCE:
    st = direct ? all_reduce_direct(&k, op->dtype, op->op, op->send, op->recv, op->count)
                : all_reduce(&k, op->dtype, op->op, op->send, op->recv, op->count);
    break;
  case JX_MPI_REDUCE_SCATTER:
    st = direct ? reduce_scatter_direct(&k, op) : reduce_scatter(&k, op);
    break;
  case JX_MPI_ALLGATHERV: st = direct ? all_gather_direct(&k, op) : all_gather(&k, op); break;
  case JX_MPI_BCAST: st = direct ? broadcast_direct(&k, op) : broadcast(&k, op); break;
  case JX_MPI_ALLTOALLV: st = all_to_all(&k, op); break;
  case JX_MPI_BARRIER:
    begin(g);
    st = arrive(&k);
    break;
  default: snprintf(msg, cap, "unknown collective %d", op->kind); return 1;
  }
  if (!st) return 0;
  char who[256];
  members_text(g, who, sizeof who);
  snprintf(msg, cap, "%s in shared memory among processes %s (%s): %s", kind_name(op->kind), who,
           g->label, why);
  give_up(g, why, 1);
  snprintf(g->reason, sizeof g->reason, "%s", msg);
  return 1;
}

void jx_shm_group_abort(jx_shm_group *g, const char *why) {
  if (g) give_up(g, why, 0);
}
