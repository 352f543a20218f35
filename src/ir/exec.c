/* The table of what is kept beside programs, and the thread's nested
 * executables. The table is hashed by the program's address, a lock per
 * bucket: a jx_call reads it once, and programs are released from any
 * thread. */
#include "exec.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "../base/error.h"

typedef struct kept {
  const jx_program *p;
  jx_exec exec;
  void *follow;
  void (*free_follow)(void *follow);
  struct kept *next;
} kept;

enum { BUCKETS = 256 };

static struct {
  pthread_mutex_t lock;
  kept *head;
} table[BUCKETS];

static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static void table_init(void) {
  for (int b = 0; b < BUCKETS; b++) pthread_mutex_init(&table[b].lock, NULL);
}

static unsigned bucket_of(const jx_program *p) {
  uintptr_t h = (uintptr_t)p >> 4;
  h ^= h >> 9;
  return (unsigned)(h % BUCKETS);
}

/* p's entry in bucket b (its lock held), made when make is set; NULL when
 * there is none (or memory ran out making it). */
static kept *entry(unsigned b, const jx_program *p, int make) {
  for (kept *k = table[b].head; k; k = k->next)
    if (k->p == p) return k;
  if (!make) return NULL;
  kept *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->p = p;
  k->next = table[b].head;
  table[b].head = k;
  return k;
}

void jx_program_attach(const jx_program *p, jx_exec x) {
  pthread_once(&table_once, table_init);
  unsigned b = bucket_of(p);
  pthread_mutex_lock(&table[b].lock);
  kept *k = entry(b, p, 1);
  int taken = k && !k->exec.run;
  if (taken) k->exec = x;
  pthread_mutex_unlock(&table[b].lock);
  if (!k) jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory keeping its executable", p->name);
  if (!taken && x.free) x.free(x.impl); /* out of memory: p is interpreted */
}

static _Thread_local const jx_exec_nested *running_nested;

static jx_exec own_exec(const jx_program *p) {
  pthread_once(&table_once, table_init);
  unsigned b = bucket_of(p);
  pthread_mutex_lock(&table[b].lock);
  kept *k = entry(b, p, 0);
  jx_exec x = k ? k->exec : (jx_exec){0};
  pthread_mutex_unlock(&table[b].lock);
  return x;
}

jx_exec jx_program_exec(const jx_program *p) {
  if (running_nested) {
    jx_exec x = jx_exec_nested_find(running_nested, p);
    if (x.run) return x;
  }
  return own_exec(p);
}

void *jx_program_executable(const jx_program *p) { return own_exec(p).impl; }

void *jx_program_follow(const jx_program *p) {
  pthread_once(&table_once, table_init);
  unsigned b = bucket_of(p);
  pthread_mutex_lock(&table[b].lock);
  kept *k = entry(b, p, 0);
  void *f = k ? k->follow : NULL;
  pthread_mutex_unlock(&table[b].lock);
  return f;
}

void *jx_program_set_follow(const jx_program *p, void *follow, void (*free_follow)(void *)) {
  pthread_once(&table_once, table_init);
  unsigned b = bucket_of(p);
  pthread_mutex_lock(&table[b].lock);
  kept *k = entry(b, p, 1);
  void *kept_follow = k ? k->follow : NULL;
  if (k && !kept_follow) {
    k->follow = kept_follow = follow;
    k->free_follow = free_follow;
  }
  pthread_mutex_unlock(&table[b].lock);
  if (kept_follow != follow) free_follow(follow);
  if (!k) jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", p->name);
  return kept_follow;
}

void jx_program_exec_drop(const jx_program *p) {
  pthread_once(&table_once, table_init);
  unsigned b = bucket_of(p);
  pthread_mutex_lock(&table[b].lock);
  kept *found = NULL;
  for (kept **at = &table[b].head; *at; at = &(*at)->next)
    if ((*at)->p == p) {
      found = *at;
      *at = found->next;
      break;
    }
  pthread_mutex_unlock(&table[b].lock);
  if (!found) return;
  if (found->exec.free) found->exec.free(found->exec.impl);
  if (found->free_follow) found->free_follow(found->follow);
  free(found);
}

/* ---- nested executables ---- */
jx_status jx_exec_nested_add(jx_exec_nested *t, const jx_program *p, jx_exec x) {
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 4;
    const jx_program **prog = realloc(t->prog, sizeof *prog * (size_t)cap);
    if (prog) t->prog = prog;
    jx_exec *exec = prog ? realloc(t->exec, sizeof *exec * (size_t)cap) : NULL;
    if (!exec) {
      if (x.free) x.free(x.impl);
      return jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", p->name);
    }
    t->exec = exec;
    t->cap = cap;
  }
  t->prog[t->n] = p;
  t->exec[t->n++] = x;
  return JX_OK;
}

void jx_exec_nested_free(jx_exec_nested *t) {
  for (int i = 0; i < t->n; i++)
    if (t->exec[i].free) t->exec[i].free(t->exec[i].impl);
  free(t->prog);
  free(t->exec);
  *t = (jx_exec_nested){0};
}

jx_exec jx_exec_nested_find(const jx_exec_nested *t, const jx_program *p) {
  for (int i = 0; t && i < t->n; i++)
    if (t->prog[i] == p) return t->exec[i];
  return (jx_exec){0};
}

const jx_exec_nested *jx_exec_nested_enter(const jx_exec_nested *t) {
  const jx_exec_nested *old = running_nested;
  running_nested = t;
  return old;
}

void jx_exec_nested_leave(const jx_exec_nested *previous) { running_nested = previous; }
