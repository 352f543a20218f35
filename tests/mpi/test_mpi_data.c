/* The batch loader over several processes: run by tests/mpi/run_mpi_test.sh
 * under `mpirun -np P` with JX_NUM_CPU_DEVICES=L. Oracle: a loader of one
 * process (no sharding) with the same seed, on every process. Checks:
 *   - batches sharded over "data" of a P x L mesh: gathered from all
 *     processes they equal the one-process batches, batch after batch
 *     across epoch boundaries, and again after jx_loader_seek;
 *   - each process built only its rows (jx_loader_local_rows) and its
 *     devices' shards hold exactly those rows of the one-process batch;
 *   - a mesh whose processes each hold all rows but half the columns
 *     (devices placed with jx_mesh_create_on): the same batches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "mpi_check.h"

enum { N = 40, B = 8, W = 4, SEED = 11 };

/* Examples 0..N-1: x[i] = (i, 10 i + 1, 10 i + 2, 10 i + 3), y[i] = i. */
static jx_dataset *numbered(int with_labels) {
  float x[N][W];
  int32_t y[N];
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < W; k++) x[i][k] = (float)(k ? 10 * i + k : i);
    y[i] = i;
  }
  jx_array *a[2] = {jx_array_from(JX_F32, JX_SHAPE(N, W), x),
                    jx_array_from(JX_I32, JX_SHAPE(N), y)};
  return jx_dataset_from_arrays(with_labels ? 2 : 1, a);
}

/* max |a - b| over all elements of two arrays of the same shape (as f64) */
static double max_diff(jx_array *a, jx_array *b) {
  if (jx_is_poisoned(a) || jx_is_poisoned(b) || jx_size(a) != jx_size(b)) return INFINITY;
  int64_t n = jx_size(a);
  double *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
  double d = 0;
  if (jx_read(jx_astype(a, JX_F64), x, sizeof *x * (size_t)n) ||
      jx_read(jx_astype(b, JX_F64), y, sizeof *y * (size_t)n))
    d = INFINITY;
  for (int64_t i = 0; i < n && d == 0; i++) d = fmax(d, fabs(x[i] - y[i]));
  free(x);
  free(y);
  return d;
}

/* rows r0..r1-1 and columns c0..c1-1 of a [rows, W] or [rows] array */
static jx_array *box(jx_array *a, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (jx_shape_of(a).rank == 1) return jx_slice(a, JX_SHAPE(r0), JX_SHAPE(r1), JX_SHAPE(1));
  return jx_slice(a, JX_SHAPE(r0, c0), JX_SHAPE(r1, c1), JX_SHAPE(1, 1));
}

/* "data" over a P x L mesh: process p holds rows p*B/P .. (p+1)*B/P, each
 * replicated on its L devices (positions p*L .. p*L+L-1). */
static void rows_over_processes(void) {
  jx_scope_begin();
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"data", "model"});
  jx_sharding *s = jx_sharding_create(m, "data");
  jx_dataset *d = numbered(1), *d1 = numbered(1);
  jx_loader_options o = {.batch = B, .seed = SEED, .shuffle = 1, .sharding = s};
  jx_loader_options o1 = {.batch = B, .seed = SEED, .shuffle = 1};
  jx_loader *l = jx_loader_create(d, &o), *ref = jx_loader_create(d1, &o1);
  CHECK(l && ref);
  if (!l || !ref) goto done;
  int64_t first = -1, count = jx_loader_local_rows(l, &first);
  CHECK(count == B / P && first == me * (B / P));
  int64_t one_first = -1;
  CHECK(jx_loader_local_rows(ref, &one_first) == B && one_first == 0);
  int per_epoch = (int)jx_loader_batches_per_epoch(l);
  CHECK(per_epoch == N / B);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) { /* a resumed run: jump into the second epoch */
      CHECK(jx_loader_seek(l, per_epoch + 2) == JX_OK);
      CHECK(jx_loader_seek(ref, per_epoch + 2) == JX_OK);
    }
    int nb = pass ? 4 : 2 * per_epoch + 2; /* past two epoch boundaries */
    for (int k = 0; k < nb; k++) {
      jx_scope_begin();
      jx_array *got[2], *want[2];
      CHECK(jx_loader_next(l, got) == JX_OK);
      CHECK(jx_loader_next(ref, want) == JX_OK);
      for (int a = 0; a < 2 && !jx_last_status(); a++) {
        CHECK(max_diff(jx_process_allgather(got[a]), want[a]) == 0);
        for (int j = 0; j < L; j++) { /* this process's shards: its rows, nothing else */
          jx_array *mine = jx_array_shard(got[a], me * L + j);
          CHECK(max_diff(mine, box(want[a], first, first + count, 0, W)) == 0);
        }
      }
      jx_scope_end();
    }
    CHECK(jx_loader_position(l) == jx_loader_position(ref));
  }
  /* a batch the "data" axis cannot split evenly is refused when the loader is made */
  jx_loader_options bad = {.batch = P + 1, .seed = SEED, .sharding = s};
  jx_clear_error();
  CHECK(jx_loader_create(d, &bad) == NULL);
  CHECK(strstr(jx_last_error(), "divisible") || strstr(jx_last_error(), "divide"));
  if (!strstr(jx_last_error(), "divisible") && !strstr(jx_last_error(), "divide"))
    fprintf(stderr, "process %d: error was: %s\n", me, jx_last_error());
  jx_clear_error();
done:
  jx_loader_release(l);
  jx_loader_release(ref);
  jx_dataset_release(d);
  jx_dataset_release(d1);
  jx_sharding_release(s);
  jx_mesh_release(m);
  jx_scope_end();
}

/* A mesh rows=L x cols=P whose column c is process c's devices: every
 * process holds all rows of the batch but only its W/P columns. */
static void columns_over_processes(void) {
  jx_scope_begin();
  int *ids = malloc(sizeof *ids * (size_t)(P * L));
  for (int r = 0; r < L; r++)
    for (int c = 0; c < P; c++) ids[r * P + c] = c * L + r;
  jx_mesh *m = jx_mesh_create_on(JX_SHAPE(L, P), (const char *[]){"rows", "cols"}, ids);
  jx_sharding *s = jx_sharding_create(m, "rows,cols");
  jx_dataset *d = numbered(0), *d1 = numbered(0);
  jx_loader_options o = {.batch = B, .seed = SEED + 1, .shuffle = 1, .sharding = s};
  jx_loader_options o1 = {.batch = B, .seed = SEED + 1, .shuffle = 1};
  jx_loader *l = jx_loader_create(d, &o), *ref = jx_loader_create(d1, &o1);
  CHECK(l && ref);
  int64_t first = -1;
  CHECK(l && jx_loader_local_rows(l, &first) == B && first == 0);
  for (int k = 0; l && ref && k < N / B + 1; k++) {
    jx_scope_begin();
    jx_array *got, *want;
    CHECK(jx_loader_next(l, &got) == JX_OK);
    CHECK(jx_loader_next(ref, &want) == JX_OK);
    CHECK(max_diff(jx_process_allgather(got), want) == 0);
    int64_t c0 = me * (W / P), rows = B / L;
    for (int r = 0; r < L && !jx_last_status(); r++) /* position (r, me) */
      CHECK(max_diff(jx_array_shard(got, r * P + me),
                     box(want, r * rows, (r + 1) * rows, c0, c0 + W / P)) == 0);
    jx_scope_end();
  }
  jx_loader_release(l);
  jx_loader_release(ref);
  jx_dataset_release(d);
  jx_dataset_release(d1);
  jx_sharding_release(s);
  jx_mesh_release(m);
  free(ids);
  jx_scope_end();
}

int main(void) {
  if (mpi_check_begin()) return 2;
  CHECK(P > 1 && B % P == 0 && B % L == 0 && W % P == 0);
  rows_over_processes();
  columns_over_processes();
  return mpi_check_end();
}
