/* Interned integer lists: parameters too long for a primitive's list slots
 * (ppermute's pairs, shard_map's per-input shardings) are stored once and
 * named by number, so equal parameters stay bytewise equal. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "collective.h"

typedef struct {
  int n;
  int64_t *v;
} ints;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ints *table; /* table[id - 1] */
static int ntable, cap_table;

int jx_intern_ints(const int64_t *v, int n) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < ntable; i++)
    if (table[i].n == n && (n == 0 || memcmp(table[i].v, v, sizeof *v * (size_t)n) == 0)) {
      pthread_mutex_unlock(&lock);
      return i + 1;
    }
  if (ntable == cap_table) {
    int cap = cap_table ? 2 * cap_table : 16;
    ints *t = realloc(table, sizeof *t * (size_t)cap);
    if (t) {
      table = t;
      cap_table = cap;
    }
  }
  int64_t *copy = malloc(sizeof *copy * (size_t)(n + 1));
  if (!copy || ntable == cap_table) {
    free(copy);
    pthread_mutex_unlock(&lock);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory storing a parameter list");
    return 0;
  }
  if (n) memcpy(copy, v, sizeof *v * (size_t)n);
  table[ntable] = (ints){n, copy};
  int id = ++ntable;
  pthread_mutex_unlock(&lock);
  return id;
}

const int64_t *jx_interned_ints(int id, int *n) {
  pthread_mutex_lock(&lock);
  const int64_t *v = NULL;
  *n = 0;
  if (id >= 1 && id <= ntable) {
    v = table[id - 1].v;
    *n = table[id - 1].n;
  }
  pthread_mutex_unlock(&lock);
  return v;
}
