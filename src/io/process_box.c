/* Which part of a sharded batch this process builds. Uses only the public
 * API: the process of each mesh position from jx_mesh_device_at and
 * jx_device_process_index, and the rows of each dim this process holds from
 * a probe: an index vector put on the mesh with that dim's spec entry, whose
 * local shards are read. */
#include "process_box.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* owner[p]: the process of mesh position p (n positions); NULL and an
 * error when out of memory */
static int *position_owners(jx_mesh *m, int *n) {
  *n = jx_mesh_device_count(m);
  int *owner = calloc((size_t)(*n > 0 ? *n : 1), sizeof *owner);
  if (!owner) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_loader_create: out of memory");
    return NULL;
  }
  for (int p = 0; p < *n; p++)
    owner[p] = jx_device_process_index(jx_device_get(jx_mesh_device_at(m, p)));
  return owner;
}

int jx_io_sharding_spans_processes(jx_sharding *s) {
  if (jx_process_count() < 2) return 0;
  int n, *owner = position_owners(jx_sharding_mesh(s), &n);
  if (!owner) return -1;
  int spans = 0;
  for (int p = 1; p < n; p++) spans |= owner[p] != owner[0];
  free(owner);
  return spans;
}

/* The d-th entry of a normalized spec ("data,None", "(data,model),None"),
 * "None" past its end. */
static void spec_entry(const char *spec, int d, char *out, size_t cap) {
  const char *c = spec;
  for (int k = 0; k < d && *c; k++) {
    int depth = 0;
    for (; *c && (depth || *c != ','); c++) depth += (*c == '(') - (*c == ')');
    if (*c == ',') c++;
  }
  size_t i = 0;
  for (int depth = 0; *c && (depth || *c != ',') && i + 1 < cap; c++, i++) {
    depth += (*c == '(') - (*c == ')');
    out[i] = *c;
  }
  out[i] = 0;
  if (!i) snprintf(out, cap, "None");
}

/* [lo, hi) of 0..n-1 held by this process's positions under a one-dim spec */
static jx_status probe_dim(jx_mesh *m, const char *entry, int64_t n, const int *owner, int npos,
                           int64_t *lo, int64_t *hi) {
  jx_sharding *ps = jx_sharding_create(m, entry);
  if (!ps) return jx_last_status();
  jx_status st = JX_OK;
  int32_t *got = malloc(sizeof *got * (size_t)n);
  *lo = n;
  *hi = 0;
  jx_scope_begin();
  jx_array *idx = jx_device_put(jx_arange(JX_I32, 0, (double)n, 1), ps);
  for (int p = 0; p < npos && !st && got; p++) {
    if (owner[p] != jx_process_index()) continue;
    jx_array *shard = jx_array_shard(idx, p);
    int64_t k = jx_size(shard);
    st = jx_read(shard, got, sizeof *got * (size_t)k);
    for (int64_t i = 0; i < k && !st; i++) {
      if (got[i] < *lo) *lo = got[i];
      if (got[i] + 1 > *hi) *hi = got[i] + 1;
    }
  }
  jx_scope_end();
  if (!got) st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_loader_create: out of memory");
  free(got);
  jx_sharding_release(ps);
  return st;
}

jx_status jx_io_process_box(jx_sharding *s, jx_shape g, int64_t *lo, int64_t *hi) {
  jx_mesh *m = jx_sharding_mesh(s);
  int npos, *owner = position_owners(m, &npos);
  if (!owner) return jx_last_status();
  int mine = 0;
  for (int p = 0; p < npos; p++) mine |= owner[p] == jx_process_index();
  jx_status st = mine ? JX_OK
                      : jx_report_error(JX_ERR_INVALID_ARGUMENT,
                                        "jx_loader_create: the sharding's mesh has no device of "
                                        "process %d, so it has no part of the batch",
                                        jx_process_index());
  for (int d = 0; d < g.rank && !st; d++) {
    char entry[256];
    spec_entry(jx_sharding_spec(s), d, entry, sizeof entry);
    if (!strcmp(entry, "None") || !strcmp(entry, "_")) {
      lo[d] = 0;
      hi[d] = g.dims[d];
    } else {
      st = probe_dim(m, entry, g.dims[d], owner, npos, &lo[d], &hi[d]);
    }
  }
  free(owner);
  return st;
}
