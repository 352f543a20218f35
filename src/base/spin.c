#include "spin.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cpu_features.h"
#include "threadpool.h"

enum { CHECK_EVERY = 16 }; /* polls between looks at the clock and the pool */

int64_t jx_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

enum { ROOM_CHECK_NS = 10000000 }; /* how often the machine's load is read */

/* Under load from other processes a spinning thread only burns its share
 * of a core while the thread it waits for queues for one, and it loses the
 * priority that the scheduler gives threads that sleep: blocked calls then
 * took several times longer with spinning than without. A process under a
 * realtime policy (chrt -f or -r) preempts the others' threads, so their
 * load takes none of its cores: it keeps the room (benchmarks measure on a
 * shared machine that way, bench/compare.py --realtime). */
int jx_machine_has_room(int cpus) {
  static int64_t checked_at;
  static int room = 1;
  int64_t now = jx_now_ns();
  if (now - __atomic_load_n(&checked_at, __ATOMIC_RELAXED) < ROOM_CHECK_NS)
    return __atomic_load_n(&room, __ATOMIC_RELAXED);
  __atomic_store_n(&checked_at, now, __ATOMIC_RELAXED);
  int policy = sched_getscheduler(0);
  int r = 1, fd = policy == SCHED_FIFO || policy == SCHED_RR
                      ? -1
                      : open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char text[128];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    long runnable;
    if (n > 0) {
      text[n] = '\0';
      if (sscanf(text, "%*s %*s %*s %ld/", &runnable) == 1) r = runnable <= cpus;
    }
  }
  __atomic_store_n(&room, r, __ATOMIC_RELAXED);
  return r;
}

/* 1 when a spinning thread would not take a core that work needs. */
static int spin_is_free(void) {
  int n = jx_cpu_count();
  return n > 1 && jx_pool_busy_threads() < n && jx_machine_has_room(n);
}

/* The whole spin while the typical wait is under half of it (most waits
 * then end inside it, and the few longer ones cost one spin each); none
 * when it is longer (most waits would outlast the spin). */
static int64_t budget(const jx_spin_site *site) {
  return __atomic_load_n(&site->typical_ns, __ATOMIC_RELAXED) < JX_SPIN_MAX_NS / 2 ? JX_SPIN_MAX_NS
                                                                                   : 0;
}

int jx_spin_until(jx_spin_site *site, int (*ready)(const void *arg), const void *arg) {
  if (ready(arg)) return 1;
  int64_t ns = budget(site);
  if (!ns || !spin_is_free()) return 0;
  int64_t until = jx_now_ns() + ns;
  for (int s = 1;; s++) {
    jx_cpu_relax();
    if (ready(arg)) return 1;
    if (s % CHECK_EVERY == 0 && (jx_now_ns() > until || !spin_is_free())) return 0;
  }
}

void jx_spin_note(jx_spin_site *site, int64_t waited_ns) {
  if (waited_ns < 0) waited_ns = 0;
  if (waited_ns > 2 * JX_SPIN_MAX_NS) waited_ns = 2 * JX_SPIN_MAX_NS;
  /* a lost update between racing waiters only drops one sample */
  int64_t t = __atomic_load_n(&site->typical_ns, __ATOMIC_RELAXED);
  __atomic_store_n(&site->typical_ns, t + (waited_ns - t) / 4, __ATOMIC_RELAXED);
}
