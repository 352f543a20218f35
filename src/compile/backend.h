/* Backends: the platforms a jitted program runs on, behind one table each.
 *
 * The compiler above the backends (jit.c, and parallel/'s sharded jit,
 * shard_map and pmap) knows a platform only through its jx_backend: it picks
 * one with jx_backend_select (JX_PLATFORM, read when a function is compiled)
 * and calls its entries; it names no platform itself. A backend's table is
 * registered once at start-up: the CPU's (backend_cpu.c) is built into the
 * registry and is the default; the CUDA backend (cuda/cuda_backend.c)
 * registers itself from a constructor. A static link keeps that object with
 * -Wl,--undefined=jx_cuda_backend, which the CMake target jx_static adds for
 * the programs linked against it (nothing else in the library names it).
 *
 * Running an attached executable: attach and mesh_attach set the program's
 * executable and its run and free functions (ir/program.h: exec, exec_run,
 * exec_free); evaluating the program (trace/eval.c) runs it, on the calling
 * thread or, for a per-device program, on each device thread of jx_spmd_run.
 *
 * Memory: a backend that keeps values in memory of its own gives each array
 * it makes there a jx_device_copy (array/array.h: download, wait, release);
 * the array layer copies a value to the host through it when something reads
 * it, and a run reads an input's copy in place. So no caller above needs a
 * copy entry. */
#ifndef JX_SRC_COMPILE_BACKEND_H
#define JX_SRC_COMPILE_BACKEND_H

#include <jx/parallel.h>
#include <stddef.h>

#include "../base/hooks.h"
#include "../ir/program.h"

typedef struct jx_backend {
  /* The platform's name, JX_PLATFORM's value for it: "cpu", "cuda". */
  const char *name;
  /* Compiles p (simplified, without shardings) for the backend's first
   * device and attaches the executable to p. dump_prefix names the JX_DUMP
   * files. A backend that cannot run here fails with an error saying what is
   * missing: there is no fall-back to another platform. Called by jit.c once
   * per signature. *times receives what the build took (fields the backend
   * does not measure stay as they were). */
  jx_status (*attach)(const jx_program *p, const char *dump_prefix, jx_compile_times *times);
  /* Donation (jx_jit_options.donate) for p's executable, which attach made:
   * per input, nonzero = a run may take the input's storage and mark the
   * caller's array donated to fn_name. Called by jit.c right after attach
   * when the function donates. */
  jx_status (*set_donation)(const jx_program *p, int nin, const int *donate, const char *fn_name);
  /* Attaches to per-device program p (the partitioner's, or a shard_map
   * body) the executables of m's positions that this process runs: p then
   * runs inside jx_spmd_run over m, each device thread running its
   * position's. what_name names the jitted function in errors. Called by
   * jx_backend_attach_mesh and jx_backend_attach_body. */
  jx_status (*mesh_attach)(const jx_program *p, jx_mesh *m, const char *what_name,
                           const char *dump_prefix);
  /* 1 when mesh_attach can run every position of m this process has; else 0
   * and why[cap] says why not ("the mesh (...) has 8 devices of this
   * process, ... but there are 4 CUDA devices"), recording no error. NULL:
   * every mesh fits. Asked by jx_backend_attach_body only. */
  int (*mesh_fits)(jx_mesh *m, char *why, size_t cap);
} jx_backend;

/* Adds b (static storage) to the registry: JX_ERR_INVALID_ARGUMENT when its
 * name is NULL, empty or taken, or an entry is missing. Thread-safe. */
jx_status jx_backend_register(const jx_backend *b);
/* The backend named name, or NULL (recording nothing). */
const jx_backend *jx_backend_find(const char *name);
/* The backend JX_PLATFORM names: unset or "" is the default, "cpu". A name
 * no backend has is JX_ERR_INVALID_ARGUMENT naming it, the function
 * (what_name: "jit of 'NAME'") and the known platforms; NULL then. */
const jx_backend *jx_backend_select(const char *what_name);

/* For a sharded jit's per-device program: the selected backend's
 * mesh_attach (errors as jx_backend_select's and mesh_attach's). */
jx_status jx_backend_attach_mesh(const jx_program *p, jx_mesh *m, const char *what_name,
                                 const char *dump_prefix);
/* For the per-device bodies of shard_map and pmap: the selected backend's
 * mesh_attach where m fits it, otherwise the CPU's, said under
 * JX_LOG_COMPILES=1 with the backend's reason. A body always runs
 * somewhere, so a JX_PLATFORM no backend has is left to the jit (the CPU's
 * here, no error). */
jx_status jx_backend_attach_body(const jx_program *p, jx_mesh *m, const char *what_name,
                                 const char *dump_prefix);

/* The CPU backend (backend_cpu.c): the executable of executable.h on the
 * calling thread, or on each CPU device's thread for a mesh. */
extern const jx_backend jx_backend_cpu;

#endif
