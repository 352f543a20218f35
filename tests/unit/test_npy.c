/* .npy files: files written by NumPy (C/Fortran order, big-endian, versions
 * 1.0-3.0, bf16 via ml_dtypes) load with the right values; jx writes the same
 * bytes as NumPy; round trips for every dtype and rank 0..8; every corrupt
 * file gives an error naming the file. Golden data: tests/golden/gen_npy.py. */
#include <complex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */
#include <jx/jx.h>

#include "array/array.h"
#include "test_util.h"

#define DIR JX_TEST_DATA "/npy/"

static void tmp_path(char *buf, size_t cap, const char *name) {
  const char *tmp = getenv("TMPDIR");
  snprintf(buf, cap, "%s/jx_test_npy_%s", tmp && *tmp ? tmp : "/tmp", name);
}

/* element k of the golden arrays; the same formula as gen_npy.py's value() */
static double value(int64_t k, jx_dtype dt) {
  switch (jx_dtype_kind(dt)) {
  case JX_KIND_BOOL: return k % 3 == 0;
  case JX_KIND_UINT: return (double)(k * 3);
  case JX_KIND_INT: return (double)(k * 5 - 40);
  default: return (double)k * 0.75 - 6.5;
  }
}
/* the imaginary part of element k of a complex test array (gen_npy.py's value) */
static double value_imag(int64_t k) { return (double)k * 0.5 - 3; }

static void numpy_files_load_in_every_layout(void **state) {
  (void)state;
  static const char *variants[] = {"c", "f", "be", "v2", "v3"};
  for (int d = 0; d < JX_NUM_DTYPES; d++) {
    jx_dtype dt = (jx_dtype)d;
    for (int v = 0; v < 5; v++) {
      if (dt == JX_BF16 && v == 2) continue; /* no big-endian bf16 in ml_dtypes */
      char path[512];
      snprintf(path, sizeof path, DIR "%s.%s.npy", jx_dtype_name(dt), variants[v]);
      jx_array *a = jx_load_npy(path);
      if (jx_is_poisoned(a)) fail_msg("%s: %s", path, jx_last_error());
      assert_int_equal(jx_dtype_of(a), dt);
      assert_true(jx_shape_equal(jx_shape_of(a), JX_SHAPE(2, 3, 4)));
      assert_false(jx_is_weak(a));
      for (int64_t k = 0; k < 24; k++) {
        double got = jx_load_f64(jx_array_data(a), dt, k);
        if (got != value(k, dt))
          fail_msg("%s element %lld: %g, expected %g", path, (long long)k, got, value(k, dt));
        if (jx_is_complex(dt) && cimag(jx_load_c128(jx_array_data(a), dt, k)) != value_imag(k))
          fail_msg("%s element %lld: imaginary part %g, expected %g", path, (long long)k,
                   cimag(jx_load_c128(jx_array_data(a), dt, k)), value_imag(k));
      }
    }
  }
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *s = malloc((size_t)len + 1);
  *n = fread(s, 1, (size_t)len, f);
  fclose(f);
  return s;
}

static void check_written(const char *name, jx_array *a) {
  char mine[512], theirs[512];
  tmp_path(mine, sizeof mine, name);
  snprintf(theirs, sizeof theirs, DIR "written.%s.npy", name);
  assert_false(jx_is_poisoned(a));
  assert_int_equal(jx_save_npy(mine, a), JX_OK);
  size_t n1, n2;
  unsigned char *b1 = slurp(mine, &n1), *b2 = slurp(theirs, &n2);
  assert_non_null(b1);
  assert_non_null(b2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0)
    fail_msg("%s: jx wrote %zu bytes, NumPy %zu; headers:\n%.*s\n%.*s", name, n1, n2,
             (int)(n1 < 128 ? n1 : 128), b1, (int)(n2 < 128 ? n2 : 128), b2);
  free(b1);
  free(b2);
  remove(mine);
}

static void jx_writes_numpy_bytes(void **state) {
  (void)state;
  check_written("f32_2x3", jx_sub(jx_reshape(jx_arange(JX_F32, 0, 6, 1), JX_SHAPE(2, 3)),
                                  jx_scalar(JX_F32, 2.5)));
  int64_t i64[5] = {1, -2, 3, -4, (int64_t)1 << 40};
  check_written("i64_5", jx_array_from(JX_I64, JX_SHAPE(5), i64));
  check_written("bool_scalar", jx_full(JX_BOOL, JX_SHAPE(), 1));
  check_written("u8_empty", jx_zeros(JX_U8, JX_SHAPE(0)));
  uint16_t b[2] = {jx_f32_to_bf16(1.5f), jx_f32_to_bf16(-2.0f)};
  check_written("bf16_2", jx_array_from(JX_BF16, JX_SHAPE(2), b));
  check_written("f64_rank8",
                jx_reshape(jx_arange(JX_F64, 0, 256, 1), JX_SHAPE(2, 2, 2, 2, 2, 2, 2, 2)));
  check_written("i16_big", jx_zeros(JX_I16, JX_SHAPE(123456789012, 0)));
  check_written("f16_3x0x2", jx_zeros(JX_F16, JX_SHAPE(3, 0, 2)));
}

/* Every dtype, ranks 0..8 (one dim of each rank 0 for empty arrays). */
static void round_trips(void **state) {
  (void)state;
  char path[512];
  tmp_path(path, sizeof path, "rt.npy");
  for (int d = 0; d < JX_NUM_DTYPES; d++) {
    jx_dtype dt = (jx_dtype)d;
    for (int rank = 0; rank <= JX_MAX_RANK; rank++) {
      for (int empty = 0; empty < (rank ? 2 : 1); empty++) {
        jx_scope_begin();
        jx_shape s = {rank, {0}};
        for (int i = 0; i < rank; i++) s.dims[i] = 1 + (i % 3);
        if (empty) s.dims[rank / 2] = 0;
        jx_array *a = jx_array_alloc(dt, s, 0);
        int64_t n = jx_shape_numel(s);
        for (int64_t k = 0; k < n; k++)
          jx_store_c128(jx_array_data(a), dt, k,
                        jx_cmplx(value(k, dt), jx_is_complex(dt) ? value_imag(k) : 0));
        assert_int_equal(jx_save_npy(path, a), JX_OK);
        jx_array *b = jx_load_npy(path);
        if (jx_is_poisoned(b)) fail_msg("%s rank %d: %s", jx_dtype_name(dt), rank, jx_last_error());
        assert_int_equal(jx_dtype_of(b), dt);
        assert_true(jx_shape_equal(jx_shape_of(b), s));
        assert_memory_equal(jx_array_data(a), jx_array_data(b), (size_t)n * jx_dtype_size(dt) + 0);
        jx_scope_end();
      }
    }
  }
  remove(path);
}

static jx_status status_named(const char *s) {
  static const struct {
    const char *name;
    jx_status st;
  } t[] = {{"CORRUPT", JX_ERR_CORRUPT},
           {"DTYPE", JX_ERR_DTYPE},
           {"SHAPE", JX_ERR_SHAPE},
           {"IO", JX_ERR_IO}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (strcmp(s, t[i].name) == 0) return t[i].st;
  fail_msg("unknown status %s", s);
  return JX_OK;
}

static void corrupt_files_give_clear_errors(void **state) {
  (void)state;
  FILE *f = fopen(DIR "corrupt.txt", "r");
  assert_non_null(f);
  char line[256], name[64], st[16], path[512];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    int off = 0;
    if (line[0] == '#' || sscanf(line, "%63s %15s %n", name, st, &off) < 2) continue;
    char *msg = line + off;
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(path, sizeof path, DIR "corrupt/%s.npy", name);
    jx_clear_error();
    jx_array *a = jx_load_npy(path);
    if (!jx_is_poisoned(a)) fail_msg("%s loaded without an error", name);
    if (jx_last_status() != status_named(st) || !strstr(jx_last_error(), msg) ||
        !strstr(jx_last_error(), path) || !strstr(jx_last_error(), "jx_load_npy"))
      fail_msg("%s: status %d, message '%s'; expected %s and '%s' naming the file", name,
               jx_last_status(), jx_last_error(), st, msg);
    n++;
  }
  fclose(f);
  assert_true(n >= 20);
}

static void io_errors(void **state) {
  (void)state;
  int line = __LINE__ + 1;
  jx_array *a = jx_load_npy(DIR "no_such_file.npy");
  assert_true(jx_is_poisoned(a));
  assert_int_equal(jx_last_status(), JX_ERR_IO);
  assert_non_null(strstr(jx_last_error(), "no_such_file.npy"));
  char where[64];
  snprintf(where, sizeof where, "test_npy.c:%d:", line);
  assert_non_null(strstr(jx_last_error(), where));
  jx_clear_error();
  assert_int_equal(jx_save_npy("/nonexistent_dir/x.npy", jx_zeros(JX_F32, JX_SHAPE(2))), JX_ERR_IO);
  assert_non_null(strstr(jx_last_error(), "/nonexistent_dir/x.npy"));
  jx_clear_error();
  assert_int_equal(jx_save_npy(NULL, jx_zeros(JX_F32, JX_SHAPE(2))), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  assert_int_equal(jx_save_npy("/tmp/x.npy", NULL), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  assert_int_equal(jx_save_npy("/tmp/x.npy", jx_poison()), JX_ERR_POISONED);
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_load_npy(NULL)));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(numpy_files_load_in_every_layout, setup, teardown),
      cmocka_unit_test_setup_teardown(jx_writes_numpy_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(round_trips, setup, teardown),
      cmocka_unit_test_setup_teardown(corrupt_files_give_clear_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(io_errors, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
