/* Arrays: allocation, reference counting, inspection and host reads. */
#include "array.h"

#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/memstats.h"

static jx_array poison_value = {.refs = 1, .dtype = JX_F32, .poisoned = 1};

/* Every array of a program's life has this header: keep it from growing
 * unnoticed (a shape of JX_MAX_RANK dims is 72 of its bytes). */
_Static_assert(sizeof(jx_array) <= 128, "jx_array grew");

jx_array *jx_poison(void) { return &poison_value; }

/* ---- buffer cache ----
 * Freed buffers of 256 B to 64 MiB are kept, by size class, for the next
 * allocation of that class: loops that allocate the same shapes every
 * iteration then reuse memory that is already mapped and faulted in rather
 * than paying the kernel for fresh pages (a 64 MiB result costs ~16k page
 * faults), and small buffers skip glibc's aligned allocation, which from
 * about 1 KiB up takes its large-request path and consolidates its fast
 * bins on every call (a scan's per-step f32[8,64] results). Classes are
 * quarter steps between powers of two (at most 25% slack); a class keeps
 * at most JX_BUFFER_CLASS_KEEP buffers and the cache at most CACHE_LIMIT
 * bytes. Smaller buffers are left to malloc, whose own caches serve them
 * well; larger ones are returned at once. The cache is
 * one for the process, behind a lock taken once per cached allocation or
 * release: buffers often die on another thread than the one that needs
 * the next of their size (the caller releases last step's parameters, the
 * dispatch thread allocates this step's; device threads hand shards on).
 * jx_shutdown frees it. Under AddressSanitizer cached memory is poisoned,
 * so a use after release is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#define JX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JX_ASAN 1
#endif
#endif
#ifdef JX_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

enum {
  MIN_SHIFT = 8,                            /* cached sizes: (256 B, */
  MAX_SHIFT = 26,                           /*                64 MiB] */
  NCLASS = (MAX_SHIFT - MIN_SHIFT) * 4 + 1, /* class 0 unused */
  CLASS_KEEP = JX_BUFFER_CLASS_KEEP,
};
#define CACHE_LIMIT ((size_t)512 << 20) /* bytes kept */

typedef struct {
  void *items[NCLASS][CLASS_KEEP];
  int count[NCLASS];
  size_t bytes;
} buffer_cache;

static buffer_cache cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The class of an allocation of n bytes and its capacity; 0 when not cached. */
static int size_class(size_t n, size_t *cap) {
  if (n <= ((size_t)1 << MIN_SHIFT) || n > ((size_t)1 << MAX_SHIFT)) return 0;
  int k = 63 - __builtin_clzll((unsigned long long)(n - 1));               /* 2^k < n <= 2^(k+1) */
  size_t q = (size_t)1 << (k - 2), j = (n - 1 - ((size_t)1 << k)) / q + 1; /* 1..4 */
  *cap = ((size_t)1 << k) + j * q;
  return (k - MIN_SHIFT) * 4 + (int)j;
}

/* The capacity of class k (the inverse of size_class). */
static size_t class_cap(int k) {
  int oct = (k - 1) / 4 + MIN_SHIFT;
  return ((size_t)1 << oct) + (size_t)((k - 1) % 4 + 1) * ((size_t)1 << (oct - 2));
}

void jx_buffer_cache_clear(void) {
  pthread_mutex_lock(&cache_lock);
  for (int k = 1; k < NCLASS; k++) {
    for (int i = 0; i < cache.count[k]; i++) {
      UNPOISON(cache.items[k][i], class_cap(k));
      free(cache.items[k][i]);
    }
    cache.count[k] = 0;
  }
  cache.bytes = 0;
  pthread_mutex_unlock(&cache_lock);
}

/* A cached block of class k, or NULL. */
static void *cache_take(int k, size_t cap) {
  void *p = NULL;
  pthread_mutex_lock(&cache_lock);
  if (cache.count[k] > 0) {
    p = cache.items[k][--cache.count[k]];
    cache.bytes -= cap;
  }
  pthread_mutex_unlock(&cache_lock);
  if (p) UNPOISON(p, cap);
  return p;
}

/* Keeps p (class k, cap bytes) when there is room; 0 when the caller must free it. */
static int cache_put(int k, size_t cap, void *p) {
  int kept = 0;
  pthread_mutex_lock(&cache_lock);
  if (cache.count[k] < CLASS_KEEP && cache.bytes + cap <= CACHE_LIMIT) {
    POISON(p, cap);
    cache.items[k][cache.count[k]++] = p;
    cache.bytes += cap;
    kept = 1;
  }
  pthread_mutex_unlock(&cache_lock);
  return kept;
}

/* A buffer and its memory accounting (base/memstats.h); every jx_buffer is
 * made here, so a jx_buffer * always points into one of these. */
typedef struct {
  jx_buffer b; /* first */
  jx_mem_rec rec;
} accounted_buffer;

static jx_buffer *buffer_new(size_t nbytes) {
  accounted_buffer *ab = malloc(sizeof *ab);
  if (!ab) return NULL;
  jx_buffer *b = &ab->b;
  if (jx_memstats_on_alloc(&ab->rec, nbytes)) { /* past the device's memory limit */
    free(ab);
    return NULL;
  }
  size_t cap = (nbytes + 63) & ~(size_t)63;
  int k = size_class(nbytes, &cap);
  b->data = k ? cache_take(k, cap) : NULL;
  if (!b->data) b->data = aligned_alloc(64, cap ? cap : 64);
  if (!b->data) {
    jx_buffer_cache_clear(); /* give the cached memory back and try once more */
    b->data = aligned_alloc(64, cap ? cap : 64);
  }
  if (!b->data) {
    jx_memstats_on_free(&ab->rec);
    free(ab);
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->nbytes = nbytes;
  return b;
}

static void buffer_release(jx_buffer *b) {
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
    size_t cap = 0;
    int k = size_class(b->nbytes, &cap);
    if (!k || !cache_put(k, cap, b->data)) free(b->data);
    jx_memstats_on_free(&((accounted_buffer *)b)->rec);
    free(b);
  }
}

/* A header of one reference with no value yet. */
static void header_init(jx_array *a, jx_dtype dt, jx_shape s, int weak, jx_storage_kind kind,
                        const char *made_at) {
  memset(a, 0, sizeof *a);
  atomic_init(&a->refs, 1);
  a->dtype = dt;
  a->weak = (uint8_t)(weak != 0);
  a->storage = (uint8_t)kind;
  a->shape = s;
  a->made_at = made_at;
}

jx_array *jx_array_alloc(jx_dtype dt, jx_shape s, int weak) {
  size_t nbytes = (size_t)jx_shape_numel(s) * jx_dtype_size(dt);
  jx_array *a = malloc(sizeof *a);
  jx_buffer *b = a ? buffer_new(nbytes) : NULL;
  if (!b) {
    free(a);
    char sb[JX_AVAL_STR_CAP], live[1024] = "";
    jx_memstats_describe_largest(live, sizeof live, 5);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory allocating %s (%zu bytes)%s",
                 jx_aval_str(dt, s, sb), nbytes, live);
    return jx_poison();
  }
  header_init(a, dt, s, weak, JX_STORAGE_HOST, jx_error_call_site());
  a->buf = b;
  jx_scope_adopt(a);
  return a;
}

/* A new header of the given kind, owned by the innermost scope, or the
 * poison value (what names what was being made). */
static jx_array *header_new(jx_dtype dt, jx_shape s, int weak, jx_storage_kind kind,
                            const char *what) {
  jx_array *a = malloc(sizeof *a);
  if (!a) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory allocating %s", what);
    return jx_poison();
  }
  header_init(a, dt, s, weak, kind, jx_error_call_site());
  jx_scope_adopt(a);
  return a;
}

jx_array *jx_array_abstract(jx_dtype dt, jx_shape s, int weak) {
  return header_new(dt, s, weak, JX_STORAGE_ABSTRACT, "a shape and dtype");
}

jx_array *jx_array_unbacked(jx_dtype dt, jx_shape s, int weak) {
  return header_new(dt, s, weak, JX_STORAGE_HOST, "an array header");
}

void jx_array_set_shards(jx_array *a, jx_shards *sh) {
  a->st.shards = sh;
  a->storage = JX_STORAGE_SHARDED;
}

void jx_array_set_pending(jx_array *a, jx_pending *c) {
  a->st.pending = c;
  a->storage = JX_STORAGE_PENDING;
}

jx_array *jx_keep_in_scope(jx_array *a) {
  if (!a->poisoned && !a->released) {
    jx_keep(a);
    jx_scope_adopt(a);
  }
  return a;
}

jx_array *jx_tracer_alloc(uint64_t trace_id, int var, jx_dtype dt, jx_shape s, int weak) {
  jx_array *a = header_new(dt, s, weak, JX_STORAGE_TRACER, "a tracer");
  if (!a->poisoned) {
    a->st.tracer.id = trace_id;
    a->st.tracer.var = var;
    a->st.tracer.vma = 0; /* the trace sets it (trace/vma.h) */
  }
  return a;
}

jx_array *jx_array_alias(jx_array *src, jx_shape s) {
  if (jx_array_ready(src)) return jx_poison();
  jx_array *a = malloc(sizeof *a);
  if (!a) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory allocating an array header");
    return jx_poison();
  }
  header_init(a, src->dtype, s, src->weak, JX_STORAGE_HOST, jx_error_call_site());
  a->buf = src->buf;
  atomic_fetch_add_explicit(&src->buf->refs, 1, memory_order_relaxed);
  jx_scope_adopt(a);
  return a;
}

jx_array *jx_keep(jx_array *a) {
  if (a && !a->poisoned && !a->released)
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
  return a;
}

/* ---- released headers ----
 * The header of an array whose last reference is gone is kept, marked
 * released and without storage, until QUARANTINE later releases have
 * pushed it out: a use of it in the meantime (an array used after the
 * scope that owned it ended) is a clear error naming where it was made,
 * not a read of freed memory. Lock-free: each release swaps its header
 * into the next slot and frees the one it displaces. */
enum { QUARANTINE = 4096 };
static jx_array *_Atomic quarantine[QUARANTINE];
static atomic_size_t quarantine_next;

static void quarantine_put(jx_array *a) {
  size_t i = atomic_fetch_add_explicit(&quarantine_next, 1, memory_order_relaxed) % QUARANTINE;
  free(atomic_exchange_explicit(&quarantine[i], a, memory_order_acq_rel));
}

void jx_array_quarantine_clear(void) {
  for (size_t i = 0; i < QUARANTINE; i++)
    free(atomic_exchange_explicit(&quarantine[i], NULL, memory_order_acq_rel));
}

jx_status jx_released_error(const jx_array *a, const char *op, int i) {
  char which[32] = "the array";
  if (i >= 0) snprintf(which, sizeof which, "argument %d", i);
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: %s was released when the scope that owned it ended (it was made at "
                      "%s); take a reference with jx_keep, or end the scope after its last use",
                      op, which, a->made_at ? a->made_at : "an unlocated call");
}

static const jx_shards_ops *_Atomic shards_ops;

void jx_array_register_shards(const jx_shards_ops *ops) {
  atomic_store_explicit(&shards_ops, ops, memory_order_release);
}

static const jx_shards_ops *shards(void) {
  return atomic_load_explicit(&shards_ops, memory_order_acquire);
}

/* Frees a's storage; a tracer stays one (a use of it still says so). */
static void storage_release(jx_array *a) {
  switch ((jx_storage_kind)a->storage) {
  case JX_STORAGE_SHARDED: shards()->release(a->st.shards); break;
  case JX_STORAGE_PENDING: jx_pending_release(a->st.pending); break;
  case JX_STORAGE_DONATED: free(a->st.donated); break;
  case JX_STORAGE_HOST:
  case JX_STORAGE_TRACER: return;
  case JX_STORAGE_ABSTRACT: break;
  }
  a->storage = JX_STORAGE_HOST;
  memset(&a->st, 0, sizeof a->st);
}

void jx_release(jx_array *a) {
  if (!a || a->poisoned || a->released) return;
  if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
    if (a->buf) buffer_release(a->buf);
    if (a->dev) a->dev->release(a->dev);
    a->buf = NULL;
    a->dev = NULL;
    storage_release(a);
    a->released = 1;
    quarantine_put(a);
  }
}

/* ---- inspection ---- */
jx_dtype jx_dtype_of(const jx_array *a) { return a ? a->dtype : JX_F32; }
jx_shape jx_shape_of(const jx_array *a) {
  if (!a || a->poisoned) return (jx_shape){0, {0}};
  return a->shape;
}
int jx_ndim(const jx_array *a) { return jx_shape_of(a).rank; }
int64_t jx_size(const jx_array *a) {
  if (!a) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_size: the array is NULL"), -1;
  return jx_shape_numel(jx_shape_of(a)); /* a poisoned array reads as a scalar shape */
}
int jx_is_weak(const jx_array *a) { return a && a->weak; }
int jx_is_poisoned(const jx_array *a) { return !a || a->poisoned; }

/* Why a cannot be read by op (NULL, poisoned, a tracer, donated), or JX_OK. */
static jx_status check_concrete(const jx_array *a, const char *op) {
  if (!a) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the array is NULL", op);
  if (a->poisoned)
    return jx_error_set(JX_ERR_POISONED, "%s: the array carries an earlier error", op);
  if (a->released) return jx_released_error(a, op, -1);
  if (jx_is_tracer(a)) {
    char sb[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_TRACE,
                        "%s: %s is a tracer, an abstract value of a function being traced "
                        "(jit, grad, vmap, ...) that is known only by its shape and dtype; "
                        "return it as an output to read it, and use jx_cond, jx_while or "
                        "jx_scan for control flow that depends on it",
                        op, jx_aval_str(a->dtype, a->shape, sb));
  }
  if (jx_array_valueless(a)) return jx_valueless_error(a, op);
  return JX_OK;
}

static jx_status check_readable(const jx_array *a, const char *op) {
  jx_status st = check_concrete(a, op);
  return st ? st : jx_array_ready((jx_array *)a);
}

jx_status jx_valueless_error(const jx_array *a, const char *op) {
  if (a->storage == JX_STORAGE_ABSTRACT) {
    char sb[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: the array %s made at %s is a shape and dtype only "
                        "(jx_shape_dtype_struct): it has no value; it serves as an example input "
                        "(jx_eval_shape, jx_fn_cost, jx_sharding_estimate_of)",
                        op, jx_aval_str(a->dtype, a->shape, sb),
                        a->made_at ? a->made_at : "an unknown place");
  }
  const jx_donation *d = jx_array_donated(a) ? a->st.donated : NULL;
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: the array was donated to '%s' (input %d) and can no longer be used", op,
                      d ? d->fn : "a jitted function", d ? d->input : -1);
}

/* Marks a donated to fn as input `input` (its storage freed), or returns
 * the out-of-memory error, a unchanged. */
static jx_status mark_donated(jx_array *a, const char *fn, int input) {
  fn = fn ? fn : "a jitted function";
  jx_donation *d = malloc(sizeof *d + strlen(fn) + 1);
  if (!d) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory donating an array to '%s'", fn);
  d->input = input;
  strcpy(d->fn, fn);
  storage_release(a);
  a->st.donated = d;
  a->storage = JX_STORAGE_DONATED;
  return JX_OK;
}

static _Thread_local const void *donation_program;

const void *jx_donation_swap(const void *program) {
  const void *old = donation_program;
  donation_program = program;
  return old;
}

jx_array *jx_array_take_buffer(jx_array *a, const char *fn, int input) {
  jx_array *t = malloc(sizeof *t);
  if (!t || mark_donated(a, fn, input)) {
    free(t);
    if (!t) jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory donating an array to '%s'", fn);
    return jx_poison();
  }
  header_init(t, a->dtype, a->shape, a->weak, JX_STORAGE_HOST, a->made_at);
  t->buf = a->buf; /* t holds the buffer's one reference now */
  a->buf = NULL;
  if (a->dev) a->dev->release(a->dev); /* t's buffer may be written in place */
  a->dev = NULL;
  jx_scope_adopt(t);
  return t;
}

int jx_array_attach_device_copy(jx_array *a, jx_device_copy *c) {
  jx_device_copy *none = NULL;
  return __atomic_compare_exchange_n(&a->dev, &none, c, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

jx_device_copy *jx_array_take_device_copy(jx_array *a, const char *fn, int input) {
  if (mark_donated(a, fn, input)) return NULL;
  jx_device_copy *c = a->dev;
  a->dev = NULL;
  if (a->buf) buffer_release(a->buf);
  a->buf = NULL;
  return c;
}

/* The gathered buffer is published once: readers on other threads either see
 * NULL and gather under the lock, or see the finished buffer. */
static pthread_mutex_t gather_lock = PTHREAD_MUTEX_INITIALIZER;

jx_status jx_array_ready(jx_array *a) {
  if (__atomic_load_n(&a->buf, __ATOMIC_ACQUIRE) || a->poisoned) return JX_OK;
  if (a->released) return jx_released_error(a, "using an array", -1);
  if (jx_array_valueless(a)) return jx_valueless_error(a, "using an array");
  jx_pending *pending = jx_array_pending(a);
  if (pending) { /* a dispatched run's result: its buffer is set when the run ends */
    jx_status st = jx_pending_wait(pending);
    if (st || __atomic_load_n(&a->buf, __ATOMIC_ACQUIRE)) return st;
  }
  jx_device_copy *dev = jx_array_device_copy(a); /* device-resident: copied down once */
  jx_shards *sh = jx_array_shards(a);
  if (!sh && !dev) return JX_OK;
  pthread_mutex_lock(&gather_lock);
  jx_status st = JX_OK;
  if (!a->buf) {
    size_t nbytes = (size_t)jx_shape_numel(a->shape) * jx_dtype_size(a->dtype);
    jx_buffer *b = buffer_new(nbytes);
    if (!b) {
      char sb[JX_AVAL_STR_CAP];
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory %s %s",
                        sh ? "gathering the shards of" : "copying to the host",
                        jx_aval_str(a->dtype, a->shape, sb));
    } else if ((st = sh ? shards()->gather(sh, a->dtype, a->shape, b->data)
                        : dev->download(dev, b->data, nbytes))) {
      buffer_release(b);
    } else {
      __atomic_store_n(&a->buf, b, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&gather_lock);
  return st;
}

jx_status jx_read(const jx_array *a, void *dst, size_t bytes) {
  jx_status st = check_readable(a, "jx_read");
  if (st) return st;
  if (bytes != a->buf->nbytes) {
    char sb[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_read: %s holds %zu bytes but the destination has %zu",
                        jx_aval_str(a->dtype, a->shape, sb), a->buf->nbytes, bytes);
  }
  if (!dst && bytes)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_read: the destination is NULL");
  if (bytes) memcpy(dst, a->buf->data, bytes);
  return JX_OK;
}

double jx_item(const jx_array *a) {
  if (check_readable(a, "jx_item")) return NAN;
  if (jx_shape_numel(a->shape) != 1) {
    char sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE, "jx_item: %s has %lld elements, not one",
                 jx_aval_str(a->dtype, a->shape, sb), (long long)jx_shape_numel(a->shape));
    return NAN;
  }
  if (jx_is_complex(a->dtype)) { /* never the real part alone: JAX's float() raises too */
    char sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_DTYPE,
                 "jx_item: %s is complex; read both parts with jx_item_complex, or one with "
                 "jx_real / jx_imag",
                 jx_aval_str(a->dtype, a->shape, sb));
    return NAN;
  }
  return jx_load_f64(a->buf->data, a->dtype, 0);
}

jx_status jx_item_complex(const jx_array *a, double *re, double *im) {
  if (!re || !im) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_item_complex: re or im is NULL");
  *re = *im = NAN;
  jx_status st = check_readable(a, "jx_item_complex");
  if (st) return st;
  if (jx_shape_numel(a->shape) != 1) {
    char sb[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE, "jx_item_complex: %s has %lld elements, not one",
                        jx_aval_str(a->dtype, a->shape, sb), (long long)jx_shape_numel(a->shape));
  }
  double _Complex z = jx_load_c128(a->buf->data, a->dtype, 0); /* a real dtype: im 0 */
  *re = creal(z);
  *im = cimag(z);
  return JX_OK;
}

jx_status jx_block_until_ready(const jx_array *a) {
  jx_status st = check_concrete(a, "jx_block_until_ready");
  if (st) return st;
  /* a device-resident value is waited for where it is, not copied down */
  jx_device_copy *dev = jx_array_device_copy(a);
  if (dev && !__atomic_load_n(&a->buf, __ATOMIC_ACQUIRE) && a->storage == JX_STORAGE_HOST)
    return dev->wait(dev);
  return jx_array_ready((jx_array *)a);
}

/* ---- creation ---- */
static jx_status check_new(jx_dtype dt, jx_shape s, const char *op) {
  if (!jx_dtype_valid(dt)) return jx_error_set(JX_ERR_DTYPE, "%s: %d is not a dtype", op, (int)dt);
  return jx_shape_check(s, op, "the shape");
}

jx_array *jx_array_from(jx_dtype dt, jx_shape s, const void *host_data) {
  if (check_new(dt, s, "jx_array_from")) return jx_poison();
  if (!host_data && jx_shape_numel(s) > 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_array_from: host_data is NULL");
    return jx_poison();
  }
  jx_array *a = jx_array_alloc(dt, s, 0);
  if (!a->poisoned && a->buf->nbytes) memcpy(a->buf->data, host_data, a->buf->nbytes);
  return a;
}

static jx_array *filled(jx_dtype dt, jx_shape s, double v, int weak, const char *op) {
  if (check_new(dt, s, op)) return jx_poison();
  jx_array *a = jx_array_alloc(dt, s, weak);
  if (a->poisoned) return a;
  int64_t n = jx_shape_numel(s);
  size_t es = jx_dtype_size(dt);
  if (n > 0) {
    jx_store_f64(a->buf->data, dt, 0, v);
    for (int64_t i = 1; i < n; i++) memcpy((char *)a->buf->data + i * es, a->buf->data, es);
  }
  return a;
}

jx_array *jx_scalar(jx_dtype dt, double v) {
  return filled(dt, (jx_shape){0, {0}}, v, 1, "jx_scalar");
}
jx_array *jx_complex_scalar(jx_dtype dt, double re, double im) {
  if (!jx_is_complex(dt)) {
    jx_error_set(JX_ERR_DTYPE, "jx_complex_scalar: the dtype must be c64 or c128, got %s",
                 jx_dtype_name(dt));
    return jx_poison();
  }
  jx_array *a = filled(dt, (jx_shape){0, {0}}, 0, 1, "jx_complex_scalar");
  if (!a->poisoned) jx_store_c128(a->buf->data, dt, 0, jx_cmplx(re, im));
  return a;
}
jx_array *jx_shape_dtype_struct(jx_dtype dt, jx_shape s) {
  if (check_new(dt, s, "jx_shape_dtype_struct")) return jx_poison();
  return jx_array_abstract(dt, s, 0);
}

jx_array *jx_zeros(jx_dtype dt, jx_shape s) { return filled(dt, s, 0, 0, "jx_zeros"); }
jx_array *jx_ones(jx_dtype dt, jx_shape s) { return filled(dt, s, 1, 0, "jx_ones"); }
jx_array *jx_full(jx_dtype dt, jx_shape s, double v) { return filled(dt, s, v, 0, "jx_full"); }

/* As jnp.arange (which differs from np.arange in the values): the length is
 * ceil((stop - start) / step) computed in f64; integer dtypes count from
 * trunc(start) in steps of trunc(step), wrapping; floats compute
 * i * step + start in the dtype (f32 for f16/bf16) and round once. */
jx_array *jx_arange(jx_dtype dt, double start, double stop, double step) {
  if (!isfinite(step) || step == 0 || !isfinite(start) || !isfinite(stop)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_arange: start, stop and step must be finite and step non-zero, got "
                 "start=%g stop=%g step=%g",
                 start, stop, step);
    return jx_poison();
  }
  if (dt == JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "jx_arange: bool is not accepted (as in JAX)");
    return jx_poison();
  }
  double count = ceil((stop - start) / step);
  if (count > (double)((int64_t)1 << 48)) {
    jx_error_set(JX_ERR_SHAPE, "jx_arange: start=%g stop=%g step=%g gives %g elements", start, stop,
                 step, count);
    return jx_poison();
  }
  int64_t n = count > 0 ? (int64_t)count : 0;
  jx_shape s = {1, {n}};
  if (check_new(dt, s, "jx_arange")) return jx_poison();
  jx_array *a = jx_array_alloc(dt, s, 0);
  if (a->poisoned) return a;
  void *d = a->buf->data;
  if (jx_is_int(dt)) {
    unsigned char t[8];
    jx_store_f64(t, JX_I64, 0, start); /* trunc, saturating */
    int64_t i0 = *(int64_t *)t;
    jx_store_f64(t, JX_I64, 0, step);
    int64_t di = *(int64_t *)t;
    for (int64_t i = 0; i < n; i++)
      jx_store_i64(d, dt, i, (int64_t)((uint64_t)i0 + (uint64_t)i * (uint64_t)di));
  } else if (dt == JX_F64) {
    for (int64_t i = 0; i < n; i++) ((double *)d)[i] = (double)i * step + start;
  } else {
    float fs = (float)start, fd = (float)step;
    for (int64_t i = 0; i < n; i++) {
      volatile float v = (float)i * fd; /* no contraction into an fma: XLA rounds twice */
      jx_store_f64(d, dt, i, (double)(v + fs));
    }
  }
  return a;
}

jx_array *jx_eye(jx_dtype dt, int64_t n) {
  jx_array *a = filled(dt, (jx_shape){2, {n, n}}, 0, 0, "jx_eye");
  if (a->poisoned) return a;
  for (int64_t i = 0; i < n; i++) jx_store_f64(a->buf->data, dt, i * n + i, 1);
  return a;
}
