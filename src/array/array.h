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

/* The header every layer reads first (refs, dtype, flags, shape), then the
 * storage: a host buffer, or the stand-in of a value held elsewhere (a
 * trace's variable, sharded blocks, a pending run's result, a device copy)
 * or given away (donated). Ordered so that no padding is left between the
 * members (the size is checked in array.c). */
struct jx_array {
  atomic_int refs;
  jx_dtype dtype;
  uint8_t weak;
  uint8_t poisoned;
  /* Donated to a jitted function (jx_jit_options.donate), which took its
   * buffer: buf is NULL and every use fails with an error naming the
   * function (donated_to, malloc'ed) and the input position. */
  uint8_t donated;
  /* 1 once its last reference is gone: a released header is kept a while
   * (array.c's quarantine) so that a use of the array after its scope ended
   * is an error naming where it was made (made_at). */
  uint8_t released;
  int var; /* a tracer's variable (see trace_id) */
  jx_shape shape;
  jx_buffer *buf; /* NULL for the poison value and for tracers */
  /* A tracer stands for a variable of a program being traced: no data, only
   * an abstract value. trace_id names its trace (0 for concrete arrays). */
  uint64_t trace_id;
  /* A tracer inside a shard_map body: the manual mesh axes its value varies
   * over (trace/vma.h; 0: invariant over all of them, as every concrete
   * array is). */
  int vma;
  int donated_input;
  char *donated_to;
  /* An array laid out over several devices (parallel/shards.c): its shards,
   * one per device of its sharding's mesh. Such an array has no global
   * buffer until something reads the global value: jx_array_ready gathers it
   * once (the array is immutable, so the copy stays valid). */
  struct jx_shards *shards;
  /* Async dispatch: the queued run that will set buf (NULL once it has, or
   * for arrays made here); jx_array_ready waits for it. */
  struct jx_pending *pending;
  /* A copy of the value in an accelerator's memory (cuda/cuda_resident.h),
   * or NULL (always on the CPU). An executor's output keeps its value there
   * and has no buf until something reads it (jx_array_ready copies it down
   * once); a host input an executor uploaded keeps its upload here, so the
   * next call reads it in place. Valid as long as the array: arrays are
   * immutable. */
  struct jx_device_copy *dev;
  /* The caller's file:line of the public call that made the array (NULL
   * when unknown). */
  const char *made_at;
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
/* The error for a use of a donated array by op ("jx_read"); always non-zero. */
jx_status jx_donated_error(const jx_array *a, const char *op);
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

static inline int jx_is_tracer(const jx_array *a) { return a->trace_id != 0; }
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
