/* Batch loaders: a producer thread makes batches ahead (rows gathered on
 * the host in the epoch's shuffled order, then laid out on the devices) into
 * a small ring the train loop takes from. When the sharding's mesh spans
 * processes, each process gathers only the part of the batch its devices
 * hold (every process computes the same order from the seed) and the global
 * batch is assembled with jx_array_from_process_local: no process builds
 * the whole batch. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "process_box.h"

enum { MAX_PREFETCH = 16 };

typedef struct {
  int64_t position;
  jx_array *arrays[JX_DATASET_MAX_ARRAYS]; /* owned references */
  jx_status status;
  char *message;
} slot;

struct jx_loader {
  jx_dataset *data;
  jx_loader_options opt;
  int64_t per_epoch;
  /* host copies of the examples, for row gathers without a device op */
  unsigned char *host[JX_DATASET_MAX_ARRAYS];
  size_t row_bytes[JX_DATASET_MAX_ARRAYS];
  int32_t *perm; /* the order of perm_epoch */
  /* split: the mesh spans processes; this process builds the box
   * [lo, hi) of each batch array (dim 0: rows of the batch) */
  int split;
  int64_t lo[JX_DATASET_MAX_ARRAYS][JX_MAX_RANK], hi[JX_DATASET_MAX_ARRAYS][JX_MAX_RANK];
  int64_t perm_epoch;

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  slot ring[MAX_PREFETCH];
  int head, count, cap;
  int64_t next_make, next_take; /* positions */
  uint64_t generation;          /* bumped by seek: batches made before are dropped */
  int stop;
};

/* The example order of epoch e: a permutation from the PRNG, as
 * jax.random.permutation(fold_in(key(seed), e), n). */
static jx_status order_for(jx_loader *l, int64_t epoch) {
  if (l->perm_epoch == epoch) return JX_OK;
  int64_t n = l->data->len;
  if (!l->opt.shuffle) {
    for (int64_t i = 0; i < n; i++) l->perm[i] = (int32_t)i;
  } else {
    jx_scope_begin();
    jx_array *key = jx_random_fold_in(jx_random_key(l->opt.seed), (uint32_t)epoch);
    jx_status st = jx_read(jx_random_permutation(key, n), l->perm, sizeof *l->perm * (size_t)n);
    jx_scope_end();
    if (st) return st;
  }
  l->perm_epoch = epoch;
  return JX_OK;
}

/* Array a of batch b: this process's box of it (all of it without split),
 * rows in the epoch's order; NULL when out of memory. */
static jx_array *local_part(jx_loader *l, int a, int64_t b) {
  jx_array *src = l->data->arrays[a];
  jx_shape g = jx_shape_of(src);
  g.dims[0] = l->opt.batch;
  int64_t r0 = l->split ? l->lo[a][0] : 0, r1 = l->split ? l->hi[a][0] : g.dims[0];
  size_t rb = l->row_bytes[a];
  unsigned char *buf = malloc(rb * (size_t)(r1 - r0) + 1);
  if (!buf) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_loader_next: out of memory");
    return NULL;
  }
  const int32_t *order = l->perm + b * l->opt.batch;
  for (int64_t i = r0; i < r1; i++)
    memcpy(buf + rb * (size_t)(i - r0), l->host[a] + rb * (size_t)order[i], rb);
  jx_shape rows = g;
  rows.dims[0] = r1 - r0;
  jx_array *x = jx_array_from(jx_dtype_of(src), rows, buf);
  free(buf);
  if (!l->split) return x;
  /* the box along the other dims, when the sharding splits them too */
  jx_shape start = JX_SHAPE(), stop = rows, step = JX_SHAPE();
  int whole = 1;
  start.rank = step.rank = g.rank;
  for (int d = 0; d < g.rank; d++) {
    start.dims[d] = d ? l->lo[a][d] : 0;
    stop.dims[d] = d ? l->hi[a][d] : rows.dims[0];
    step.dims[d] = 1;
    whole &= start.dims[d] == 0 && stop.dims[d] == rows.dims[d];
  }
  return whole ? x : jx_slice(x, start, stop, step);
}

static void make_batch(jx_loader *l, int64_t position, slot *s) {
  memset(s, 0, sizeof *s);
  s->position = position;
  int64_t epoch = position / l->per_epoch, b = position % l->per_epoch;
  jx_status st = order_for(l, epoch);
  jx_scope_begin();
  for (int a = 0; a < l->data->n && !st; a++) {
    jx_array *x = local_part(l, a, b);
    if (!x) {
      st = JX_ERR_OUT_OF_MEMORY;
      break;
    }
    if (l->split) {
      jx_shape g = jx_shape_of(l->data->arrays[a]);
      g.dims[0] = l->opt.batch;
      x = jx_array_from_process_local(l->opt.sharding, g, x);
    } else if (l->opt.sharding) {
      x = jx_device_put(x, l->opt.sharding);
    }
    if (jx_is_poisoned(x))
      st = jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
    else
      s->arrays[a] = jx_keep(x);
  }
  jx_scope_end();
  if (st) {
    s->status = st;
    s->message = strdup(jx_last_error());
    jx_clear_error();
    for (int a = 0; a < l->data->n; a++) jx_release(s->arrays[a]);
    memset(s->arrays, 0, sizeof s->arrays);
  }
}

static void slot_free(slot *s) {
  for (int a = 0; a < JX_DATASET_MAX_ARRAYS; a++) jx_release(s->arrays[a]);
  free(s->message);
  memset(s, 0, sizeof *s);
}

static void *producer(void *arg) {
  jx_loader *l = arg;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    if (l->count == l->cap) {
      pthread_cond_wait(&l->changed, &l->lock);
      continue;
    }
    int64_t pos = l->next_make++;
    uint64_t gen = l->generation;
    pthread_mutex_unlock(&l->lock);
    slot s;
    make_batch(l, pos, &s);
    pthread_mutex_lock(&l->lock);
    if (gen != l->generation || l->stop) { /* a seek happened meanwhile */
      slot_free(&s);
      continue;
    }
    l->ring[(l->head + l->count) % l->cap] = s;
    l->count++;
    pthread_cond_broadcast(&l->changed);
  }
  pthread_mutex_unlock(&l->lock);
  jx_thread_end(); /* this thread's scopes, not the process's dispatch thread */
  return NULL;
}

jx_loader *jx_loader_create(jx_dataset *d, const jx_loader_options *o) {
  const char *op = "jx_loader_create";
  if (!d || !o) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", op, d ? "options" : "dataset");
    return NULL;
  }
  if (o->batch < 1 || o->batch > d->len) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s: batch %lld does not fit a dataset of %lld examples", op,
                    (long long)o->batch, (long long)d->len);
    return NULL;
  }
  if (o->prefetch < 0 || o->prefetch > MAX_PREFETCH) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: prefetch %d is not in 0..%d", op, o->prefetch,
                    MAX_PREFETCH);
    return NULL;
  }
  if (o->sharding) /* checked now, not on the producer thread */
    for (int a = 0; a < d->n; a++) {
      jx_shape s = jx_shape_of(d->arrays[a]);
      s.dims[0] = o->batch;
      jx_shape local;
      if (jx_sharding_shard_shape(o->sharding, s, &local)) return NULL;
    }
  int split = o->sharding ? jx_io_sharding_spans_processes(o->sharding) : 0;
  if (split < 0) return NULL;
  jx_loader *l = calloc(1, sizeof *l);
  if (!l) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  l->split = split;
  for (int a = 0; a < d->n && split; a++) {
    jx_shape s = jx_shape_of(d->arrays[a]);
    s.dims[0] = o->batch;
    if (jx_io_process_box(o->sharding, s, l->lo[a], l->hi[a])) {
      free(l);
      return NULL;
    }
  }
  l->data = d;
  l->opt = *o;
  l->cap = o->prefetch ? o->prefetch : 2;
  l->per_epoch = d->len / o->batch;
  l->perm_epoch = -1;
  l->perm = malloc(sizeof *l->perm * (size_t)d->len);
  int ok = l->perm != NULL;
  for (int a = 0; a < d->n && ok; a++) {
    size_t bytes = (size_t)jx_size(d->arrays[a]) * jx_dtype_size(jx_dtype_of(d->arrays[a]));
    l->row_bytes[a] = bytes / (size_t)d->len;
    l->host[a] = malloc(bytes + 1);
    ok = l->host[a] && jx_read(d->arrays[a], l->host[a], bytes) == JX_OK;
  }
  pthread_mutex_init(&l->lock, NULL);
  pthread_cond_init(&l->changed, NULL);
  if (!ok || pthread_create(&l->thread, NULL, producer, l) != 0) {
    if (!jx_last_status()) jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    for (int a = 0; a < d->n; a++) free(l->host[a]);
    free(l->perm);
    free(l);
    return NULL;
  }
  return l;
}

jx_status jx_loader_next(jx_loader *l, jx_array **out) {
  if (!l || !out) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_loader_next: NULL argument");
  pthread_mutex_lock(&l->lock);
  while (l->count == 0) pthread_cond_wait(&l->changed, &l->lock);
  slot s = l->ring[l->head];
  l->head = (l->head + 1) % l->cap;
  l->count--;
  l->next_take = s.position + 1;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->lock);
  jx_status st = s.status;
  if (st) jx_report_error(st, "%s", s.message ? s.message : "jx_loader_next: a batch failed");
  for (int a = 0; a < l->data->n; a++) {
    out[a] = st ? NULL : jx_scope_own(s.arrays[a]);
    s.arrays[a] = NULL;
  }
  free(s.message);
  return st;
}

int64_t jx_loader_position(const jx_loader *l) { return l ? l->next_take : 0; }
int64_t jx_loader_batches_per_epoch(const jx_loader *l) { return l ? l->per_epoch : 0; }

int64_t jx_loader_local_rows(const jx_loader *l, int64_t *first) {
  if (first) *first = l && l->split ? l->lo[0][0] : 0;
  if (!l) return 0;
  return l->split ? l->hi[0][0] - l->lo[0][0] : l->opt.batch;
}

jx_status jx_loader_seek(jx_loader *l, int64_t position) {
  if (!l || position < 0)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_loader_seek: bad position %lld",
                           (long long)position);
  pthread_mutex_lock(&l->lock);
  while (l->count > 0) {
    slot_free(&l->ring[l->head]);
    l->head = (l->head + 1) % l->cap;
    l->count--;
  }
  l->generation++;
  l->next_make = l->next_take = position;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->lock);
  return JX_OK;
}

void jx_loader_release(jx_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->lock);
  l->stop = 1;
  pthread_cond_broadcast(&l->changed);
  pthread_mutex_unlock(&l->lock);
  pthread_join(l->thread, NULL);
  while (l->count > 0) {
    slot_free(&l->ring[l->head]);
    l->head = (l->head + 1) % l->cap;
    l->count--;
  }
  for (int a = 0; a < l->data->n; a++) free(l->host[a]);
  free(l->perm);
  pthread_mutex_destroy(&l->lock);
  pthread_cond_destroy(&l->changed);
  free(l);
}
