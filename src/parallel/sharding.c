/* Partition specs: parsing, normalizing, and the block each device holds. */
#include "sharding.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/error.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static jx_sharding **registry; /* registry[id - 1], one reference each */
static int nregistry, cap_registry;

static void normalize(const jx_mesh *m, int ndims, const int *naxes, const int (*axis)[JX_MAX_RANK],
                      char *out) {
  size_t len = 0;
  out[0] = 0;
  for (int d = 0; d < ndims; d++) {
    len += (size_t)snprintf(out + len, JX_SPEC_CAP - len, "%s", d ? "," : "");
    if (naxes[d] == 0) len += (size_t)snprintf(out + len, JX_SPEC_CAP - len, "None");
    if (naxes[d] > 1) len += (size_t)snprintf(out + len, JX_SPEC_CAP - len, "(");
    for (int k = 0; k < naxes[d]; k++)
      len +=
          (size_t)snprintf(out + len, JX_SPEC_CAP - len, "%s%s", k ? "," : "", m->name[axis[d][k]]);
    if (naxes[d] > 1) len += (size_t)snprintf(out + len, JX_SPEC_CAP - len, ")");
  }
}

jx_sharding *jx_sharding_make(jx_mesh *m, int ndims, const int *naxes,
                              const int (*axis)[JX_MAX_RANK], const char *op) {
  if (!m) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the mesh is NULL", op);
    return NULL;
  }
  if (ndims > JX_MAX_RANK) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: a spec has at most %d entries, given %d", op,
                 JX_MAX_RANK, ndims);
    return NULL;
  }
  int used[JX_MAX_RANK] = {0};
  for (int d = 0; d < ndims; d++)
    for (int k = 0; k < naxes[d]; k++) {
      int a = axis[d][k];
      if (a < 0 || a >= m->ndim) {
        jx_error_set(JX_ERR_INTERNAL, "%s: mesh axis %d does not exist", op, a);
        return NULL;
      }
      if (used[a]++) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT,
                     "%s: the spec uses the mesh axis '%s' twice; an axis splits at most one "
                     "dim, once",
                     op, m->name[a]);
        return NULL;
      }
    }
  char text[JX_SPEC_CAP];
  normalize(m, ndims, naxes, axis, text);
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < nregistry; i++)
    if (registry[i]->mesh == m && strcmp(registry[i]->spec, text) == 0) {
      jx_sharding *s = jx_sharding_retain(registry[i]);
      pthread_mutex_unlock(&registry_lock);
      return s;
    }
  if (nregistry == cap_registry) {
    int cap = cap_registry ? 2 * cap_registry : 16;
    jx_sharding **r = realloc(registry, sizeof *r * (size_t)cap);
    if (r) {
      registry = r;
      cap_registry = cap;
    }
  }
  jx_sharding *s = nregistry < cap_registry ? calloc(1, sizeof *s) : NULL;
  if (!s) {
    pthread_mutex_unlock(&registry_lock);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  atomic_init(&s->refs, 2); /* the caller's and the registry's */
  s->mesh = jx_mesh_retain(m);
  s->ndims = ndims;
  for (int d = 0; d < ndims; d++) {
    s->naxes[d] = naxes[d];
    for (int k = 0; k < naxes[d]; k++) s->axis[d][k] = axis[d][k];
  }
  memcpy(s->spec, text, sizeof text);
  registry[nregistry++] = s;
  s->id = nregistry;
  pthread_mutex_unlock(&registry_lock);
  return s;
}

/* Reads one axis name at *c into name; returns 0 on a malformed name. */
static int read_name(const char **c, char *name) {
  size_t n = 0;
  while (isspace((unsigned char)**c)) (*c)++;
  while (isalnum((unsigned char)**c) || **c == '_') {
    if (n + 1 >= JX_MESH_NAME_CAP) return 0;
    name[n++] = *(*c)++;
  }
  name[n] = 0;
  while (isspace((unsigned char)**c)) (*c)++;
  return n > 0;
}

jx_sharding *jx_sharding_create(jx_mesh *m, const char *spec) {
  const char *op = "jx_sharding_create";
  if (!m || !spec) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", op, m ? "spec" : "mesh");
    return NULL;
  }
  int ndims = 0, naxes[JX_MAX_RANK] = {0}, axis[JX_MAX_RANK][JX_MAX_RANK];
  const char *c = spec;
  while (isspace((unsigned char)*c)) c++;
  char name[JX_MESH_NAME_CAP], mt[256];
  if (*c) {
    for (;;) {
      if (ndims == JX_MAX_RANK) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the spec '%s' has more than %d entries", op,
                     spec, JX_MAX_RANK);
        return NULL;
      }
      int group = 0;
      while (isspace((unsigned char)*c)) c++;
      if (*c == '(') {
        group = 1;
        c++;
      }
      do {
        if (group && naxes[ndims] > 0) c++; /* the ',' inside a group */
        const char *at = c;
        if (!read_name(&c, name)) {
          jx_error_set(JX_ERR_INVALID_ARGUMENT,
                       "%s: the spec '%s' is malformed at offset %d: expected an axis name, "
                       "None or (a,b)",
                       op, spec, (int)(at - spec));
          return NULL;
        }
        if (!group && (strcmp(name, "None") == 0 || strcmp(name, "_") == 0)) break;
        int a = jx_mesh_axis_index(m, name);
        if (a < 0) {
          jx_mesh_text(m, 0, mt, sizeof mt);
          jx_error_set(JX_ERR_INVALID_ARGUMENT,
                       "%s: the spec '%s' names the axis '%s', which the mesh (%s) does not "
                       "have",
                       op, spec, name, mt);
          return NULL;
        }
        axis[ndims][naxes[ndims]++] = a;
      } while (group && *c == ',');
      if (group) {
        if (*c != ')') {
          jx_error_set(JX_ERR_INVALID_ARGUMENT,
                       "%s: the spec '%s' is malformed at offset %d: expected ')'", op, spec,
                       (int)(c - spec));
          return NULL;
        }
        c++;
        while (isspace((unsigned char)*c)) c++;
      }
      ndims++;
      if (!*c) break;
      if (*c != ',') {
        jx_error_set(JX_ERR_INVALID_ARGUMENT,
                     "%s: the spec '%s' is malformed at offset %d: expected ',' between entries",
                     op, spec, (int)(c - spec));
        return NULL;
      }
      c++;
    }
  }
  return jx_sharding_make(m, ndims, naxes, (const int(*)[JX_MAX_RANK])axis, op);
}

jx_sharding *jx_sharding_replicated(jx_mesh *m) {
  jx_sharding *s = jx_sharding_make(m, 0, NULL, NULL, "jx_sharding_replicated");
  if (s) atomic_fetch_sub(&s->refs, 1); /* the registry's reference keeps it */
  return s;
}

jx_sharding *jx_sharding_retain(jx_sharding *s) {
  if (s) atomic_fetch_add(&s->refs, 1);
  return s;
}

/* The registry keeps every sharding (programs name them by number). */
void jx_sharding_release(jx_sharding *s) {
  if (s) atomic_fetch_sub(&s->refs, 1);
}

jx_sharding *jx_sharding_from_id(int id) {
  pthread_mutex_lock(&registry_lock);
  jx_sharding *s = id >= 1 && id <= nregistry ? registry[id - 1] : NULL;
  pthread_mutex_unlock(&registry_lock);
  return s;
}

jx_mesh *jx_sharding_mesh(const jx_sharding *s) { return s ? s->mesh : NULL; }
const char *jx_sharding_spec(const jx_sharding *s) { return s ? s->spec : ""; }

const char *jx_sharding_spec_shown(const jx_sharding *s) {
  return s && s->spec[0] ? s->spec : "PartitionSpec()";
}

int64_t jx_sharding_dim_parts(const jx_sharding *s, int d) {
  int64_t n = 1;
  if (d < s->ndims)
    for (int k = 0; k < s->naxes[d]; k++) n *= s->mesh->size[s->axis[d][k]];
  return n;
}

jx_status jx_sharding_check(const jx_sharding *s, jx_shape g, const char *op) {
  char sb[JX_AVAL_STR_CAP];
  if (s == jx_sharding_auto())
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: JX_AUTO is a layout only jx_jit's in_shardings and out_shardings "
                        "and jx_with_sharding_constraint inside a traced function choose; here "
                        "the sharding must be given",
                        op);
  if (s->ndims > g.rank) {
    int used = 0; /* trailing None entries beyond the rank are harmless */
    for (int d = g.rank; d < s->ndims; d++) used |= s->naxes[d] > 0;
    if (used)
      return jx_error_set(
          JX_ERR_SHAPE, "%s: the spec '%s' has %d entries but the array of shape %s has rank %d",
          op, jx_sharding_spec_shown(s), s->ndims, jx_aval_str(JX_F32, g, sb) + 3, g.rank);
  }
  for (int d = 0; d < s->ndims && d < g.rank; d++) {
    int64_t parts = jx_sharding_dim_parts(s, d);
    if (g.dims[d] % parts != 0) {
      char axes[JX_SPEC_CAP];
      size_t len = 0;
      for (int k = 0; k < s->naxes[d]; k++)
        len += (size_t)snprintf(axes + len, sizeof axes - len, "%s%s", k ? "," : "",
                                s->mesh->name[s->axis[d][k]]);
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: dim %d of shape %s has size %lld, which the mesh axes '%s' (%lld "
                          "devices) do not divide; pad it to a multiple of %lld",
                          op, d, jx_aval_str(JX_F32, g, sb) + 3, (long long)g.dims[d], axes,
                          (long long)parts, (long long)parts);
    }
  }
  return JX_OK;
}

void jx_sharding_block(const jx_sharding *s, jx_shape g, int p, int64_t *start, jx_shape *local) {
  int64_t c[JX_MAX_RANK];
  jx_mesh_coords(s->mesh, p, c);
  *local = g;
  for (int d = 0; d < g.rank; d++) {
    start[d] = 0;
    if (d >= s->ndims || s->naxes[d] == 0) continue;
    int64_t idx = 0, parts = 1;
    for (int k = 0; k < s->naxes[d]; k++) {
      int a = s->axis[d][k];
      idx = idx * s->mesh->size[a] + c[a];
      parts *= s->mesh->size[a];
    }
    local->dims[d] = g.dims[d] / parts;
    start[d] = idx * local->dims[d];
  }
}

int jx_sharding_uses_axis(const jx_sharding *s, int ax) {
  for (int d = 0; d < s->ndims; d++)
    for (int k = 0; k < s->naxes[d]; k++)
      if (s->axis[d][k] == ax) return 1;
  return 0;
}

int jx_sharding_is_first_replica(const jx_sharding *s, int p) {
  int64_t c[JX_MAX_RANK];
  jx_mesh_coords(s->mesh, p, c);
  for (int a = 0; a < s->mesh->ndim; a++)
    if (c[a] != 0 && !jx_sharding_uses_axis(s, a)) return 0;
  return 1;
}

int jx_sharding_same_layout(const jx_sharding *a, const jx_sharding *b) {
  if (a == b) return 1;
  if (!a || !b || a->mesh != b->mesh) return 0;
  int n = a->ndims > b->ndims ? a->ndims : b->ndims;
  for (int d = 0; d < n; d++) {
    int na = d < a->ndims ? a->naxes[d] : 0, nb = d < b->ndims ? b->naxes[d] : 0;
    if (na != nb) return 0;
    for (int k = 0; k < na; k++)
      if (a->axis[d][k] != b->axis[d][k]) return 0;
  }
  return 1;
}

jx_status jx_sharding_shard_shape(const jx_sharding *s, jx_shape g, jx_shape *out) {
  if (!s || !out)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_sharding_shard_shape: NULL argument");
  jx_status st = jx_sharding_check(s, g, "jx_sharding_shard_shape");
  if (st) return st;
  int64_t start[JX_MAX_RANK];
  jx_sharding_block(s, g, 0, start, out);
  return JX_OK;
}

void jx_sharding_restate_error(const char *context) {
  char msg[1024];
  const char *e = jx_last_error(), *prefix = "jx_sharding_create: ";
  if (strncmp(e, prefix, strlen(prefix)) == 0) e += strlen(prefix);
  snprintf(msg, sizeof msg, "%s", e);
  jx_status code = jx_last_status();
  jx_clear_error();
  jx_error_set(code ? code : JX_ERR_INVALID_ARGUMENT, "%s: %s", context, msg);
}
