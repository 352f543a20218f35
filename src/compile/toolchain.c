#include "toolchain.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hash.h"
#include "../base/cache_dir.h"

extern char **environ;

/* Bump when generated code or its calling convention changes. */
#define JX_KERNEL_CACHE_VERSION "jx-kernels-5"
static const char *const cflags[] = {"-march=native",
                                     "-fno-math-errno",
                                     "-fno-trapping-math",
                                     "-fPIC",
                                     "-shared",
                                     "-std=c11",
                                     "-w",
                                     NULL};

static const char *const levels[] = {"-O0", "-O1", "-O2", "-O3"};

/* The level JX_KERNEL_OPT names: 0-3, -1 when unset, -2 for a value that
 * is not a level. The flags keep ISO C's floating point (no contraction,
 * no reassociation), so every level computes the same bits; a lower one
 * only compiles faster (the sanitized test pass uses 1). */
static int env_level(void) {
  long long level = 3;
  int given = jx_env_int("JX_KERNEL_OPT", &level);
  if (given < 0 || (given > 0 && (level < 0 || level > 3))) return -2;
  return given > 0 ? (int)level : -1;
}

jx_status jx_kernel_levels(int *first, int *final) {
  int level = env_level();
  if (level == -2)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jit: JX_KERNEL_OPT is '%s': want 0, 1, 2 or 3",
                        jx_env_string("JX_KERNEL_OPT"));
  *first = level >= 0 ? level : 1;
  *final = level >= 0 ? level : 3;
  return JX_OK;
}

typedef struct loaded {
  uint64_t key;
  void *handle;
  struct loaded *next;
} loaded;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *objects;
static jx_kernel_stats stats;
static char compiler_id[256];

static const char *compiler(void) {
  const char *cc = jx_env_string("CC");
  return cc && *cc ? cc : "cc";
}

/* The compiler's --version first line, so that a compiler upgrade misses the
 * cache; asked once per process (threads may compile at the same time). */
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static void ask_identity(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", compiler());
  FILE *p = popen(cmd, "r");
  if (p) {
    if (!fgets(compiler_id, sizeof compiler_id, p)) compiler_id[0] = '\0';
    pclose(p);
  }
  if (!compiler_id[0]) snprintf(compiler_id, sizeof compiler_id, "%s", compiler());
}
static const char *compiler_identity(void) {
  pthread_once(&identity_once, ask_identity);
  return compiler_id;
}

static uint64_t key_of(const char *source, int level) {
  uint64_t h = jx_hash_str(JX_HASH_SEED, JX_KERNEL_CACHE_VERSION);
  h = jx_hash_str(h, compiler_identity());
  h = jx_hash_str(h, levels[level]);
  for (int i = 0; cflags[i]; i++) h = jx_hash_str(h, cflags[i]);
  return jx_hash_str(h, source);
}

/* Runs the compiler; on failure records an error with its first message line. */
static jx_status compile(const char *src_path, const char *so_path, const char *log_path,
                         int level) {
  const char *argv[32];
  int n = 0;
  argv[n++] = compiler();
  argv[n++] = levels[level];
  for (int i = 0; cflags[i]; i++) argv[n++] = cflags[i];
  argv[n++] = "-o";
  argv[n++] = so_path;
  argv[n++] = src_path;
  argv[n++] = "-lm";
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return jx_error_set(JX_ERR_IO, "jit: cannot run the C compiler '%s': %s (set CC)", argv[0],
                        strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return JX_OK;
  char line[512] = "";
  FILE *f = fopen(log_path, "r");
  if (f) {
    while (fgets(line, sizeof line, f) && !strstr(line, "error")) {
    }
    fclose(f);
  }
  line[strcspn(line, "\n")] = '\0';
  return jx_error_set(JX_ERR_INTERNAL, "jit: the C compiler failed on generated code (%s): %s",
                      src_path, line);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static void *open_object(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

/* Sources being compiled right now (under lock): others asking for one wait on `built`. */
typedef struct building {
  uint64_t key;
  struct building *next;
} building;
static building *in_flight;
static pthread_cond_t built = PTHREAD_COND_INITIALIZER;
static int64_t running;

static void *find_loaded(uint64_t key) {
  for (loaded *l = objects; l; l = l->next)
    if (l->key == key) return l->handle;
  return NULL;
}

static int is_building(uint64_t key) {
  for (building *b = in_flight; b; b = b->next)
    if (b->key == key) return 1;
  return 0;
}

/* Opens the cached object of `key`, or compiles `source` at `level` into it
 * (build = 0: NULL, no error, when it is not cached); without the lock. */
static void *open_or_build(const char *source, uint64_t key, int level, int build, char *so,
                           size_t so_len) {
  char dir[1024], tmp_so[1300], src[1300], log[1300];
  if (!jx_kernel_cache_dir(dir, sizeof dir)) {
    jx_error_set(JX_ERR_IO, "jit: cannot create the kernel cache directory '%s'", dir);
    return NULL;
  }
  snprintf(so, so_len, "%s/%016llx.so", dir, (unsigned long long)key);
  void *handle = open_object(so);
  if (handle) {
    pthread_mutex_lock(&lock);
    stats.disk_hits++;
    pthread_mutex_unlock(&lock);
    return handle;
  }
  if (!build) return NULL;
  unlink(so); /* missing, corrupt or foreign: rebuild */
  unsigned tag = (unsigned)getpid() ^ (unsigned)(uintptr_t)&handle;
  snprintf(src, sizeof src, "%s/%016llx.%x.c", dir, (unsigned long long)key, tag);
  snprintf(tmp_so, sizeof tmp_so, "%s/%016llx.%x.so.tmp", dir, (unsigned long long)key, tag);
  snprintf(log, sizeof log, "%s/%016llx.%x.log", dir, (unsigned long long)key, tag);
  jx_status st = JX_OK;
  FILE *f = fopen(src, "w");
  if (!f || fputs(source, f) < 0) st = jx_error_set(JX_ERR_IO, "jit: cannot write '%s'", src);
  if (f && fclose(f) != 0 && !st) st = jx_error_set(JX_ERR_IO, "jit: cannot write '%s'", src);
  double t0 = now_ms();
  if (!st) {
    pthread_mutex_lock(&lock);
    if (++running > stats.max_concurrent) stats.max_concurrent = running;
    pthread_mutex_unlock(&lock);
    st = compile(src, tmp_so, log, level);
    pthread_mutex_lock(&lock);
    running--;
    if (!st) stats.compiles++;
    pthread_mutex_unlock(&lock);
  }
  if (!st && jx_env_flag("JX_LOG_COMPILES"))
    fprintf(stderr, "jx: compiled kernels %016llx at %s in %.1f ms\n", (unsigned long long)key,
            levels[level], now_ms() - t0);
  if (!st && rename(tmp_so, so) != 0)
    st = jx_error_set(JX_ERR_IO, "jit: cannot rename '%s': %s", tmp_so, strerror(errno));
  if (!st) {
    handle = open_object(so);
    if (!handle) st = jx_error_set(JX_ERR_INTERNAL, "jit: cannot load '%s': %s", so, dlerror());
  }
  unlink(tmp_so);
  if (!st) {
    unlink(src);
    unlink(log);
  }
  return handle;
}

void *jx_kernel_object(const char *source, int level, int build) {
  uint64_t key = key_of(source, level);
  pthread_mutex_lock(&lock);
  void *handle;
  while (!(handle = find_loaded(key)) && is_building(key)) pthread_cond_wait(&built, &lock);
  if (handle) {
    stats.memory_hits++;
    pthread_mutex_unlock(&lock);
    return handle;
  }
  building me = {key, in_flight};
  in_flight = &me;
  pthread_mutex_unlock(&lock);

  char so[1200] = "";
  handle = open_or_build(source, key, level, build, so, sizeof so);

  pthread_mutex_lock(&lock);
  for (building **b = &in_flight; *b; b = &(*b)->next)
    if (*b == &me) {
      *b = me.next;
      break;
    }
  if (handle) {
    loaded *l = malloc(sizeof *l);
    if (l) {
      *l = (loaded){key, handle, objects};
      objects = l;
    } else { /* without its list entry the handle would leak: fail instead */
      dlclose(handle);
      handle = NULL;
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory loading '%s'", so);
    }
  }
  pthread_cond_broadcast(&built); /* waiters find it loaded, or try themselves */
  pthread_mutex_unlock(&lock);
  return handle;
}

/* The object of `source` at the final level (jx_kernel_levels), loaded,
 * from the disk cache or compiled; NULL with an error recorded. */
static void *load_object(const char *source) {
  int first, final;
  if (jx_kernel_levels(&first, &final)) return NULL;
  return jx_kernel_object(source, final, 1);
}

void *jx_kernel_load(const char *source, const char *symbol) {
  void *handle = load_object(source);
  if (!handle) return NULL;
  void *fn = dlsym(handle, symbol);
  if (!fn) jx_error_set(JX_ERR_INTERNAL, "jit: kernel '%s' is missing from its object", symbol);
  return fn;
}

/* Objects of jx_kernel_preload, searched by jx_kernel_find (under lock). */
typedef struct batch {
  void *handle;
  struct batch *next;
} batch;
static batch *batches;

jx_status jx_kernel_preload(const char *source) {
  void *handle = load_object(source);
  if (!handle) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  return jx_kernel_keep(handle);
}

jx_status jx_kernel_keep(void *handle) {
  batch *b = malloc(sizeof *b);
  if (!b) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jit: out of memory");
  pthread_mutex_lock(&lock);
  int known = 0;
  for (batch *o = batches; o && !known; o = o->next) known = o->handle == handle;
  if (!known) {
    *b = (batch){handle, batches};
    batches = b;
  }
  pthread_mutex_unlock(&lock);
  if (known) free(b);
  return JX_OK;
}

void *jx_kernel_find(const char *symbol) {
  void *fn = NULL;
  pthread_mutex_lock(&lock);
  for (batch *b = batches; b && !fn; b = b->next) fn = dlsym(b->handle, symbol);
  pthread_mutex_unlock(&lock);
  return fn;
}

jx_kernel_stats jx_kernel_cache_stats(void) {
  pthread_mutex_lock(&lock);
  jx_kernel_stats s = stats;
  pthread_mutex_unlock(&lock);
  return s;
}
