/* Devices: JX_NUM_CPU_DEVICES virtual CPU devices, each with a persistent
 * thread that runs its share of per-device programs. The thread is what
 * makes a device a device here: its programs run concurrently with the other
 * devices' and meet them only in collectives. */
#include "device.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/job.h"
#include "../base/threadpool.h"

enum { MAX_CPU_DEVICES = 1024 };

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int device_count;   /* 0 until fixed: this process's devices */
static int requested;      /* jx_set_cpu_device_count before first use */
static jx_device *devices; /* all processes' devices, by global id */
/* jx_distributed_initialize: process_index owns devices
 * process_index * device_count .. + device_count - 1 */
static int process_index;
static int any_started; /* a device thread has started: the layout is fixed */

typedef struct {
  int id; /* the global device */
  pthread_t thread;
  int started;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  jx_device_job fn; /* the posted job, NULL when idle */
  void *ctx;
  int p;
  int width; /* devices in the posted run */
  int done;
} device_thread;
static device_thread *threads; /* this process's devices' */

static int parse_env_count(void) {
  long long n;
  int got = jx_env_int("JX_NUM_CPU_DEVICES", &n);
  if (!got) return 1;
  if (got < 0 || n < 1 || n > MAX_CPU_DEVICES) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "JX_NUM_CPU_DEVICES='%s' is not a device count in 1..%d; using 1",
                 jx_env_string("JX_NUM_CPU_DEVICES"), MAX_CPU_DEVICES);
    return 1;
  }
  return (int)n;
}

int jx_devices_init(void) {
  pthread_mutex_lock(&init_lock);
  if (!device_count) {
    int n = requested ? requested : parse_env_count();
    devices = calloc((size_t)n, sizeof *devices);
    threads = calloc((size_t)n, sizeof *threads);
    if (!devices || !threads) {
      free(devices);
      free(threads);
      devices = NULL;
      threads = NULL;
      pthread_mutex_unlock(&init_lock);
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory creating %d devices", n);
      return 0;
    }
    for (int i = 0; i < n; i++) {
      devices[i] = (jx_device){.id = i, .process = 0};
      threads[i].id = i;
      pthread_mutex_init(&threads[i].lock, NULL);
      pthread_cond_init(&threads[i].cond, NULL);
    }
    device_count = n;
  }
  int n = device_count;
  pthread_mutex_unlock(&init_lock);
  return n;
}

jx_status jx_set_cpu_device_count(int n) {
  if (n < 1 || n > MAX_CPU_DEVICES)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_set_cpu_device_count: %d is not a device count in 1..%d", n,
                        MAX_CPU_DEVICES);
  pthread_mutex_lock(&init_lock);
  int fixed = device_count;
  if (!fixed) requested = n;
  pthread_mutex_unlock(&init_lock);
  if (fixed && fixed != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_set_cpu_device_count(%d): the %d devices are already in use; set "
                        "the count before the first use of devices (or JX_NUM_CPU_DEVICES)",
                        n, fixed);
  return JX_OK;
}

/* Device tables replaced by jx_devices_set_processes. */
static jx_device **retired;
static int nretired;

jx_status jx_devices_set_processes(int count, int index) {
  int local = jx_devices_init();
  if (!local) return jx_last_status();
  pthread_mutex_lock(&init_lock);
  jx_status st = JX_OK;
  if (any_started && (count != jx_job_process_count() || index != process_index)) {
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_distributed_initialize: devices are already in use; call it before the "
                      "first per-device program (shard_map, pmap, sharded jit)");
  } else if ((int64_t)count * local > MAX_CPU_DEVICES * 64) {
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_distributed_initialize: %d processes x %d devices is too many", count,
                      local);
  } else {
    /* the old table is kept (jx_device pointers handed out stay valid) and
     * stays reachable from retired, so that it is no leak */
    jx_device *all = calloc((size_t)count * (size_t)local, sizeof *all);
    jx_device **more = all ? realloc(retired, (size_t)(nretired + 1) * sizeof *more) : NULL;
    if (more) {
      retired = more;
      retired[nretired++] = devices;
    } else {
      free(all);
      all = NULL;
    }
    if (!all) {
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory creating %d devices", count * local);
    } else {
      for (int i = 0; i < count * local; i++) all[i] = (jx_device){.id = i, .process = i / local};
      for (int i = 0; i < local; i++) threads[i].id = index * local + i;
      devices = all;
      jx_job_process_count_set(count);
      process_index = index;
    }
  }
  pthread_mutex_unlock(&init_lock);
  return st;
}

int jx_device_count(void) { return jx_devices_init() * jx_job_process_count(); }
int jx_local_device_count(void) { return jx_devices_init(); }
int jx_devices_process_index(void) { return process_index; }
int jx_devices_process_count(void) { return jx_job_process_count(); }
int jx_device_is_local(int id) {
  int local = jx_devices_init();
  return local && id / local == process_index && id >= 0;
}

jx_device *jx_device_get(int i) {
  int n = jx_device_count();
  if (i < 0 || i >= n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_device_get: device %d does not exist (%d devices)", i,
                 n);
    return NULL;
  }
  return &devices[i];
}

const char *jx_device_kind(const jx_device *d) { return d ? "cpu" : "?"; }
int jx_device_id(const jx_device *d) { return d ? d->id : -1; }
int jx_device_process_index(const jx_device *d) { return d ? d->process : -1; }
static _Thread_local int run_width; /* devices in the run this device thread is in */

int jx_device_run_width(void) { return run_width; }

static void *device_main(void *arg) {
  device_thread *t = arg;
  jx_current_device_set(t->id);
  jx_scope_begin(); /* results a job leaves behind are owned by its caller, not here */
  pthread_mutex_lock(&t->lock);
  for (;;) {
    while (!t->fn) pthread_cond_wait(&t->cond, &t->lock);
    jx_device_job fn = t->fn;
    void *ctx = t->ctx;
    int p = t->p, width = t->width;
    pthread_mutex_unlock(&t->lock);
    /* when a run has at least as many devices as cores, each device's
     * kernels stay on its own thread: the cores are busy with the other
     * devices, and the shared pool (one job at a time) would serialize them;
     * a narrower run lets its devices use the pool */
    jx_pool_run_inline(width >= jx_pool_threads());
    run_width = width;
    fn(ctx, p);
    pthread_mutex_lock(&t->lock);
    t->fn = NULL;
    t->done = 1;
    pthread_cond_broadcast(&t->cond);
  }
  return NULL;
}

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;

jx_status jx_devices_run(int n, const int *devs, jx_device_job fn, void *ctx) {
  if (jx_current_device() >= 0)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "a per-device program (shard_map, pmap, sharded jit) cannot start "
                        "another one from inside device %d",
                        jx_current_device());
  int local = jx_devices_init(), first = process_index * local;
  for (int p = 0; p < n; p++)
    if (devs[p] < first || devs[p] >= first + local)
      return jx_error_set(JX_ERR_INTERNAL, "device %d is not one of process %d's", devs[p],
                          process_index);
  pthread_mutex_lock(&run_lock);
  jx_status st = JX_OK;
  for (int p = 0; p < n && !st; p++) {
    device_thread *t = &threads[devs[p] - first];
    pthread_mutex_lock(&t->lock);
    if (!t->started) {
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setstacksize(&attr, (size_t)16 << 20); /* deep programs recurse */
      if (pthread_create(&t->thread, &attr, device_main, t) == 0) {
        pthread_detach(t->thread);
        t->started = 1;
        pthread_mutex_lock(&init_lock);
        any_started = 1;
        pthread_mutex_unlock(&init_lock);
      } else {
        st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "cannot start the thread of device %d", devs[p]);
      }
      pthread_attr_destroy(&attr);
    }
    pthread_mutex_unlock(&t->lock);
  }
  if (st) {
    pthread_mutex_unlock(&run_lock);
    return st;
  }
  for (int p = 0; p < n; p++) {
    device_thread *t = &threads[devs[p] - first];
    pthread_mutex_lock(&t->lock);
    t->fn = fn;
    t->ctx = ctx;
    t->p = p;
    t->width = n;
    t->done = 0;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
  }
  for (int p = 0; p < n; p++) {
    device_thread *t = &threads[devs[p] - first];
    pthread_mutex_lock(&t->lock);
    while (!t->done) pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
  }
  pthread_mutex_unlock(&run_lock);
  return JX_OK;
}
