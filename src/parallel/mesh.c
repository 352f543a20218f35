/* Meshes and their communicators (one per group of devices that differ
 * only along the axes a collective names, made on first use). */
#include "mesh.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/error.h"
#include "comm.h"
#include "device.h"
#include "dist.h"

typedef struct mesh_comm {
  int axes[JX_MAX_RANK], naxes;
  int64_t group_key; /* the position with the named axes' coordinates zeroed */
  jx_comm *comm;
  struct mesh_comm *next;
} mesh_comm;

/* The MPI communicator of the group of devices that differ only along the
 * axes in mask and share the coordinates of position key on the others. */
typedef struct mesh_mpi {
  unsigned mask;
  int64_t key;
  jx_mpi_comm *comm;
  struct mesh_mpi *next;
} mesh_mpi;

static jx_status make_mpi_comms(jx_mesh *m);

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static jx_mesh **registry; /* registry[id - 1], one reference each */
static int nregistry, cap_registry;

static int valid_name(const char *s) {
  if (!s || !*s || strlen(s) >= JX_MESH_NAME_CAP) return 0;
  if (!isalpha((unsigned char)s[0]) && s[0] != '_') return 0;
  for (const char *c = s; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_') return 0;
  return strcmp(s, "None") != 0 && strcmp(s, "_") != 0;
}

static int same_mesh(const jx_mesh *m, jx_shape sizes, const char *const *names, const int *devs) {
  if (m->ndim != sizes.rank) return 0;
  for (int i = 0; i < m->ndim; i++)
    if (m->size[i] != sizes.dims[i] || strcmp(m->name[i], names[i]) != 0) return 0;
  for (int p = 0; p < m->ndev; p++)
    if (m->device[p] != devs[p]) return 0;
  return 1;
}

static jx_mesh *intern(jx_shape sizes, const char *const *names, const int *devs, int ndev) {
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry; i++)
    if (same_mesh(registry[i], sizes, names, devs)) {
      jx_mesh *m = jx_mesh_retain(registry[i]);
      pthread_mutex_unlock(&registry_lock);
      return m;
    }
  jx_mesh *m = calloc(1, sizeof *m);
  int *d = malloc(sizeof *d * (size_t)ndev);
  if (nregistry == cap_registry) {
    int cap = cap_registry ? 2 * cap_registry : 8;
    jx_mesh **r = realloc(registry, sizeof *r * (size_t)cap);
    if (r) {
      registry = r;
      cap_registry = cap;
    }
  }
  if (!m || !d || nregistry == cap_registry) {
    free(m);
    free(d);
    pthread_mutex_unlock(&registry_lock);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_mesh_create: out of memory");
    return NULL;
  }
  atomic_init(&m->refs, 2); /* the caller's and the registry's */
  m->ndim = sizes.rank;
  for (int i = 0; i < m->ndim; i++) {
    m->size[i] = sizes.dims[i];
    snprintf(m->name[i], JX_MESH_NAME_CAP, "%s", names[i]);
  }
  memcpy(d, devs, sizeof *d * (size_t)ndev);
  m->ndev = ndev;
  m->device = d;
  pthread_mutex_init(&m->lock, NULL);
  if (jx_dist_active() && make_mpi_comms(m)) {
    /* the processes could not agree: the mesh is not usable */
    pthread_mutex_unlock(&registry_lock);
    free(d);
    free(m);
    return NULL;
  }
  registry[nregistry++] = m;
  m->id = nregistry;
  pthread_mutex_unlock(&registry_lock);
  return m;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* The devices of the group of p over the axes in mask, in position order. */
static int group_devices(const jx_mesh *m, unsigned mask, int p, int *devs) {
  int64_t c[JX_MAX_RANK], g[JX_MAX_RANK];
  jx_mesh_coords(m, p, c);
  int n = 0;
  for (int q = 0; q < m->ndev; q++) {
    jx_mesh_coords(m, q, g);
    int same = 1;
    for (int a = 0; a < m->ndim && same; a++) same = (mask >> a & 1) || g[a] == c[a];
    if (same) devs[n++] = m->device[q];
  }
  return n;
}

/* Every process makes the same communicators in the same order: for each
 * set of axes, each group (by its first position) whose devices belong to
 * more than one process gets one MPI_Comm_split over all processes. */
static jx_status make_mpi_comms(jx_mesh *m) {
  int local = jx_local_device_count(), me = jx_devices_process_index();
  int *devs = malloc(sizeof *devs * (size_t)m->ndev);
  int *in = calloc((size_t)jx_devices_process_count(), sizeof *in);
  if (!devs || !in) {
    free(devs);
    free(in);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_mesh_create: out of memory");
  }
  jx_status st = JX_OK;
  uint64_t base = fnv(1469598103934665603ULL, m->size, sizeof *m->size * (size_t)m->ndim);
  base = fnv(base, m->name, sizeof m->name[0] * (size_t)m->ndim);
  base = fnv(base, m->device, sizeof *m->device * (size_t)m->ndev);
  for (unsigned mask = 1; mask < 1u << m->ndim && !st; mask++) {
    for (int p = 0; p < m->ndev && !st; p++) {
      int64_t c[JX_MAX_RANK];
      jx_mesh_coords(m, p, c);
      int first = 1;
      for (int a = 0; a < m->ndim; a++) first &= !(mask >> a & 1) || c[a] == 0;
      if (!first) continue;
      int n = group_devices(m, mask, p, devs), nproc = 0;
      memset(in, 0, sizeof *in * (size_t)jx_devices_process_count());
      for (int k = 0; k < n; k++) nproc += !in[devs[k] / local]++;
      if (nproc < 2) continue;
      char label[128];
      snprintf(label, sizeof label, "a mesh's group of %d devices from device %d", n, devs[0]);
      uint64_t check = fnv(fnv(base, &mask, sizeof mask), &p, sizeof p);
      jx_mpi_comm *mc = NULL;
      st = jx_dist_split(in[me] > 0, me, check, label, &mc);
      if (!st && mc) {
        mesh_mpi *e = calloc(1, sizeof *e);
        if (!e) {
          st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_mesh_create: out of memory");
          break;
        }
        *e = (mesh_mpi){mask, p, mc, m->mpi};
        m->mpi = e;
      }
    }
  }
  free(devs);
  free(in);
  return st;
}

jx_mesh *jx_mesh_create_on(jx_shape sizes, const char *const *names, const int *devs) {
  int count = jx_device_count();
  if (!count) return NULL;
  if (sizes.rank < 1 || sizes.rank > JX_MAX_RANK) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: a mesh has 1 to %d axes, given %d",
                 JX_MAX_RANK, sizes.rank);
    return NULL;
  }
  if (!names) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: axis_names is NULL");
    return NULL;
  }
  int64_t ndev = 1;
  for (int i = 0; i < sizes.rank; i++) {
    if (!valid_name(names[i])) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "jx_mesh_create: axis %d's name '%s' is not an identifier (letters, digits, "
                   "'_'; not None)",
                   i, names[i] ? names[i] : "(null)");
      return NULL;
    }
    for (int j = 0; j < i; j++)
      if (strcmp(names[i], names[j]) == 0) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: the axis name '%s' is used twice",
                     names[i]);
        return NULL;
      }
    if (sizes.dims[i] < 1) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: axis '%s' has size %lld", names[i],
                   (long long)sizes.dims[i]);
      return NULL;
    }
    ndev *= sizes.dims[i];
    if (ndev > count) break;
  }
  if (ndev > count) {
    char sb[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_mesh_create: a mesh of shape %s needs more devices than the %d there are "
                 "(JX_NUM_CPU_DEVICES sets the count)",
                 jx_aval_str(JX_F32, sizes, sb) + 3, count);
    return NULL;
  }
  for (int p = 0; p < ndev; p++) {
    if (devs[p] < 0 || devs[p] >= count) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: device %d does not exist (%d devices)",
                   devs[p], count);
      return NULL;
    }
    for (int q = 0; q < p; q++)
      if (devs[q] == devs[p]) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_mesh_create: device %d appears twice", devs[p]);
        return NULL;
      }
  }
  return intern(sizes, names, devs, (int)ndev);
}

jx_mesh *jx_mesh_create(jx_shape sizes, const char *const *names) {
  int count = jx_device_count();
  if (!count) return NULL;
  int *devs = malloc(sizeof *devs * (size_t)count);
  if (!devs) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_mesh_create: out of memory");
    return NULL;
  }
  for (int i = 0; i < count; i++) devs[i] = i;
  jx_mesh *m = jx_mesh_create_on(sizes, names, devs);
  free(devs);
  return m;
}

jx_mesh *jx_mesh_retain(jx_mesh *m) {
  if (m) atomic_fetch_add(&m->refs, 1);
  return m;
}

/* The registry keeps every mesh (programs name meshes by number), so the
 * count never reaches zero: releasing only drops the caller's claim. */
void jx_mesh_release(jx_mesh *m) {
  if (m) atomic_fetch_sub(&m->refs, 1);
}

jx_mesh *jx_mesh_from_id(int id) {
  pthread_mutex_lock(&registry_lock);
  jx_mesh *m = id >= 1 && id <= nregistry ? registry[id - 1] : NULL;
  pthread_mutex_unlock(&registry_lock);
  return m;
}

int jx_mesh_ndim(const jx_mesh *m) { return m ? m->ndim : 0; }
const char *jx_mesh_axis_name(const jx_mesh *m, int i) {
  return m && i >= 0 && i < m->ndim ? m->name[i] : NULL;
}
const char *jx_mesh_text(const jx_mesh *m, int with_devices, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < m->ndim && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%s=%lld", i ? ", " : "", m->name[i],
                            (long long)m->size[i]);
  for (int p = 0; with_devices && p < m->ndev && len < cap; p++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%d", p ? "," : " over devices ", m->device[p]);
  return buf;
}

int jx_mesh_axis_index(const jx_mesh *m, const char *name) {
  for (int i = 0; m && name && i < m->ndim; i++)
    if (strcmp(m->name[i], name) == 0) return i;
  return -1;
}
int64_t jx_mesh_axis_size(const jx_mesh *m, const char *name) {
  int i = jx_mesh_axis_index(m, name);
  return i < 0 ? -1 : m->size[i];
}
int jx_mesh_device_count(const jx_mesh *m) { return m ? m->ndev : 0; }

int jx_mesh_device_at(const jx_mesh *m, int position) {
  if (!m || position < 0 || position >= m->ndev) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_mesh_device_at: position %d is outside a mesh of %d devices", position,
                 m ? m->ndev : 0);
    return -1;
  }
  return m->device[position];
}

void jx_mesh_coords(const jx_mesh *m, int p, int64_t *coords) {
  for (int i = m->ndim - 1; i >= 0; i--) {
    coords[i] = p % m->size[i];
    p /= (int)m->size[i];
  }
}

int jx_mesh_position(const jx_mesh *m, const int64_t *coords) {
  int64_t p = 0;
  for (int i = 0; i < m->ndim; i++) p = p * m->size[i] + coords[i];
  return (int)p;
}

/* A group within one process meets in shared memory; one that spans
 * processes gets the hierarchical engine over its MPI communicator. */
static jx_comm *make_comm(jx_mesh *m, const int *axes, int n, int64_t key, int size,
                          const char *label, const int *devs) {
  unsigned mask = 0;
  for (int k = 0; k < n; k++) mask |= 1u << axes[k];
  mesh_mpi *e = m->mpi;
  while (e && (e->mask != mask || e->key != key)) e = e->next;
  if (!e) return jx_comm_local_create(size, label, devs);
  int *proc = malloc(sizeof *proc * (size_t)size);
  if (!proc) return NULL;
  for (int q = 0; q < size; q++) proc[q] = jx_device_process_index(jx_device_get(devs[q]));
  jx_comm *c = jx_comm_hier_create(size, label, devs, proc, jx_devices_process_index(), e->comm);
  free(proc);
  return c;
}

jx_comm *jx_mesh_comm(jx_mesh *m, const int *axes, int n, int p, int *rank) {
  int64_t c[JX_MAX_RANK];
  jx_mesh_coords(m, p, c);
  int64_t r = 0, size = 1;
  for (int k = 0; k < n; k++) {
    r = r * m->size[axes[k]] + c[axes[k]];
    size *= m->size[axes[k]];
    c[axes[k]] = 0;
  }
  *rank = (int)r;
  int64_t key = jx_mesh_position(m, c);
  pthread_mutex_lock(&m->lock);
  mesh_comm *e = m->comms;
  for (; e; e = e->next)
    if (e->naxes == n && e->group_key == key &&
        memcmp(e->axes, axes, sizeof *axes * (size_t)n) == 0)
      break;
  if (!e) {
    /* the group's devices, in rank order */
    int *devs = malloc(sizeof *devs * (size_t)size);
    e = calloc(1, sizeof *e);
    char label[JX_MAX_RANK * (JX_MESH_NAME_CAP + 1) + 16];
    int len = snprintf(label, sizeof label, "mesh axis '");
    for (int k = 0; k < n; k++)
      len +=
          snprintf(label + len, sizeof label - (size_t)len, "%s%s", k ? "," : "", m->name[axes[k]]);
    snprintf(label + len, sizeof label - (size_t)len, "'");
    if (devs && e) {
      for (int64_t q = 0; q < size; q++) {
        int64_t rest = q;
        for (int k = n - 1; k >= 0; k--) {
          c[axes[k]] = rest % m->size[axes[k]];
          rest /= m->size[axes[k]];
        }
        devs[q] = m->device[jx_mesh_position(m, c)];
      }
      e->comm = make_comm(m, axes, n, key, (int)size, label, devs);
    }
    free(devs);
    if (!e || !e->comm) {
      free(e);
      pthread_mutex_unlock(&m->lock);
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory making a communicator for %s", label);
      return NULL;
    }
    memcpy(e->axes, axes, sizeof *axes * (size_t)n);
    e->naxes = n;
    e->group_key = key;
    e->next = m->comms;
    m->comms = e;
  }
  pthread_mutex_unlock(&m->lock);
  return e->comm;
}

/* jx_mesh_print: the grid, one row per position of every axis but the last
 * (labelled by those coordinates), one column per position of the last;
 * each cell is the device there and the process that owns it. */
void jx_mesh_print(const jx_mesh *m, FILE *f) {
  if (!f) return;
  if (!m) {
    fprintf(f, "<null mesh>\n");
    return;
  }
  int nproc = 0, seen[64] = {0};
  for (int p = 0; p < m->ndev; p++) {
    jx_device *d = jx_device_get(m->device[p]);
    int pi = d ? jx_device_process_index(d) : 0;
    if (pi >= 0 && pi < 64 && !seen[pi]++) nproc++;
  }
  fprintf(f, "mesh");
  for (int a = 0; a < m->ndim; a++)
    fprintf(f, "%s %s=%lld", a ? " x" : "", m->name[a], (long long)m->size[a]);
  fprintf(f, " (%d devices, %d process%s)\n", m->ndev, nproc, nproc == 1 ? "" : "es");
  int last = m->ndim - 1;
  int64_t cols = m->size[last], rows = m->ndev / (cols ? cols : 1);
  char label[256];
  int lw = 0; /* the row labels' width */
  for (int64_t r = 0; r < rows; r++) {
    int64_t c[JX_MAX_RANK];
    jx_mesh_coords(m, (int)(r * cols), c);
    int len = 0;
    for (int a = 0; a < last; a++)
      len += snprintf(label + len, sizeof label - (size_t)len, "%s%s=%lld", a ? " " : "",
                      m->name[a], (long long)c[a]);
    if (len > lw) lw = len;
  }
  fprintf(f, "%*s", lw, "");
  for (int64_t c = 0; c < cols; c++) {
    char h[96];
    snprintf(h, sizeof h, "%s=%lld", m->name[last], (long long)c);
    fprintf(f, "  %-14s", h);
  }
  fprintf(f, "\n");
  for (int64_t r = 0; r < rows; r++) {
    int64_t c[JX_MAX_RANK];
    jx_mesh_coords(m, (int)(r * cols), c);
    int len = 0;
    label[0] = '\0';
    for (int a = 0; a < last; a++)
      len += snprintf(label + len, sizeof label - (size_t)len, "%s%s=%lld", a ? " " : "",
                      m->name[a], (long long)c[a]);
    fprintf(f, "%-*s", lw, label);
    for (int64_t k = 0; k < cols; k++) {
      int dev = m->device[r * cols + k];
      jx_device *d = jx_device_get(dev);
      char cell[32];
      snprintf(cell, sizeof cell, "dev %d (p%d)", dev, d ? jx_device_process_index(d) : 0);
      fprintf(f, "  %-14s", cell);
    }
    fprintf(f, "\n");
  }
}
