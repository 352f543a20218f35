/* Meshes: named grids of devices, interned so that equal meshes are one
 * object with one number (primitive parameters name meshes by number). */
#ifndef JX_SRC_PARALLEL_MESH_H
#define JX_SRC_PARALLEL_MESH_H

#include <pthread.h>
#include <stdatomic.h>

#include <jx/parallel.h>

#define JX_MESH_NAME_CAP 64

struct jx_comm;
struct mesh_comm;

struct jx_mesh {
  atomic_int refs;
  int id; /* 1, 2, ...: the registry's number */
  int ndim;
  int64_t size[JX_MAX_RANK];
  char name[JX_MAX_RANK][JX_MESH_NAME_CAP];
  int ndev;
  int *device; /* device[p]: the global device at position p (row-major over the axes) */
  pthread_mutex_t lock;
  struct mesh_comm *comms; /* communicators made so far */
  /* In a job of several processes: the MPI communicator of every group that
   * spans processes, for every set of axes, made when the mesh is made. */
  struct mesh_mpi *mpi;
};

/* The mesh with registry number id (borrowed), or NULL. */
jx_mesh *jx_mesh_from_id(int id);
/* The index of the axis called name, or -1. */
int jx_mesh_axis_index(const jx_mesh *m, const char *name);
/* "data=4, model=2" for messages, and with devices " over devices 0,1,..."
 * when with_devices; written into buf[cap], which is returned. */
const char *jx_mesh_text(const jx_mesh *m, int with_devices, char *buf, size_t cap);
/* Position p's coordinate along each axis. */
void jx_mesh_coords(const jx_mesh *m, int p, int64_t *coords);
int jx_mesh_position(const jx_mesh *m, const int64_t *coords);

/* The communicator among the devices that share p's coordinates on every
 * axis but axes[0..n) (borrowed; made on first use); *rank is p's rank in
 * it, row-major over the axes in the order given. */
struct jx_comm *jx_mesh_comm(jx_mesh *m, const int *axes, int n, int p, int *rank);

#endif
