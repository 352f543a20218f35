/* Every environment variable jx reads, and the readers (env.h). The README's
 * environment table is this table rendered (tests/unit/test_env.c
 * compares them; `test_env --readme` prints the rows). */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DOCS(page) "([docs/" page "](docs/" page "))"

const jx_env_var jx_env_vars[] = {
    /* ---- compiling and caching ---- */
    {"JX_LOG_COMPILES", JX_ENV_FLAG, "0",
     "say when a function is traced again and why, and each kernel compilation"},
    {"JX_LOG_SHARDING", JX_ENV_FLAG, "0",
     "print the layouts a JX_AUTO plan chose (per input and large activation), its collectives "
     "and its estimated time and peak memory, when its per-device program is made"},
    {"JX_PLAN_TIME_LIMIT", JX_ENV_NUMBER, "10",
     "seconds of wall time a JX_AUTO plan's search may take; past them the best plan found is "
     "used, and its report says how far from the optimum's bound it may be " DOCS("parallel.md")},
    {"JX_DUMP", JX_ENV_TEXT, "no dump",
     "a directory: write every jitted program there after each pass, and its kernels' C source"},
    {"JX_CACHE_DIR", JX_ENV_TEXT, "`$XDG_CACHE_HOME/jx` or `~/.cache/jx`",
     "where compiled kernels and FFTW's wisdom (its measured FFT plans) are cached"},
    {"CC", JX_ENV_TEXT, "`cc`", "the C compiler for generated kernels"},
    {"JX_KERNEL_OPT", JX_ENV_INT, "1, then 3",
     "the optimization level (0-3) of generated kernels: the same bits at every level, lower "
     "levels compile faster and run slower; unset, a program of 16 distinct kernels or more "
     "compiles them at 1, then at 3 in the background once it has run `JX_KERNEL_TIER_UP` "
     "seconds " DOCS("compiler.md")},
    {"JX_KERNEL_TIER_UP", JX_ENV_NUMBER, "0.2",
     "seconds a program runs with its first kernels (`-O1`) before they compile at `-O3` on a "
     "thread of their own; `inf`: never " DOCS("compiler.md")},
    {"JX_JIT_KERNELS", JX_ENV_FLAG, "1",
     "`0`: jitted programs run every equation as it is: no generated code, no C compiler " DOCS(
         "compiler.md")},
    {"JX_RECOMPUTE", JX_ENV_FLAG, "1",
     "`0`: keep every forward value for the backward pass instead of recomputing cheap "
     "ones " DOCS("compiler.md")},
    {"JX_GEMM_SIDE_BY_SIDE", JX_ENV_FLAG, "1",
     "`0`: two independent GEMMs of a jitted program run one after the other instead of as one "
     "job over the pool " DOCS("compiler.md")},
    {"JX_FLASH_ATTENTION", JX_ENV_FLAG, "1",
     "`0`: jitted programs on the CPU run the attention core as its plain equations (the T x T "
     "scores stored) instead of the fused flash kernels; read when a program is compiled " DOCS(
         "performance.md")},
    {"JX_DECODE_ATTENTION", JX_ENV_FLAG, "1",
     "`0`: jitted KV-cache decode steps on the CPU run their attention as its plain equations "
     "(a masked softmax over every cache slot) instead of the kernel that reads only the filled "
     "slots; read when a program is compiled " DOCS("inference.md")},
    {"JX_DOT_SKINNY", JX_ENV_FLAG, "1",
     "`0`: f32 products narrow on one side (at most 16) run on OpenBLAS instead of jx's "
     "AVX2/FMA loops; read at the first product " DOCS("performance.md")},
    {"JX_GEMM", JX_ENV_FLAG, "1",
     "`0`: f32 GEMMs run on OpenBLAS instead of jx's packed AVX-512/AVX2 kernel; read at the "
     "first product " DOCS("performance.md")},
    {"JX_ASYNC_DISPATCH", JX_ENV_FLAG, "1",
     "`0`: `jx_call` of a jitted function waits for its results (by default it returns at once "
     "and reads wait)"},
    {"JX_PROFILE_STEPS", JX_ENV_FLAG, "0",
     "print the slowest steps of each jitted program at exit and, on the CPU, the time by kind "
     "(GEMMs with their GFLOP/s, attention, kernels, the rest), each step's and kind's also as "
     "the CPU time of the thread that ran it (on CUDA: the steps' device time) " DOCS("cuda.md")},

    /* ---- numerics and threads ---- */
    {"JX_ENABLE_X64", JX_ENV_FLAG, "0",
     "x64 JAX's dtype rules and PRNG bits (by default JAX's default mode, "
     "`jax_enable_x64=False`; explicit 64-bit arrays work in both) " DOCS(
         "dtypes.md") "; `jx_config_enable_x64` sets it from code"},
    {"JX_NUM_THREADS", JX_ENV_INT, "all cores", "threads for kernels"},
    {"JX_FFT_MEASURE", JX_ENV_FLAG, "1",
     "`0`: large FFTs are planned by FFTW's estimate instead of by measuring: no planning "
     "time and the same algorithm (so the same bits) in every process, slower "
     "transforms " DOCS("fft.md")},
    {"JX_PEAK_FLOPS", JX_ENV_NUMBER, "measured",
     "the machine's peak f32 FLOP/s that MFU is against (`jx train`, `bench_gpt`, "
     "`jx_peak_flops`); unset, it is measured once by an FMA loop on jx's threads and cached in "
     "the cache directory per CPU model and thread count"},

    /* ---- debugging ---- */
    {"JX_DEBUG_NANS", JX_ENV_FLAG, "0",
     "fail at the first primitive that makes a NaN, naming it and your `file:line` " DOCS(
         "debugging.md")},
    {"JX_DEBUG_INFS", JX_ENV_FLAG, "0",
     "fail at the first primitive that makes an Inf, naming it and your `file:line` " DOCS(
         "debugging.md")},
    {"JX_DEBUG_MEMORY", JX_ENV_FLAG, "0",
     "record which primitive made each buffer (an out-of-memory error lists the largest)"},
    {"JX_MEMORY_LIMIT_BYTES", JX_ENV_INT, "no limit",
     "cap every device at this many live bytes (an allocation past it fails as out of memory), "
     "to rehearse a smaller machine " DOCS("debugging.md")},
    {"JX_CHECKPOINT_TEST_FAULT", JX_ENV_TEXT, "no fault",
     "tests only: `crash:point` ends the process, `fail:point` fails with EIO, at one durable "
     "step of a checkpoint save " DOCS("reliability.md")},

    /* ---- devices and processes ---- */
    {"JX_NUM_CPU_DEVICES", JX_ENV_INT, "1",
     "CPU devices to expose (1 to 1024), each with its own thread and memory"},
    {"JX_COLLECTIVE_TIMEOUT", JX_ENV_NUMBER, "300",
     "seconds: the deadline of every collective; a late device is named in the error"},
    {"JX_ASYNC_COLLECTIVES", JX_ENV_FLAG, "1",
     "`0`: each collective runs when it is reached instead of being started ahead on its "
     "device's helper thread; unset: so in a run with more devices than cores, ahead in "
     "others " DOCS("parallel.md")},
    {"JX_MPI_PLUGIN", JX_ENV_TEXT, "`libjx_mpi.so` next to libjx, else on the library path",
     "the MPI engine to load for multi-process runs " DOCS("distributed.md")},
    {"JX_MPI_FUNNELED", JX_ENV_FLAG, "0",
     "the MPI plugin makes every MPI call on one thread even when MPI offers "
     "`MPI_THREAD_MULTIPLE` " DOCS("distributed.md")},
    {"JX_COORDINATOR_ADDRESS", JX_ENV_TEXT, "none",
     "`host:port`: join processes started without `mpirun` through this coordinator (process 0 "
     "serves the job's key-value store there); collectives go through shared memory within a host, "
     "over Gloo between hosts " DOCS("distributed.md")},
    {"JX_NUM_PROCESSES", JX_ENV_INT, "none",
     "with `JX_COORDINATOR_ADDRESS`: the number of processes in the job"},
    {"JX_PROCESS_ID", JX_ENV_INT, "none",
     "with `JX_COORDINATOR_ADDRESS`: this process's index, 0 to `JX_NUM_PROCESSES`-1"},
    {"JX_COORDINATOR_SERVED", JX_ENV_FLAG, "0",
     "another process (a launcher, a service of its own) serves the job's store at the "
     "coordinator address; process 0 only joins"},
    {"JX_JOB_TOKEN", JX_ENV_TEXT, "empty",
     "the job's token: the coordinator's store accepts only processes that present the same one"},
    {"JX_GLOO_PLUGIN", JX_ENV_TEXT, "`libjx_gloo.so` next to libjx, else on the library path",
     "the Gloo engine to load for processes that meet at a coordinator " DOCS("distributed.md")},
    {"JX_LOCAL_PROCESS_ID", JX_ENV_INT, "the launcher's",
     "this process's place among the job's processes on its host, which picks its GPU (`jx "
     "launch` sets it; launchers' own variables are read too)"},
    {"JX_LOCAL_PROCESS_COUNT", JX_ENV_INT, "the launcher's",
     "how many of the job's processes share this host (`jx launch` sets it)"},
    {"JX_RESTART_COUNT", JX_ENV_INT, "0",
     "set by `jx launch` for the processes it starts: how many times the job has been started "
     "again after a failure (the program may read it)"},
    {"JX_HEARTBEAT_TIMEOUT", JX_ENV_NUMBER, "30",
     "seconds without a heartbeat after which a process of a job that met at a coordinator is "
     "lost: every process fails its collectives at once with its name and ends (0: no "
     "heartbeats); a `jx launch` launcher that hears nothing from node 0's for as long stops "
     "its processes and ends " DOCS("distributed.md")},
    {"JX_HOST_ID", JX_ENV_TEXT, "the host's name, `/dev/shm` and PID namespace",
     "for tests only: the host a process of a job at a coordinator says it is on; processes "
     "with one id meet in shared memory, hosts over Gloo (one machine can act as several "
     "hosts) " DOCS("distributed.md")},
    {"JX_SHM_SINGLE_COPY", JX_ENV_INT, "16777216 (16 MiB)",
     "the size in bytes from which collectives among the processes of a host read each other's "
     "buffers directly (`process_vm_readv`, one copy) instead of copying them through the shared "
     "memory segment; 0: never " DOCS("distributed.md")},

    /* ---- CUDA ---- */
    {"JX_PLATFORM", JX_ENV_TEXT, "`cpu`",
     "`cuda`: run jitted functions on CUDA device 0 " DOCS("cuda.md")},
    {"JX_CUDA_MEMORY_CAP", JX_ENV_TEXT, "no cap",
     "the most one device's CUDA allocator holds, in use plus cached: bytes (`40G`, `512MiB`) "
     "or a share of the device (`80%`) " DOCS("cuda.md")},
    {"JX_CUDA_DRIVER_PATH", JX_ENV_TEXT, "searched",
     "the CUDA driver library to open instead of `libcuda.so.1` " DOCS("cuda.md")},
    {"JX_NVRTC_PATH", JX_ENV_TEXT, "searched",
     "the NVRTC library to open instead of looking for `libnvrtc.so` " DOCS("cuda.md")},
    {"JX_CUBLASLT_PATH", JX_ENV_TEXT, "searched",
     "the cuBLASLt library to open instead of looking for `libcublasLt.so` " DOCS("cuda.md")},
    {"JX_NCCL_PATH", JX_ENV_TEXT, "searched",
     "the NCCL library to open instead of looking for `libnccl.so.2` " DOCS("cuda.md")},
    {"JX_CUDA_NO_FUSE", JX_ENV_FLAG, "0",
     "CUDA programs compile without the hand-written fused kernels (softmax, attention, "
     "GEMM epilogues); read when a program is compiled " DOCS("cuda.md")},
    {"JX_CUDA_MODULE_SOURCE", JX_ENV_FLAG, "0",
     "tests only: hand the CUDA driver each module's source instead of NVRTC's cubin (for "
     "`tests/cuda_fake`'s driver) " DOCS("cuda.md")},
    {"JX_CUDA_MODULE_NVRTC_CHECK", JX_ENV_FLAG, "0",
     "tests only: with `JX_CUDA_MODULE_SOURCE`, NVRTC also compiles each module's source and "
     "its error fails the load " DOCS("cuda.md")},
};
const int jx_env_nvars = (int)(sizeof jx_env_vars / sizeof jx_env_vars[0]);

const jx_env_var *jx_env_find(const char *name) {
  for (int i = 0; name && i < jx_env_nvars; i++)
    if (!strcmp(jx_env_vars[i].name, name)) return &jx_env_vars[i];
  return NULL;
}

static const jx_env_var *known(const char *name) {
  const jx_env_var *v = jx_env_find(name);
#ifndef NDEBUG
  if (!v) {
    fprintf(stderr,
            "jx: the environment variable %s is read but is not in src/base/env.c's table\n",
            name ? name : "(null)");
    abort();
  }
#endif
  return v;
}

const char *jx_env_string(const char *name) {
  known(name);
  return getenv(name);
}

int jx_env_flag(const char *name) {
  const jx_env_var *var = known(name);
  const char *v = getenv(name);
  if (!v || !*v) return var && var->fallback && !strcmp(var->fallback, "1");
  return strcmp(v, "0") != 0;
}

int jx_env_int(const char *name, long long *out) {
  known(name);
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*end || errno == ERANGE) return -1;
  *out = x;
  return 1;
}

int jx_env_double(const char *name, double *out) {
  known(name);
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  double x = strtod(v, &end);
  if (*end) return -1;
  *out = x;
  return 1;
}
