/* Memory accounting (memstats.h). Counters are relaxed atomics: exact totals,
 * no ordering needed between devices. The list of live buffers exists only
 * while tracking is on, under one lock. */
#include "memstats.h"

#include "current_device.h"
#include "env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int_fast64_t live[JX_MEMSTATS_DEVICES], peak[JX_MEMSTATS_DEVICES],
    nbuf[JX_MEMSTATS_DEVICES], limit[JX_MEMSTATS_DEVICES];
static atomic_int tracking;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static jx_mem_rec *head;
static _Thread_local const char *current_op;
void (*volatile jx_memstats_counter_hook)(int device, int64_t live);

static void read_env(void) {
  if (jx_env_flag("JX_DEBUG_MEMORY")) atomic_fetch_add(&tracking, 1);
  const char *v = jx_env_string("JX_MEMORY_LIMIT_BYTES");
  if (v && *v) jx_memstats_set_limit(-1, strtoll(v, NULL, 10));
}

static int slot(int device) {
  if (device < 0) return 0; /* the host thread: arrays on the default device */
  return device < JX_MEMSTATS_DEVICES ? device : JX_MEMSTATS_DEVICES - 1;
}

int jx_memstats_on_alloc(jx_mem_rec *r, size_t bytes) {
  pthread_once(&env_once, read_env);
  int d = slot(jx_current_device());
  int64_t cap = atomic_load_explicit(&limit[d], memory_order_relaxed);
  int64_t now =
      atomic_fetch_add_explicit(&live[d], (int64_t)bytes, memory_order_relaxed) + (int64_t)bytes;
  if (cap > 0 && now > cap) {
    atomic_fetch_sub_explicit(&live[d], (int64_t)bytes, memory_order_relaxed);
    r->bytes = 0;
    r->listed = 0;
    return 1;
  }
  atomic_fetch_add_explicit(&nbuf[d], 1, memory_order_relaxed);
  int64_t p = atomic_load_explicit(&peak[d], memory_order_relaxed);
  while (now > p && !atomic_compare_exchange_weak_explicit(&peak[d], &p, now, memory_order_relaxed,
                                                           memory_order_relaxed)) {
  }
  r->device = d;
  r->bytes = bytes;
  r->creator = current_op;
  r->listed = 0;
  if (atomic_load_explicit(&tracking, memory_order_relaxed)) {
    pthread_mutex_lock(&list_lock);
    r->prev = NULL;
    r->next = head;
    if (head) head->prev = r;
    head = r;
    r->listed = 1;
    pthread_mutex_unlock(&list_lock);
  }
  void (*hook)(int, int64_t) = jx_memstats_counter_hook;
  if (hook) hook(d, now);
  return 0;
}

void jx_memstats_on_free(jx_mem_rec *r) {
  int d = r->device;
  int64_t now = atomic_fetch_sub_explicit(&live[d], (int64_t)r->bytes, memory_order_relaxed) -
                (int64_t)r->bytes;
  atomic_fetch_sub_explicit(&nbuf[d], 1, memory_order_relaxed);
  if (r->listed) {
    pthread_mutex_lock(&list_lock);
    if (r->prev)
      r->prev->next = r->next;
    else
      head = r->next;
    if (r->next) r->next->prev = r->prev;
    r->listed = 0;
    pthread_mutex_unlock(&list_lock);
  }
  void (*hook)(int, int64_t) = jx_memstats_counter_hook;
  if (hook) hook(d, now);
}

const char *jx_memstats_set_op(const char *op) {
  const char *old = current_op;
  current_op = op;
  return old;
}

void jx_memstats_track(int on) {
  pthread_once(&env_once, read_env);
  atomic_fetch_add(&tracking, on ? 1 : -1);
}

void jx_memstats_set_limit(int device, int64_t bytes) {
  for (int d = 0; d < JX_MEMSTATS_DEVICES; d++)
    if (device < 0 || d == slot(device)) atomic_store(&limit[d], bytes > 0 ? bytes : 0);
}

int64_t jx_memstats_live(int device) { return atomic_load(&live[slot(device)]); }
int64_t jx_memstats_peak(int device) { return atomic_load(&peak[slot(device)]); }
int64_t jx_memstats_buffers(int device) { return atomic_load(&nbuf[slot(device)]); }

void jx_memstats_reset_peak(int device) {
  for (int d = 0; d < JX_MEMSTATS_DEVICES; d++)
    if (device < 0 || d == slot(device)) atomic_store(&peak[d], atomic_load(&live[d]));
}

static void human(char *out, size_t cap, size_t b) {
  if (b >= (1u << 30))
    snprintf(out, cap, "%.1f GiB", (double)b / (1u << 30));
  else if (b >= (1u << 20))
    snprintf(out, cap, "%.1f MiB", (double)b / (1u << 20));
  else if (b >= 1024)
    snprintf(out, cap, "%.1f KiB", (double)b / 1024);
  else
    snprintf(out, cap, "%zu B", b);
}

void jx_memstats_describe_largest(char *buf, size_t cap, int n) {
  enum { MAX = 16 };
  const jx_mem_rec *top[MAX];
  jx_mem_rec copy[MAX];
  int k = 0;
  if (n > MAX) n = MAX;
  pthread_mutex_lock(&list_lock);
  for (const jx_mem_rec *r = head; r; r = r->next) {
    int at;
    if (k < n)
      at = k++;
    else if (n > 0 && r->bytes > top[n - 1]->bytes)
      at = n - 1;
    else
      continue;
    while (at > 0 && top[at - 1]->bytes < r->bytes) {
      top[at] = top[at - 1];
      at--;
    }
    top[at] = r;
  }
  for (int i = 0; i < k; i++) copy[i] = *top[i]; /* the records may go once unlocked */
  pthread_mutex_unlock(&list_lock);
  if (!k) return;
  size_t len = strlen(buf);
  len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "; largest live buffers:");
  for (int i = 0; i < k && len < cap; i++) {
    char h[32];
    human(h, sizeof h, copy[i].bytes);
    len += (size_t)snprintf(buf + len, cap - len, "%s %s by %s on device %d", i ? "," : "", h,
                            copy[i].creator ? copy[i].creator : "?", copy[i].device);
  }
}
