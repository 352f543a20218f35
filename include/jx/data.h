/* jx/data.h: datasets and batch loaders.
 *
 * A dataset is a set of examples held in memory as arrays whose leading
 * axis counts the examples (images u8[N,28,28] with labels i32[N]; token
 * windows). A loader cuts it into batches: shuffled once per epoch by the
 * PRNG (the same seed gives the same order on every machine), laid out on
 * devices by a sharding (the batch axis split over the data axis), and made
 * ahead of time by a background thread so that a train step never waits.
 * Its position (epoch, batch) can be read and restored, so a resumed run
 * sees the data it would have seen. Over several processes (jx/distributed.h)
 * each process makes only its devices' part of each batch. */
#ifndef JX_DATA_H
#define JX_DATA_H

#include "parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jx_dataset jx_dataset;

/* Examples from arrays with one leading length n (takes references). */
JX_API jx_dataset *jx_dataset_from_arrays(int narrays, jx_array *const *arrays);
/* Fashion-MNIST from its IDX files (gzipped or not) in dir (NULL: Debian's
 * dataset-fashion-mnist, /usr/share/datasets/fashion-mnist): images u8[N,28,28],
 * labels i32[N]; train = 1 for the 60000 training examples, 0 for the 10000 tests. */
JX_API jx_dataset *jx_dataset_fashion_mnist(const char *dir, int train);
/* A byte corpus cut into windows of context + 1 bytes, each as inputs
 * i32[context] and next-byte targets i32[context]; windows start every
 * context bytes. paths: files concatenated in order. */
JX_API jx_dataset *jx_dataset_text(int npaths, const char *const *paths, int64_t context);
JX_API int64_t jx_dataset_size(const jx_dataset *d);           /* examples */
JX_API int jx_dataset_arrays(const jx_dataset *d);             /* arrays per example */
JX_API jx_array *jx_dataset_array(const jx_dataset *d, int i); /* borrowed: the whole array i */
JX_API void jx_dataset_release(jx_dataset *d);

typedef struct {
  int64_t batch;         /* examples per batch */
  uint32_t seed;         /* shuffling key: jx_random_key(seed), folded with the epoch */
  int shuffle;           /* 0: in order */
  jx_sharding *sharding; /* NULL: one device; else every batch array is laid out by it */
  int prefetch;          /* batches made ahead (0: 2) */
} jx_loader_options;

typedef struct jx_loader jx_loader;
JX_API jx_loader *jx_loader_create(jx_dataset *d, const jx_loader_options *o);
/* The next batch: out[i] for each array of the dataset, owned by the
 * innermost scope. Epochs follow each other without end; a last partial
 * batch is dropped (every batch has the same shape, so a jitted step
 * compiles once). */
JX_API jx_status jx_loader_next(jx_loader *l, jx_array **out);
/* Batches handed out so far (epoch * batches_per_epoch + batch), and a jump
 * to such a position (a resumed run). */
JX_API int64_t jx_loader_position(const jx_loader *l);
JX_API jx_status jx_loader_seek(jx_loader *l, int64_t position);
JX_API int64_t jx_loader_batches_per_epoch(const jx_loader *l);
/* The rows of each batch this process builds: first .. first+count-1 (the
 * count is returned). All of them, unless the sharding's mesh spans several
 * processes: then each process builds only the rows its devices hold (as
 * JAX's process-local data) and the batch is assembled from the processes'
 * parts with jx_array_from_process_local. */
JX_API int64_t jx_loader_local_rows(const jx_loader *l, int64_t *first);
JX_API void jx_loader_release(jx_loader *l);

#ifndef JX_NO_LOCATION_MACROS
#define jx_loader_next(...) JX_LOCATED_STATUS(jx_loader_next, __VA_ARGS__)

#define jx_dataset_from_arrays(...)                                                                \
  JX_LOCATED_PTR(jx_dataset *, jx_dataset_from_arrays, __VA_ARGS__)
#define jx_dataset_fashion_mnist(...)                                                              \
  JX_LOCATED_PTR(jx_dataset *, jx_dataset_fashion_mnist, __VA_ARGS__)
#define jx_dataset_text(...)  JX_LOCATED_PTR(jx_dataset *, jx_dataset_text, __VA_ARGS__)
#define jx_loader_create(...) JX_LOCATED_PTR(jx_loader *, jx_loader_create, __VA_ARGS__)
#define jx_loader_seek(...)   JX_LOCATED_STATUS(jx_loader_seek, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
