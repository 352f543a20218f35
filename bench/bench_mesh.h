/* A mesh from its text, "data=4,model=2" (axis names and sizes), for the
 * benchmarks of sharded programs. */
#ifndef JX_BENCH_MESH_H
#define JX_BENCH_MESH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

/* NULL, with a message on stderr, for text that is not NAME=SIZE,... */
static inline jx_mesh *bench_mesh_parse(const char *text) {
  char names[4][32], spec[128];
  const char *ptrs[4];
  int64_t sizes[4];
  int n = 0;
  snprintf(spec, sizeof spec, "%s", text);
  for (char *tok = strtok(spec, ","); tok && n < 4; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      fprintf(stderr, "mesh '%s': '%s' is not NAME=SIZE\n", text, tok);
      return NULL;
    }
    *eq = 0;
    snprintf(names[n], sizeof names[n], "%s", tok);
    ptrs[n] = names[n];
    sizes[n++] = atoll(eq + 1);
  }
  return jx_mesh_create(jx_shape_make(n, sizes), ptrs);
}

#endif
