/* jx_visualize_sharding: a text grid of an array's blocks and the devices
 * holding each, like jax.debug.visualize_array_sharding. */
#include <string.h>

#include "../base/error.h"
#include "shards.h"

enum { CELL_CAP = 256 };

/* The devices holding the block with index (bi, bj), as "CPU 0,4". */
static void cell_text(const jx_sharding *s, jx_shape g, int rank, int64_t bi, int64_t bj,
                      char *out) {
  size_t len = (size_t)snprintf(out, CELL_CAP, "CPU ");
  int any = 0;
  for (int p = 0; p < s->mesh->ndev; p++) {
    int64_t start[JX_MAX_RANK];
    jx_shape local;
    jx_sharding_block(s, g, p, start, &local);
    int64_t i = rank >= 1 && local.dims[0] ? start[0] / local.dims[0] : 0;
    int64_t j = rank >= 2 && local.dims[1] ? start[1] / local.dims[1] : 0;
    if (i != bi || j != bj) continue;
    if (len + 12 < CELL_CAP)
      len +=
          (size_t)snprintf(out + len, CELL_CAP - len, "%s%d", any ? "," : "", s->mesh->device[p]);
    any = 1;
  }
}

static void rule(FILE *f, int64_t cols, int width) {
  for (int64_t j = 0; j < cols; j++) {
    fputc('+', f);
    for (int k = 0; k < width; k++) fputc('-', f);
  }
  fputs("+\n", f);
}

void jx_visualize_sharding(const jx_array *a, FILE *f) {
  if (!f) return;
  if (!a || a->poisoned) {
    fprintf(f, "<poisoned array>\n");
    return;
  }
  char sb[JX_AVAL_STR_CAP];
  jx_aval_str(a->dtype, a->shape, sb);
  if (!jx_array_shards(a)) {
    fprintf(f, "%s on one device\n+-------+\n| CPU 0 |\n+-------+\n", sb);
    return;
  }
  const jx_sharding *s = jx_array_shards(a)->sharding;
  jx_shape g = a->shape;
  if (g.rank > 2) {
    fprintf(f, "%s sharded as '%s': only rank 1 and 2 arrays are drawn\n", sb,
            jx_sharding_spec_shown(s));
    return;
  }
  int64_t rows = g.rank >= 1 ? jx_sharding_dim_parts(s, 0) : 1;
  int64_t cols = g.rank >= 2 ? jx_sharding_dim_parts(s, 1) : 1;
  if (g.rank == 1) { /* a vector's blocks lie along one row */
    cols = rows;
    rows = 1;
  }
  char mesh[256] = "";
  size_t len = 0;
  for (int i = 0; i < s->mesh->ndim; i++)
    len += (size_t)snprintf(mesh + len, sizeof mesh - len, "%s%s=%lld", i ? ", " : "",
                            s->mesh->name[i], (long long)s->mesh->size[i]);
  fprintf(f, "%s sharded as '%s' over the mesh (%s)\n", sb, jx_sharding_spec_shown(s), mesh);
  int width = 0;
  char cell[CELL_CAP];
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      cell_text(s, g, g.rank, g.rank == 1 ? j : i, g.rank == 1 ? 0 : j, cell);
      int w = (int)strlen(cell) + 2;
      if (w > width) width = w;
    }
  for (int64_t i = 0; i < rows; i++) {
    rule(f, cols, width);
    for (int64_t j = 0; j < cols; j++) {
      cell_text(s, g, g.rank, g.rank == 1 ? j : i, g.rank == 1 ? 0 : j, cell);
      int pad = width - (int)strlen(cell);
      fprintf(f, "|%*s%s%*s", pad / 2, "", cell, pad - pad / 2, "");
    }
    fputs("|\n", f);
  }
  rule(f, cols, width);
}
