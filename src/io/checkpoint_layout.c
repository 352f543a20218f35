/* Blocks of sharded arrays for checkpoints, from the public API: the
 * sharding's normalized spec ("data,None", "(data,model)") says which mesh
 * axes split each dim, and jx_mesh_device_at which device (and so which
 * process) sits at each position. */
#include "checkpoint_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ckpt_box ckpt_box_whole(jx_shape g) {
  ckpt_box b = {.rank = g.rank};
  for (int d = 0; d < g.rank; d++) b.size[d] = g.dims[d];
  return b;
}

int ckpt_box_equal(const ckpt_box *a, const ckpt_box *b) {
  if (a->rank != b->rank) return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->start[d] != b->start[d] || a->size[d] != b->size[d]) return 0;
  return 1;
}

int64_t ckpt_box_numel(const ckpt_box *b) {
  for (int d = 0; d < b->rank; d++)
    if (b->size[d] == 0) return 0; /* before any product: the others may be huge */
  int64_t n = 1;
  for (int d = 0; d < b->rank; d++) n *= b->size[d];
  return n;
}

int ckpt_box_intersect(const ckpt_box *a, const ckpt_box *b, ckpt_box *out) {
  out->rank = a->rank;
  for (int d = 0; d < a->rank; d++) {
    int64_t lo = a->start[d] > b->start[d] ? a->start[d] : b->start[d];
    int64_t ae = a->start[d] + a->size[d], be = b->start[d] + b->size[d];
    int64_t hi = ae < be ? ae : be;
    if (hi <= lo) return 0;
    out->start[d] = lo;
    out->size[d] = hi - lo;
  }
  return 1;
}

char *ckpt_block_name(const char *array, const ckpt_box *b) {
  size_t cap = strlen(array) + 2 + (size_t)b->rank * 42; /* two 19-digit bounds, ':' and ',' */
  char *buf = malloc(cap);
  if (!buf) return NULL;
  size_t len = (size_t)snprintf(buf, cap, "%s@", array);
  for (int d = 0; d < b->rank; d++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%lld:%lld", d ? "," : "",
                            (long long)b->start[d], (long long)(b->start[d] + b->size[d]));
  return buf;
}

void ckpt_copy_box(const void *src, const ckpt_box *src_box, void *dst, const ckpt_box *dst_box,
                   const ckpt_box *part, size_t es) {
  int r = part->rank;
  if (ckpt_box_numel(part) == 0) return;
  if (r == 0) {
    memcpy(dst, src, es);
    return;
  }
  /* runs along the last dim, one per index of the leading dims */
  int64_t idx[JX_MAX_RANK] = {0};
  size_t run = (size_t)part->size[r - 1] * es;
  for (;;) {
    int64_t so = 0, dof = 0;
    for (int d = 0; d < r; d++) {
      int64_t g = part->start[d] + idx[d];
      so = so * src_box->size[d] + (g - src_box->start[d]);
      dof = dof * dst_box->size[d] + (g - dst_box->start[d]);
    }
    memcpy((char *)dst + (size_t)dof * es, (const char *)src + (size_t)so * es, run);
    int d = r - 2;
    while (d >= 0 && ++idx[d] == part->size[d]) idx[d--] = 0;
    if (d < 0) break;
  }
}

/* The device and process at each position. */
static int mesh_devices(const jx_mesh *m, int n, int *device, int *process) {
  for (int p = 0; p < n; p++) {
    device[p] = jx_mesh_device_at(m, p);
    jx_device *d = device[p] >= 0 ? jx_device_get(device[p]) : NULL;
    if (!d) return 0;
    process[p] = jx_device_process_index(d);
  }
  return 1;
}

/* The mesh axes splitting each dim, from the normalized spec. */
static int parse_spec(const char *spec, const jx_mesh *m, int *naxes, int (*axis)[JX_MAX_RANK]) {
  int d = 0, depth = 0;
  char name[256];
  size_t nl = 0;
  memset(naxes, 0, sizeof *naxes * JX_MAX_RANK);
  for (const char *p = spec;; p++) {
    if (*p == '(') {
      depth++;
      continue;
    }
    if (*p == ')' || *p == ',' || *p == 0) {
      if (nl > 0) {
        name[nl] = 0;
        nl = 0;
        if (strcmp(name, "None") != 0 && strcmp(name, "_") != 0) {
          int k = 0;
          while (k < jx_mesh_ndim(m) && strcmp(jx_mesh_axis_name(m, k), name) != 0) k++;
          if (k == jx_mesh_ndim(m) || d >= JX_MAX_RANK || naxes[d] >= JX_MAX_RANK) return -1;
          axis[d][naxes[d]++] = k;
        }
      }
      if (*p == ')') depth--;
      if ((*p == ',' && depth == 0) || *p == 0) d++;
      if (*p == 0) return *spec ? d : 0;
      continue;
    }
    if (*p != ' ' && nl + 1 < sizeof name) name[nl++] = *p;
  }
}

/* 1 when process q's devices hold a copy of every block. */
static int holds_all(const ckpt_layout *l, int q) {
  for (int p = 0; p < l->n; p++) {
    int held = 0;
    for (int r = 0; r < l->n && !held; r++)
      held = l->process[r] == q && ckpt_box_equal(&l->box[r], &l->box[p]);
    if (!held) return 0;
  }
  return 1;
}

void ckpt_layout_free(ckpt_layout *l) {
  free(l->device);
  free(l->process);
  free(l->box);
  free(l->writer);
  memset(l, 0, sizeof *l);
}

jx_status ckpt_layout_of(jx_sharding *s, jx_shape g, ckpt_layout *l, const char *op) {
  memset(l, 0, sizeof *l);
  jx_mesh *m = s ? jx_sharding_mesh(s) : NULL;
  int n = m ? jx_mesh_device_count(m) : 1;
  l->n = n;
  l->device = calloc((size_t)n, sizeof *l->device);
  l->process = calloc((size_t)n, sizeof *l->process);
  l->box = calloc((size_t)n, sizeof *l->box);
  l->writer = calloc((size_t)n, sizeof *l->writer);
  if (!l->device || !l->process || !l->box || !l->writer) {
    ckpt_layout_free(l);
    return jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  }
  l->whole_by = 0;
  l->writer[0] = 1;
  l->box[0] = ckpt_box_whole(g);
  if (!s) return JX_OK;
  int naxes[JX_MAX_RANK], axis[JX_MAX_RANK][JX_MAX_RANK];
  int ndims = parse_spec(jx_sharding_spec(s), m, naxes, axis);
  if (ndims < 0 || ndims > g.rank || !mesh_devices(m, n, l->device, l->process)) {
    ckpt_layout_free(l);
    return jx_report_error(JX_ERR_INTERNAL, "%s: cannot work out the blocks of sharding '%s'", op,
                           jx_sharding_spec(s));
  }
  int nd = jx_mesh_ndim(m);
  for (int p = 0; p < n; p++) {
    int64_t c[JX_MAX_RANK], rest = p;
    for (int a = nd - 1; a >= 0; a--) {
      int64_t size = jx_mesh_axis_size(m, jx_mesh_axis_name(m, a));
      c[a] = rest % size;
      rest /= size;
    }
    ckpt_box *b = &l->box[p];
    *b = ckpt_box_whole(g);
    for (int d = 0; d < ndims; d++) {
      int64_t idx = 0, parts = 1;
      for (int k = 0; k < naxes[d]; k++) {
        int64_t size = jx_mesh_axis_size(m, jx_mesh_axis_name(m, axis[d][k]));
        idx = idx * size + c[axis[d][k]];
        parts *= size;
      }
      b->size[d] = g.dims[d] / parts;
      b->start[d] = idx * b->size[d];
    }
  }
  /* each distinct block is written by the lowest device holding it ... */
  for (int p = 0; p < n; p++) {
    int best = p;
    for (int r = 0; r < n; r++)
      if (ckpt_box_equal(&l->box[r], &l->box[p]) && l->device[r] < l->device[best]) best = r;
    l->writer[p] = best == p;
  }
  /* ... unless a process holds a copy of every block: the lowest such
   * process writes the array whole */
  l->whole_by = -1;
  for (int p = 0; p < n; p++)
    if ((l->whole_by < 0 || l->process[p] < l->whole_by) && holds_all(l, l->process[p]))
      l->whole_by = l->process[p];
  return JX_OK;
}

int ckpt_layout_local_box(const ckpt_layout *l, int process, ckpt_box *out) {
  int any = 0;
  for (int p = 0; p < l->n; p++) {
    if (l->process[p] != process) continue;
    const ckpt_box *b = &l->box[p];
    if (!any) {
      *out = *b;
      any = 1;
      continue;
    }
    for (int d = 0; d < b->rank; d++) {
      int64_t lo = out->start[d] < b->start[d] ? out->start[d] : b->start[d];
      int64_t oe = out->start[d] + out->size[d], be = b->start[d] + b->size[d];
      out->start[d] = lo;
      out->size[d] = (oe > be ? oe : be) - lo;
    }
  }
  return any;
}
