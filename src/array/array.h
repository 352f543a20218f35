/* Internal view of arrays, buffers and scopes. */
#ifndef JX_SRC_ARRAY_ARRAY_H
#define JX_SRC_ARRAY_ARRAY_H

#include <jx/array.h>
#include <stdatomic.h>

#include "dtype.h"

/* Reference-counted storage; several arrays (a reshape and its source) may
 * share one buffer. */
typedef struct jx_buffer {
  atomic_int refs;
  size_t nbytes;
  void *data; /* 64-byte aligned; never NULL, even for empty arrays */
} jx_buffer;

/* What holds an array's value besides its host buffer: one storage kind
 * per array (array.storage), its data in array.st. */
typedef enum {
  JX_STORAGE_HOST,     /* buf alone (NULL for the poison value and, briefly, a new header) */
  JX_STORAGE_TRACER,   /* a variable of a program being traced: no value, an abstract one */
  JX_STORAGE_SHARDED,  /* blocks on several devices (the parallel layer's, jx_shards_ops);
                        * buf: the global value once something read it */
  JX_STORAGE_PENDING,  /* a queued run's result (async dispatch); buf: set when it ends */
  JX_STORAGE_DONATED,  /* given to a jitted function: no value, every use is an error */
  JX_STORAGE_ABSTRACT, /* a shape and dtype only (jx_shape_dtype_struct): no value, an
                        * example input where only avals count; every other use is an error */
} jx_storage_kind;

/* Why a donated array has no value: the function it was donated to
 * (jx_jit_options.donate) and the input position, for the error. */
typedef struct jx_donation {
  int input;
  char fn[]; /* the function's name */
} jx_donation;

/* A header every layer reads (refs, dtype, flags, shape, where it was made),
 * the host buffer, and one tagged storage. */
struct jx_array {
  atomic_int refs;
  jx_dtype dtype;
  uint8_t weak;
  uint8_t poisoned;
  /* 1 once its last reference is gone: a released header is kept a while
   * (array.c's quarantine) so that a use of the array after its scope ended
   * is an error naming where it was made (made_at). */
  uint8_t released;
  uint8_t storage; /* jx_storage_kind */
  jx_shape shape;
  /* The caller's file:line of the public call that made the array (NULL
   * when unknown). */
  const char *made_at;
  /* The value on the host: the array's storage, or a copy of a value held
   * elsewhere made once something read it (the array is immutable, so the
   * copy stays valid; set with an atomic store, see jx_array_ready). */
  jx_buffer *buf;
  /* A copy of the value in an accelerator's memory (cuda/cuda_resident.h),
   * or NULL (always on the CPU): an executor's output keeps its value there
   * and has no buf until something reads it (device-resident; jx_array_ready
   * copies it down once); a host input an executor uploaded keeps its upload
   * here, so the next call reads it in place. Valid as long as the array. */
  struct jx_device_copy *dev;
  union {
    /* JX_STORAGE_TRACER: the variable var of trace id, and (inside a
     * shard_map body) the manual mesh axes its value varies over
     * (trace/vma.h; 0: invariant over all of them, as every concrete array
     * is) */
    struct {
      uint64_t id;
      int var, vma;
    } tracer;
    struct jx_shards *shards;   /* JX_STORAGE_SHARDED: one shard per device of its mesh */
    struct jx_pending *pending; /* JX_STORAGE_PENDING: one reference */
    jx_donation *donated;       /* JX_STORAGE_DONATED: malloc'ed */
  } st;
};

/* ---- device copies: an array's value in an accelerator's memory ----
 * The array layer knows them only through these functions; the backend
 * (cuda/cuda_resident.c) makes them. */
typedef struct jx_device_copy jx_device_copy;
struct jx_device_copy {
  void *device; /* whose memory (the backend's device) */
  uint64_t ptr; /* the block */
  /* Copies the value into host dst (bytes), after the work that makes it. */
  jx_status (*download)(jx_device_copy *c, void *dst, size_t bytes);
  /* Waits until the work that makes the value has ended (jx_block_until_ready). */
  jx_status (*wait)(jx_device_copy *c);
  /* Returns the block to its device's allocator and frees c. */
  void (*release)(jx_device_copy *c);
};
/* a's device copy, or NULL (safe against a concurrent attach). */
static inline jx_device_copy *jx_array_device_copy(const jx_array *a) {
  return __atomic_load_n(&a->dev, __ATOMIC_ACQUIRE);
}
/* Attaches c to a concrete array that has none: 1, or 0 when a already has
 * one (another thread's upload won: the caller keeps c). */
int jx_array_attach_device_copy(jx_array *a, jx_device_copy *c);
/* Donation to a device executor: detaches a's device copy (returned, the
 * caller now owns its block), drops a's host buffer and marks a donated to fn
 * as input `input`, as jx_array_take_buffer does. NULL (with an error) when
 * out of memory; a is then unchanged. */
jx_device_copy *jx_array_take_device_copy(jx_array *a, const char *fn, int input);

/* ---- pending values (pending.c): a queued run's completion ---- */
typedef struct jx_pending jx_pending;
jx_pending *jx_pending_new(void); /* one reference; NULL when out of memory */
void jx_pending_retain(jx_pending *c);
void jx_pending_release(jx_pending *c);
/* Marks the run finished (st and msg: its error, if any) and wakes the waiters. */
void jx_pending_finish(jx_pending *c, jx_status st, const char *msg);
/* Waits for the run; its error, recorded on the calling thread, or JX_OK. */
jx_status jx_pending_wait(jx_pending *c);
int jx_pending_done(jx_pending *c);
/* Called first by jx_shutdown when set (the dispatch thread's stop); set
 * and read with __atomic builtins, since any thread may call jx_shutdown. */
extern void (*jx_before_shutdown)(void);

/* Makes a's global buffer available (waiting for a pending array's run,
 * gathering a sharded array's shards, copying a device-resident array down);
 * every reader of a->buf on a concrete array that may be sharded calls this
 * first. Returns the status of the gather (out of memory). */
jx_status jx_array_ready(jx_array *a);
/* The error for a use of an array released when its scope ended, by op
 * (argument i, or -1 when op has one); always non-zero. */
jx_status jx_released_error(const jx_array *a, const char *op, int i);
/* Frees the headers of released arrays kept to name them (jx_shutdown). */
void jx_array_quarantine_clear(void);
/* The error for a use of a valueless array (donated, or a shape and dtype
 * only) by op ("jx_read"); always non-zero. */
jx_status jx_valueless_error(const jx_array *a, const char *op);
/* Donation (compile/executable.c): a new array, owned by the innermost scope,
 * that takes over a's buffer; a is marked donated to fn as input `input` and
 * keeps no storage. a must be concrete, unsharded and its buffer unshared. */
jx_array *jx_array_take_buffer(jx_array *a, const char *fn, int input);
/* The program that the calling thread's jx_call is about to run: only its
 * executable may take donated buffers, not a program that shard_map or pmap
 * run per device, nor one evaluated inside another. jx_call sets it
 * (trace/fn.c), the executable reads and clears it. Returns the previous. */
const void *jx_donation_swap(const void *program);
/* ---- sharded storage: blocks on several devices ----
 * The blocks are the parallel layer's (parallel/shards.c); this layer
 * releases and gathers them through the operations that layer registers
 * before it makes its first sharded array, without knowing what they are. */
typedef struct jx_shards jx_shards;
typedef struct jx_shards_ops {
  void (*release)(jx_shards *s);
  /* Copies the global value (dtype dt, shape global) into host dst. */
  jx_status (*gather)(const jx_shards *s, jx_dtype dt, jx_shape global, void *dst);
} jx_shards_ops;
void jx_array_register_shards(const jx_shards_ops *ops);

static inline int jx_is_tracer(const jx_array *a) { return a->storage == JX_STORAGE_TRACER; }
/* The manual mesh axes a varies over (trace/vma.h): 0 for a concrete array. */
static inline int jx_array_vma(const jx_array *a) { return jx_is_tracer(a) ? a->st.tracer.vma : 0; }
/* a's shards, or NULL when it is not laid out over several devices. */
static inline struct jx_shards *jx_array_shards(const jx_array *a) {
  return a->storage == JX_STORAGE_SHARDED ? a->st.shards : NULL;
}
/* The queued run that makes a's value (done or not), or NULL. */
static inline struct jx_pending *jx_array_pending(const jx_array *a) {
  return a->storage == JX_STORAGE_PENDING ? a->st.pending : NULL;
}
static inline int jx_array_donated(const jx_array *a) { return a->storage == JX_STORAGE_DONATED; }
/* A shape and dtype only (JX_STORAGE_ABSTRACT), owned by the innermost
 * scope: jx_shape_dtype_struct's, and jx_eval_shape's outputs (weak kept). */
jx_array *jx_array_abstract(jx_dtype dt, jx_shape s, int weak);
/* 1 when a has no value to read: donated, or a shape and dtype only. */
static inline int jx_array_valueless(const jx_array *a) {
  return a->storage == JX_STORAGE_DONATED || a->storage == JX_STORAGE_ABSTRACT;
}
/* Gives a header made by jx_array_unbacked its storage: sharded blocks (the
 * parallel layer's, freed with the array), or the pending result of a
 * queued run (takes the reference). */
void jx_array_set_shards(jx_array *a, struct jx_shards *s);
void jx_array_set_pending(jx_array *a, struct jx_pending *c);
/* A new tracer of variable var in trace trace_id, owned by the innermost scope. */
jx_array *jx_tracer_alloc(uint64_t trace_id, int var, jx_dtype dt, jx_shape s, int weak);

/* A new array with uninitialised storage, owned by the innermost scope;
 * the poison value (with an error recorded) when memory runs out. */
jx_array *jx_array_alloc(jx_dtype dt, jx_shape s, int weak);
/* A new array without storage (buf NULL), owned by the innermost scope: the
 * header of a sharded array, whose shards hold the data. */
jx_array *jx_array_unbacked(jx_dtype dt, jx_shape s, int weak);
/* A new reference to a, owned by the innermost scope; returns a. */
jx_array *jx_keep_in_scope(jx_array *a);
/* A new array sharing src's buffer under another shape of the same size. */
jx_array *jx_array_alias(jx_array *src, jx_shape s);
static inline void *jx_array_data(const jx_array *a) { return a->buf->data; } /* after ready */
jx_array *jx_poison(void); /* the shared poisoned value */
/* Frees the cache of released buffers (array.c); jx_shutdown calls it. */
void jx_buffer_cache_clear(void);
#define JX_BUFFER_CLASS_KEEP 16 /* released buffers kept per size class */

/* Scope bookkeeping: hand a new reference to the innermost scope. */
void jx_scope_adopt(jx_array *a);
/* Drops the innermost scope's reference to a now (an executable freeing an
 * intermediate at its last use); returns 0 if that scope does not hold a. */
int jx_scope_release_now(jx_array *a);

/* ---- shapes ---- */
int64_t jx_shape_numel(jx_shape s);
int jx_shape_equal(jx_shape a, jx_shape b);
/* Checks a user-given shape (rank in range, dims >= 0); names `what` in the error. */
jx_status jx_shape_check(jx_shape s, const char *op, const char *what);
/* "f32[3,4]" into buf (at least 96 bytes); returns buf. */
char *jx_aval_str(jx_dtype dt, jx_shape s, char *buf);
#define JX_AVAL_STR_CAP 128
/* Row-major strides in elements. */
void jx_shape_strides(jx_shape s, int64_t *strides);

#endif
