/* Checkpoints under faults and hostile directories: a re-save crashed or
 * failed at each of its durable steps (the JX_CHECKPOINT_TEST_FAULT hook)
 * leaves a loadable step; links are never followed, replaced or removed
 * through; FIFOs and other non-regular files are refused, not waited on;
 * names of any length round-trip; manifests claiming absurd sizes, steps or
 * block counts, and safetensors shapes whose size wraps, get clear errors
 * (before any allocation, in O(n log n));
 * crashed saves' leftovers go at the next save; jx_checkpoint_latest names
 * only steps jx_checkpoint_load finds; load errors carry the caller's
 * file:line. */
#define _GNU_SOURCE /* mkdtemp, setenv, O_DIRECTORY */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "io/checkpoint_internal.h"
#include "io/safetensors.h"
#include "test_util.h"

static char root[256];

static const char *path_in(const char *name) {
  static char path[2][512];
  static int which;
  which ^= 1;
  snprintf(path[which], sizeof path[which], "%s/%s", root, name);
  return path[which];
}

/* A one-array tree: v filled with `value`. */
static jx_tree *tree_of(float value) {
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "v", jx_full(JX_F32, JX_SHAPE(3, 4), value));
  return t;
}

/* The value of array v in dir's step (every element checked); -1 when it
 * does not load. */
static float loaded_value(const char *dir, int64_t step) {
  jx_tree *t = jx_checkpoint_load(dir, step, NULL);
  if (!t) return -1;
  float x[12];
  check_ok(jx_read(jx_tree_get(t, "v"), x, sizeof x));
  for (int i = 1; i < 12; i++) assert_true(x[i] == x[0]);
  jx_tree_release(t);
  return x[0];
}

/* The names in dir, sorted, joined by spaces. */
static void listing(const char *dir, char *out, size_t cap) {
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  assert_true(n >= 0);
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, ".."))
      len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? " " : "", names[i]->d_name);
    free(names[i]);
  }
  free(names);
}

static void assert_listing(const char *dir, const char *want) {
  char got[1024];
  listing(dir, got, sizeof got);
  if (strcmp(got, want)) fprintf(stderr, "'%s' holds: %s\n", dir, got);
  assert_string_equal(got, want);
}

static void rm_rf(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  assert_int_equal(system(cmd), 0);
}

/* A save's durable steps, in order; a crash or failure from fsync:dir on
 * finds the new step in place (before it, the old one). */
static const char *const POINTS[] = {"fsync:process_0.safetensors",
                                     "fsync:process_0.json",
                                     "fsync:manifest.json",
                                     "fsync:step",
                                     "rename:aside",
                                     "rename:into-place",
                                     "fsync:dir",
                                     "remove:old"};
enum { NPOINTS = sizeof POINTS / sizeof POINTS[0], FIRST_NEW = 6 };

/* Step 1 saved as 1.0, then saved again as 2.0 by a child process that
 * dies just before each durable step: step 1 loads whole (the old values
 * before the new step is in place, the new ones after), and the next save
 * leaves nothing behind. */
static void resave_survives_a_crash_at_every_point(void **state) {
  (void)state;
  for (int p = 0; p < NPOINTS; p++) {
    const char *dir = path_in("crash");
    rm_rf(dir);
    jx_tree *t1 = tree_of(1), *t2 = tree_of(2);
    check_ok(jx_checkpoint_save(dir, 1, t1));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      char v[64];
      snprintf(v, sizeof v, "crash:%s", POINTS[p]);
      setenv("JX_CHECKPOINT_TEST_FAULT", v, 1);
      jx_checkpoint_save(dir, 1, t2);
      _exit(0); /* not reached: the save ends the process first */
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("crash at %s: ", POINTS[p]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 77);
    assert_int_equal(jx_checkpoint_latest(dir), 1);
    float want = p >= FIRST_NEW ? 2 : 1;
    assert_true(loaded_value(dir, 1) == want);
    printf("step 1 holds %g\n", want);
    check_ok(jx_checkpoint_save(dir, 2, t2));
    assert_listing(dir, "step_00000001 step_00000002");
    jx_tree_release(t1);
    jx_tree_release(t2);
  }
}

/* The same with each step failing instead: the save reports it, and step 1
 * keeps whole values; a failure after the new step is in place reports the
 * flush (fsync:dir) or nothing (removing the old copy is tidying up). */
static void resave_fails_cleanly_at_every_point(void **state) {
  (void)state;
  for (int p = 0; p < NPOINTS; p++) {
    const char *dir = path_in("fail");
    rm_rf(dir);
    jx_tree *t1 = tree_of(1), *t2 = tree_of(2);
    check_ok(jx_checkpoint_save(dir, 1, t1));
    char v[64];
    snprintf(v, sizeof v, "fail:%s", POINTS[p]);
    setenv("JX_CHECKPOINT_TEST_FAULT", v, 1);
    jx_status st = jx_checkpoint_save(dir, 1, t2);
    unsetenv("JX_CHECKPOINT_TEST_FAULT");
    printf("fail at %s: %s\n", POINTS[p], st ? jx_last_error() : "(saved)");
    if (strcmp(POINTS[p], "remove:old") == 0) {
      check_ok(st);
    } else {
      assert_int_equal(st, JX_ERR_IO);
      assert_error_has("Input/output error");
    }
    float want = p >= FIRST_NEW ? 2 : 1;
    assert_true(loaded_value(dir, 1) == want);
    check_ok(jx_checkpoint_save(dir, 2, t2));
    assert_listing(dir, "step_00000001 step_00000002");
    jx_tree_release(t1);
    jx_tree_release(t2);
  }
}

/* A step directory that is a link to another checkpoint's step: saving
 * over it, loading it and counting it as a step are refused, and the
 * link's target keeps its files; removing a
 * step removes links in it, never their targets; a link in place of a
 * step's file is refused on load. */
static void links_are_never_followed(void **state) {
  (void)state;
  const char *a = path_in("link-a"), *b = path_in("link-b");
  char link[600], target[600], file[700];
  jx_tree *t1 = tree_of(1), *t2 = tree_of(2);
  check_ok(jx_checkpoint_save(b, 1, t1));
  mkdir(a, 0755);
  snprintf(link, sizeof link, "%s/step_00000001", a);
  snprintf(target, sizeof target, "%s/step_00000001", b);
  assert_int_equal(symlink(target, link), 0);
  assert_int_equal(jx_checkpoint_save(a, 1, t2), JX_ERR_IO);
  assert_error_has("step_00000001' is a symbolic link");
  assert_true(loaded_value(b, 1) == 1);
  assert_listing(target, "manifest.json process_0.safetensors");
  assert_true(loaded_value(a, 1) == -1); /* nor loaded through it */
  assert_error_has("step_00000001' is a symbolic link");
  assert_int_equal(jx_checkpoint_latest(a), -1);

  ckpt_remove_dir(link); /* a link is left as it is, its target untouched */
  assert_listing(target, "manifest.json process_0.safetensors");
  assert_int_equal(unlink(link), 0);

  /* a step holding a link to a file elsewhere: removed as a link */
  check_ok(jx_checkpoint_save(a, 1, t1));
  snprintf(file, sizeof file, "%s/process_0.safetensors", link);
  assert_int_equal(unlink(file), 0);
  snprintf(target, sizeof target, "%s/step_00000001/process_0.safetensors", b);
  assert_int_equal(symlink(target, file), 0);
  assert_true(loaded_value(a, 1) == -1);
  assert_error_has("process_0.safetensors' is a symbolic link");
  check_ok(jx_checkpoint_save(a, 1, t2));
  assert_true(loaded_value(a, 1) == 2);
  assert_true(loaded_value(b, 1) == 1);
  jx_tree_release(t1);
  jx_tree_release(t2);
}

/* A FIFO in place of a step's manifest or data file is an error at once,
 * not a loader waiting forever for a writer (the alarm ends a hung test). */
static void fifos_are_refused_at_once(void **state) {
  (void)state;
  const char *files[] = {"manifest.json", "process_0.safetensors"};
  jx_tree *t = tree_of(1);
  for (int i = 0; i < 2; i++) {
    const char *dir = path_in("fifo");
    rm_rf(dir);
    check_ok(jx_checkpoint_save(dir, 1, t));
    char path[700];
    snprintf(path, sizeof path, "%s/step_00000001/%s", dir, files[i]);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0644), 0);
    alarm(20);
    assert_true(loaded_value(dir, 1) == -1);
    alarm(0);
    char want[200];
    snprintf(want, sizeof want, "%s' is not a regular file", files[i]);
    assert_error_has(want);
  }
  jx_tree_release(t);
}

/* Two names of 2,000 characters that differ only at the end: both saved
 * whole, whole arrays and blocks alike. */
static void long_names_are_saved_whole(void **state) {
  (void)state;
  char a[2001], b[2001];
  memset(a, 'x', 2000);
  a[2000] = 0;
  memcpy(b, a, sizeof a);
  b[1999] = 'y';
  jx_mesh *m = jx_mesh_create_on(JX_SHAPE(2), (const char *[]){"data"}, (const int[]){0, 1});
  jx_sharding *rows = jx_sharding_create(m, "data");
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, a, jx_full(JX_F32, JX_SHAPE(2, 2), 1));
  jx_tree_set(t, b, jx_device_put(jx_full(JX_F32, JX_SHAPE(2, 2), 2), rows));
  const char *dir = path_in("long");
  for (int split = 0; split < 2; split++) {
    ckpt_save_options o = {.split_blocks = split};
    check_ok(ckpt_save_with(dir, 1, t, &o));
    jx_tree *u = jx_checkpoint_load(dir, 1, NULL);
    if (!u) fprintf(stderr, "%s\n", jx_last_error());
    assert_non_null(u);
    float x[4], y[4];
    check_ok(jx_read(jx_tree_get(u, a), x, sizeof x));
    check_ok(jx_read(jx_tree_get(u, b), y, sizeof y));
    for (int i = 0; i < 4; i++) assert_true(x[i] == 1 && y[i] == 2);
    jx_tree_release(u);
  }
  /* a directory name longer than a path can be is refused, not cut short */
  char deep[5000];
  memset(deep, 'd', sizeof deep - 1);
  deep[sizeof deep - 1] = 0;
  assert_int_equal(jx_checkpoint_save(deep, 1, t), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("dir is 4999 characters long; at most 4032 are supported");
  jx_tree_release(t);
  jx_sharding_release(rows);
  jx_mesh_release(m);
}

/* Rewrites the manifest of dir's step 1 with edit applied. */
static void edit_manifest(const char *dir, void (*edit)(cJSON *)) {
  char path[700];
  snprintf(path, sizeof path, "%s/step_00000001/manifest.json", dir);
  cJSON *m = ckpt_read_json(path, NULL);
  assert_non_null(m);
  edit(m);
  char *text = cJSON_PrintUnformatted(m);
  check_ok(ckpt_write_text(path, text));
  free(text);
  cJSON_Delete(m);
}

static cJSON *entry(cJSON *m) { return cJSON_GetArrayItem(cJSON_GetObjectItem(m, "arrays"), 0); }
static cJSON *dims(double a, double b) {
  cJSON *d = cJSON_CreateArray();
  cJSON_AddItemToArray(d, cJSON_CreateNumber(a));
  cJSON_AddItemToArray(d, cJSON_CreateNumber(b));
  return d;
}

/* 80,000 empty blocks beside the real one (an O(n^2) check takes 13 s) */
static void add_empty_blocks(cJSON *m) {
  cJSON *blocks = cJSON_GetObjectItem(entry(m), "blocks");
  for (int i = 0; i < 80000; i++) {
    cJSON *b = cJSON_Duplicate(cJSON_GetArrayItem(blocks, 0), 1);
    cJSON_ReplaceItemInObject(b, "shape", dims(0, 4));
    cJSON_AddItemToArray(blocks, b);
  }
}
/* 2^22 x 2^22 f32 (64 TiB) in one block of the 48-byte file */
static void claim_64_tib(cJSON *m) {
  cJSON_ReplaceItemInObject(entry(m), "shape", dims(4194304, 4194304));
  cJSON *b = cJSON_GetArrayItem(cJSON_GetObjectItem(entry(m), "blocks"), 0);
  cJSON_ReplaceItemInObject(b, "shape", dims(4194304, 4194304));
}
/* 9e15 x 9e15: more bytes than an int64 counts (UBSan: signed overflow) */
static void claim_overflow(cJSON *m) {
  cJSON_ReplaceItemInObject(entry(m), "shape", dims(9e15, 9e15));
}
/* 0 x 9e15 x 9e15: no elements, but dims no array could have (NumPy
 * refuses the product of the non-zero dims too) */
static void claim_empty_overflow(cJSON *m) {
  cJSON_ReplaceItemInObject(entry(m), "shape", dims(0, 9e15));
  cJSON *shape = cJSON_GetObjectItem(entry(m), "shape");
  cJSON_AddItemToArray(shape, cJSON_CreateNumber(9e15));
}
/* step 1e301 (UBSan: a float-to-int cast out of range) */
static void claim_huge_step(cJSON *m) {
  cJSON_ReplaceItemInObject(m, "step", cJSON_CreateNumber(1e301));
}

static void hostile_manifests_get_clear_errors(void **state) {
  (void)state;
  const char *dir = path_in("manifest");
  jx_tree *t = tree_of(1);

  /* the coverage check alone (parsing 12 MB of JSON is not what is timed) */
  check_ok(jx_checkpoint_save(dir, 1, t));
  char path[700];
  snprintf(path, sizeof path, "%s/step_00000001/manifest.json", dir);
  cJSON *m = ckpt_read_json(path, NULL);
  assert_non_null(m);
  add_empty_blocks(m);
  struct timespec t0, t1;
  ckpt_entry e;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  check_ok(ckpt_entry_read(m, "v", path, "test", &e));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_int_equal(e.nblocks, 80001);
  ckpt_entry_free(&e);
  cJSON_Delete(m);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  printf("80,001 blocks read and checked in %.3f s\n", s);
  assert_true(s < 6); /* 2 s with ASan on a busy machine; the O(n^2) check took 13 s without */

  check_ok(jx_checkpoint_save(dir, 1, t));
  edit_manifest(dir, claim_64_tib);
  assert_true(loaded_value(dir, 1) == -1);
  assert_error_has("step_00000001/process_0.safetensors' is corrupt or truncated: the manifest "
                   "says it holds 70368744177664 bytes of array 'v' but it holds 48");

  check_ok(jx_checkpoint_save(dir, 1, t));
  edit_manifest(dir, claim_overflow);
  assert_true(loaded_value(dir, 1) == -1);
  assert_error_has("array 'v' has a shape too large to exist");

  check_ok(jx_checkpoint_save(dir, 1, t));
  edit_manifest(dir, claim_empty_overflow);
  assert_true(loaded_value(dir, 1) == -1);
  assert_error_has("array 'v' has a shape too large to exist");

  check_ok(jx_checkpoint_save(dir, 1, t));
  edit_manifest(dir, claim_huge_step);
  assert_true(loaded_value(dir, 1) == -1);
  assert_error_has("manifest.json' is for another step");
  jx_tree_release(t);
}

/* A safetensors header whose shape's element count wraps (2^50 x 2^14 is
 * 2^64: 0 in 64 bits) or hides behind a zero dim is refused, not read as an
 * empty tensor of an impossible shape. */
static void safetensors_shapes_that_wrap_are_refused(void **state) {
  (void)state;
  const char *shapes[] = {"[1125899906842624, 16384]", "[0, 1125899906842624, 1125899906842624]"};
  for (int i = 0; i < 2; i++) {
    char header[200], path[600];
    int n = snprintf(header, sizeof header,
                     "{\"t\": {\"dtype\": \"F32\", \"shape\": %s, \"data_offsets\": [0, 0]}}",
                     shapes[i]);
    snprintf(path, sizeof path, "%s/wrap.safetensors", root);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned char len[8] = {(unsigned char)n};
    fwrite(len, 1, 8, f);
    fwrite(header, 1, (size_t)n, f);
    fclose(f);
    jx_safetensors *st = jx_safetensors_open(path, "test");
    assert_non_null(st);
    uint64_t sum;
    assert_null(jx_safetensors_read(st, "t", &sum, "test"));
    assert_error_has("tensor 't': corrupt header: shape too large");
    jx_safetensors_close(st);
  }
}

/* Leftovers of crashed saves (a temporary step, an old copy whose step is
 * back in place) go at the next save; a directory another save holds
 * locked stays. */
static void crashed_saves_leftovers_are_removed(void **state) {
  (void)state;
  const char *dir = path_in("leftovers");
  jx_tree *t = tree_of(1);
  check_ok(jx_checkpoint_save(dir, 1, t));
  const char *names[] = {".step_00000003.tmp.4242.0", ".step_00000001.old.4242.1",
                         ".step_00000004.tmp.4243.0"};
  char path[700];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/%s/process_0.json", dir, names[i]);
    check_ok(ckpt_write_text(path, "{}"));
  }
  snprintf(path, sizeof path, "%s/%s", dir, names[2]);
  int busy = ckpt_lock_dir(path); /* as a save running elsewhere holds it */
  assert_true(busy >= 0);
  check_ok(jx_checkpoint_save(dir, 2, t));
  assert_listing(dir, ".step_00000004.tmp.4243.0 step_00000001 step_00000002");
  close(busy);
  check_ok(jx_checkpoint_save(dir, 3, t));
  assert_listing(dir, "step_00000001 step_00000002 step_00000003");
  jx_tree_release(t);
}

/* jx_checkpoint_latest names a step jx_checkpoint_load finds: step_5 is
 * not how a step is spelt, so it is not one. */
static void latest_and_load_agree_on_names(void **state) {
  (void)state;
  const char *dir = path_in("names");
  jx_tree *t = tree_of(1);
  check_ok(jx_checkpoint_save(dir, 3, t));
  char from[700], to[700];
  const char *odd[] = {"step_9", "step_000000009", "step_00000009x"};
  for (int i = 0; i < 3; i++) {
    snprintf(to, sizeof to, "%s/%s", dir, odd[i]);
    assert_int_equal(mkdir(to, 0755), 0);
    snprintf(from, sizeof from, "%s/step_00000003/manifest.json", dir);
    snprintf(to, sizeof to, "%s/%s/manifest.json", dir, odd[i]);
    assert_int_equal(link(from, to), 0);
  }
  assert_int_equal(jx_checkpoint_latest(dir), 3);
  assert_true(loaded_value(dir, jx_checkpoint_latest(dir)) == 1);
  check_ok(jx_checkpoint_save(dir, 123456789, t)); /* more than 8 digits */
  assert_int_equal(jx_checkpoint_latest(dir), 123456789);
  assert_true(loaded_value(dir, 123456789) == 1);
  jx_tree_release(t);
}

/* Errors of jx_checkpoint_load name the caller's file:line and the
 * parameter at fault. */
static void load_errors_name_the_caller(void **state) {
  (void)state;
  char want[700];
  int line = __LINE__ + 1;
  assert_null(jx_checkpoint_load(NULL, 1, NULL));
  snprintf(want, sizeof want, "%s:%d: jx_checkpoint_load: dir is NULL", __FILE__, line);
  assert_error_has(want);
  line = __LINE__ + 1;
  assert_null(jx_checkpoint_load(root, -2, NULL));
  snprintf(want, sizeof want, "%s:%d: jx_checkpoint_load: step -2 is negative", __FILE__, line);
  assert_error_has(want);
  line = __LINE__ + 1;
  assert_null(jx_checkpoint_load(root, 7, NULL));
  snprintf(want, sizeof want, "%s:%d: jx_checkpoint_load: no checkpoint at '%s/step_00000007'",
           __FILE__, line, root);
  assert_error_has(want);
}

int main(void) {
  jx_set_cpu_device_count(2);
  snprintf(root, sizeof root, "%s/jx-ckpt-faults-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(root)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(resave_survives_a_crash_at_every_point, setup, teardown),
      cmocka_unit_test_setup_teardown(resave_fails_cleanly_at_every_point, setup, teardown),
      cmocka_unit_test_setup_teardown(links_are_never_followed, setup, teardown),
      cmocka_unit_test_setup_teardown(fifos_are_refused_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(long_names_are_saved_whole, setup, teardown),
      cmocka_unit_test_setup_teardown(hostile_manifests_get_clear_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(safetensors_shapes_that_wrap_are_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(crashed_saves_leftovers_are_removed, setup, teardown),
      cmocka_unit_test_setup_teardown(latest_and_load_agree_on_names, setup, teardown),
      cmocka_unit_test_setup_teardown(load_errors_name_the_caller, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  if (rc == 0) rm_rf(root);
  return rc;
}
