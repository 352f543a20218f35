/* The NCCL engine: collectives over CUDA devices on the device buffers
 * themselves, over the axes of a mesh.
 *
 * The world is every CUDA device the engine is given, in every process:
 * NCCL rank = the devices of the processes before this one + the device's
 * index here. One unique id makes it: made locally by one process, or made
 * by process 0 and broadcast over jx's distributed layer (MPI or the TCP
 * engine) when jx_distributed_initialize joined several processes.
 *
 * A mesh's device numbers are world ranks. The communicators of a set of
 * mesh axes come from ncclCommSplit of the world communicator: color = the
 * device's coordinates on the other axes, key = its position over the axes
 * named (row-major, in the order named), so rank q of an axis communicator
 * is the q-th block of an all_gather over those axes, as in JAX. They are
 * made once per (mesh, axes) and kept until jx_nccl_engine_destroy.
 *
 * Collectives run on the device's communication stream: it first waits for
 * an event recorded on the compute stream (what compute queued so far,
 * e.g. the producer of the operand), and the compute stream then waits for
 * an event recorded after the collective (its consumers). Each call then
 * waits for that event under the deadline (jx_nccl_wait): a peer that died
 * or never calls costs an error naming the collective, the mesh axes, the
 * rank and the communicator's size, and an aborted communicator, never a
 * hang. The deadline is the one of jx's CPU collectives:
 * JX_COLLECTIVE_TIMEOUT seconds (or jx_distributed_options.timeout_s), else
 * 300 s; timeout_s > 0 in a call overrides it.
 *
 * Thread safety: creation and jx_nccl_engine_axes are collective (every
 * process, same order) and made from one thread per process; collectives
 * may run from one thread per device (each device's calls from one thread
 * at a time), as NCCL allows. */
#ifndef JX_SRC_CUDA_NCCL_ENGINE_H
#define JX_SRC_CUDA_NCCL_ENGINE_H

#include <jx/array.h>
#include <jx/parallel.h>

#include "../parallel/comm.h"
#include "cuda_device.h"

typedef struct jx_nccl_engine jx_nccl_engine;
typedef struct jx_nccl_axes jx_nccl_axes; /* the communicators of a set of mesh axes */

/* Opens CUDA devices ordinals[0..n) (this process's share of the world) and
 * makes the world communicator. Errors: no NCCL or no driver
 * (JX_ERR_UNIMPLEMENTED, "NCCL not found: ..."), a bad ordinal, a failing
 * NCCL call, or the exchange of the unique id between processes. The
 * caller owns *out. */
jx_status jx_nccl_engine_create(const int *ordinals, int n, jx_nccl_engine **out);
/* Destroys every communicator (those a deadline aborted are gone already). NULL is fine. */
void jx_nccl_engine_destroy(jx_nccl_engine *e);
int jx_nccl_engine_world_size(const jx_nccl_engine *e);
int jx_nccl_engine_world_rank(const jx_nccl_engine *e, int local); /* local: index in ordinals */
jx_cuda_device *jx_nccl_engine_device(const jx_nccl_engine *e, int local);

/* The communicators over mesh m's axes axis_names[0..naxes) for every
 * device of the engine (made on the first call for this mesh and axes, by
 * ncclCommSplit; found after). Borrowed: valid until the engine goes. A
 * device the mesh lacks gets no communicator (rank -1). Errors: an unknown
 * or repeated axis, a mesh device that is not a world rank. */
jx_status jx_nccl_engine_axes(jx_nccl_engine *e, jx_mesh *m, const char *const *axis_names,
                              int naxes, jx_nccl_axes **out);
int jx_nccl_axes_size(const jx_nccl_axes *a);
int jx_nccl_axes_rank(const jx_nccl_axes *a, int local); /* -1: not in the mesh */
const char *jx_nccl_axes_label(const jx_nccl_axes *a);   /* "mesh axis 'data'" */

/* The collectives, called by every device of the axes' communicator with the
 * same arguments except buffers; `local` is the calling device's index in
 * the engine. Buffers are device pointers on that device; counts are in
 * elements of dt (f32, f64, f16, bf16, i32, and the other integer types).
 *   psum:         send[count] -> recv[count], op over the ranks
 *   all_gather:   send[count] -> recv[n*count], block q = rank q's send
 *   psum_scatter: send[n*count] -> recv[count], rank r gets block r of the reduction
 *   all_to_all:   send[n*count] -> recv[n*count], recv block q of rank r = send block r of
 *                 rank q
 *   ppermute:     pairs[k] = {source rank, destination rank}: each rank sends send[count] to
 *                 the destinations it is the source of and receives recv[count] from its
 *                 source; a rank that no pair sends to gets zeros. Sources are distinct,
 *                 destinations too.
 * Send and recv may be the same buffer for psum only. */
jx_status jx_nccl_psum(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv, size_t count,
                       jx_dtype dt, jx_reduce_op op, double timeout_s);
jx_status jx_nccl_all_gather(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                             size_t count, jx_dtype dt, double timeout_s);
jx_status jx_nccl_psum_scatter(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                               size_t count, jx_dtype dt, jx_reduce_op op, double timeout_s);
jx_status jx_nccl_all_to_all(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                             size_t count, jx_dtype dt, double timeout_s);
jx_status jx_nccl_ppermute(jx_nccl_axes *a, int local, CUdeviceptr send, CUdeviceptr recv,
                           size_t count, jx_dtype dt, const int (*pairs)[2], int npairs,
                           double timeout_s);

#endif
