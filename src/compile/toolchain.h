/* Compiling generated C into shared objects, with a content-addressed cache
 * on disk ($JX_CACHE_DIR, else $XDG_CACHE_HOME/jx, else ~/.cache/jx). The key
 * hashes the source, the compiler's identity and flags and a jx cache version;
 * entries are written atomically (temp file + rename), so several processes
 * may share the cache; an entry that fails to load is rebuilt. Loaded objects
 * stay loaded for the life of the process: compiled programs point into them. */
#ifndef JX_SRC_COMPILE_TOOLCHAIN_H
#define JX_SRC_COMPILE_TOOLCHAIN_H

#include <jx/base.h>
#include <stdint.h>

/* The address of `symbol` in the compiled `source`, or NULL with an error
 * recorded (naming the compiler's first error line). Thread-safe, and
 * concurrent: different sources compile at the same time (the lock is not
 * held while the compiler runs); a thread asking for a source that another
 * is compiling waits for that compile instead of starting its own. */
void *jx_kernel_load(const char *source, const char *symbol);

/* Batches: one translation unit holding the kernels of several programs (a
 * jitted function and the nested programs of its control flow), compiled
 * in one compiler run. jx_kernel_preload loads (compiling if need be) such
 * a source and keeps it for jx_kernel_find, which returns the address of
 * `symbol` in any preloaded object, or NULL (no error). Kernel symbols are
 * named by a hash of their text (kernel_batch.h), so a symbol found in any
 * batch is the kernel a program asks for. */
jx_status jx_kernel_preload(const char *source);
void *jx_kernel_find(const char *symbol);

/* Tiered compilation: the optimization levels (0-3) kernels compile at,
 * *first for a program's first calls and *final once it has run a while
 * (executable.c): 1 and 3, or both the level JX_KERNEL_OPT names. Every
 * level computes the same bits. JX_OK, or an error for a JX_KERNEL_OPT that
 * is not a level. */
jx_status jx_kernel_levels(int *first, int *final);

/* The object `source` compiles to at `level`: loaded, from the disk cache,
 * or (build = 1) compiled; NULL when build = 0 and it is not cached (no
 * error), or on failure with an error recorded. Thread-safe and concurrent
 * as jx_kernel_load. Its symbols: dlsym. */
void *jx_kernel_object(const char *source, int level, int build);
/* Keeps an object of jx_kernel_object for jx_kernel_find, as a batch. */
jx_status jx_kernel_keep(void *handle);

/* Counters for tests and JX_LOG_COMPILES: compiler runs, disk-cache hits and
 * in-memory hits since the process started, and the most compiler runs that
 * were under way at once. */
typedef struct {
  int64_t compiles, disk_hits, memory_hits, max_concurrent;
} jx_kernel_stats;
jx_kernel_stats jx_kernel_cache_stats(void);

#endif
