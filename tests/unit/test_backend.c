/* The backend registry (src/compile/backend.h): the CPU and CUDA backends are
 * registered at start-up (the CUDA one also in a program linked against the
 * static library); JX_PLATFORM picks the backend a jit, a sharded jit and a
 * shard_map body compile with; an unknown platform is an error naming it and
 * the known ones. A counting backend (the CPU's entries, each call counted)
 * shows which entries ran. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "compile/backend.h"
#include "test_util.h"

static struct {
  int attach, set_donation, mesh_attach, mesh_fits;
  int fits; /* what mesh_fits answers */
} calls;

static jx_status counting_attach(const jx_program *p, const char *dump_prefix,
                                 jx_compile_times *times) {
  calls.attach++;
  return jx_backend_cpu.attach(p, dump_prefix, times);
}
static jx_status counting_set_donation(const jx_program *p, int nin, const int *donate,
                                       const char *fn_name) {
  calls.set_donation++;
  return jx_backend_cpu.set_donation(p, nin, donate, fn_name);
}
static jx_status counting_mesh_attach(const jx_program *p, jx_mesh *m, const char *what_name,
                                      const char *dump_prefix) {
  calls.mesh_attach++;
  return jx_backend_cpu.mesh_attach(p, m, what_name, dump_prefix);
}
static int counting_mesh_fits(jx_mesh *m, char *why, size_t cap) {
  (void)m;
  calls.mesh_fits++;
  if (!calls.fits) snprintf(why, cap, "the counting backend has no devices");
  return calls.fits;
}

static const jx_backend counting = {
    .name = "counting",
    .attach = counting_attach,
    .set_donation = counting_set_donation,
    .mesh_attach = counting_mesh_attach,
    .mesh_fits = counting_mesh_fits,
};

/* JX_PLATFORM as the run found it, restored after each test */
static char saved_platform[64];
static int had_platform;

static int setup_platform(void **state) {
  memset(&calls, 0, sizeof calls);
  return setup(state);
}
static int restore_platform(void **state) {
  if (had_platform)
    setenv("JX_PLATFORM", saved_platform, 1);
  else
    unsetenv("JX_PLATFORM");
  return teardown(state);
}

/* 2 x + y */
static void axpy(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(jx_scalar(JX_F32, 2), in[0]), in[1]);
}

static jx_array *vec(float start) {
  float v[8];
  for (int i = 0; i < 8; i++) v[i] = start + (float)i;
  return jx_array_from(JX_F32, JX_SHAPE(8), v);
}

/* 2 (x0 + i) + (y0 + i) for i = 0..7 */
static void assert_axpy(jx_array *got, float x0, float y0) {
  float v[8];
  check_ok(jx_read(got, v, sizeof v));
  for (int i = 0; i < 8; i++) assert_true(v[i] == 2 * (x0 + (float)i) + (y0 + (float)i));
}

static void cpu_and_cuda_registered_at_start_up(void **state) {
  (void)state;
  assert_ptr_equal(jx_backend_find("cpu"), &jx_backend_cpu);
  const jx_backend *cuda = jx_backend_find("cuda");
  assert_non_null(cuda); /* registered whether or not this machine has CUDA */
  assert_string_equal(cuda->name, "cuda");
  assert_non_null(cuda->mesh_fits);
  assert_null(jx_backend_find("tpu"));
  assert_null(jx_backend_find(NULL));
  assert_string_equal(jx_last_error(), ""); /* finding records nothing */
}

static void default_platform_is_cpu(void **state) {
  (void)state;
  unsetenv("JX_PLATFORM");
  assert_ptr_equal(jx_backend_select("f"), &jx_backend_cpu);
  setenv("JX_PLATFORM", "", 1);
  assert_ptr_equal(jx_backend_select("f"), &jx_backend_cpu);
  setenv("JX_PLATFORM", "cpu", 1);
  assert_ptr_equal(jx_backend_select("f"), &jx_backend_cpu);
  setenv("JX_PLATFORM", "cuda", 1);
  assert_ptr_equal(jx_backend_select("f"), jx_backend_find("cuda"));
  setenv("JX_PLATFORM", "counting", 1);
  assert_ptr_equal(jx_backend_select("f"), &counting);
  assert_string_equal(jx_last_error(), "");
}

/* jit: attach, then set_donation for a donating function; the result is the
 * eager one. */
static void jit_compiles_with_the_selected_backend(void **state) {
  (void)state;
  setenv("JX_PLATFORM", "counting", 1);
  jx_fn *f = jx_fn_create("axpy", 2, 1, axpy, NULL);
  jx_fn *plain = jx_jit(f, NULL);
  jx_fn *donating = jx_jit(f, &(jx_jit_options){.donate = (const int[]){1, 0}});
  jx_array *out[1];
  check_ok(jx_call(plain, (jx_array *[]){vec(1), vec(10)}, out));
  assert_axpy(out[0], 1, 10);
  assert_int_equal(calls.attach, 1);
  assert_int_equal(calls.set_donation, 0);
  jx_array *x = vec(3);
  check_ok(jx_call(donating, (jx_array *[]){x, vec(20)}, out));
  assert_axpy(out[0], 3, 20);
  assert_int_equal(calls.attach, 2);
  assert_int_equal(calls.set_donation, 1);
  /* the CPU's donation ran: x gave its buffer to the call */
  float v[8];
  assert_int_not_equal(jx_read(x, v, sizeof v), JX_OK);
  assert_error_has("donated");
  /* a second call of the same signature compiles nothing */
  check_ok(jx_call(plain, (jx_array *[]){vec(2), vec(5)}, out));
  assert_axpy(out[0], 2, 5);
  assert_int_equal(calls.attach, 2);
  assert_int_equal(calls.mesh_attach, 0);
  jx_fn_release(donating);
  jx_fn_release(plain);
  jx_fn_release(f);
}

/* a sharded jit's per-device program: mesh_attach; a shard_map body:
 * mesh_attach where mesh_fits says so, else the CPU's. */
static void meshes_compile_with_the_selected_backend(void **state) {
  (void)state;
  setenv("JX_PLATFORM", "counting", 1);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"i"});
  jx_sharding *rows = jx_sharding_create(m, "i");
  jx_fn *f = jx_fn_create("axpy", 2, 1, axpy, NULL);
  jx_fn *sharded = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){rows, rows}});
  jx_array *out[1];
  check_ok(jx_call(sharded, (jx_array *[]){vec(1), vec(4)}, out));
  assert_axpy(out[0], 1, 4);
  assert_int_equal(calls.mesh_attach, 1);
  assert_int_equal(calls.mesh_fits, 0); /* a jit's platform is not negotiable */
  assert_int_equal(calls.attach, 0);

  calls.fits = 0;
  jx_fn *body_cpu = jx_fn_create("body_on_cpu", 2, 1, axpy, NULL);
  jx_fn *smap_cpu = jx_shard_map(body_cpu, m, (const char *[]){"i", "i"}, (const char *[]){"i"});
  check_ok(jx_call(smap_cpu, (jx_array *[]){vec(2), vec(7)}, out));
  assert_axpy(out[0], 2, 7);
  assert_int_equal(calls.mesh_fits, 1);
  assert_int_equal(calls.mesh_attach, 1); /* the CPU's ran */

  calls.fits = 1;
  jx_fn *body = jx_fn_create("body_on_counting", 2, 1, axpy, NULL);
  jx_fn *smap = jx_shard_map(body, m, (const char *[]){"i", "i"}, (const char *[]){"i"});
  check_ok(jx_call(smap, (jx_array *[]){vec(3), vec(9)}, out));
  assert_axpy(out[0], 3, 9);
  assert_int_equal(calls.mesh_fits, 2);
  assert_int_equal(calls.mesh_attach, 2);

  jx_fn_release(smap);
  jx_fn_release(body);
  jx_fn_release(smap_cpu);
  jx_fn_release(body_cpu);
  jx_fn_release(sharded);
  jx_fn_release(f);
  jx_sharding_release(rows);
  jx_mesh_release(m);
}

static void unknown_platform_names_it_and_the_known_ones(void **state) {
  (void)state;
  setenv("JX_PLATFORM", "tpu", 1);
  assert_null(jx_backend_select("f"));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("jit of 'f': JX_PLATFORM='tpu' is not a platform (cpu, cuda or counting)");
  jx_fn *f = jx_fn_create("axpy_on_tpu", 2, 1, axpy, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *out[1];
  assert_int_not_equal(jx_call(jf, (jx_array *[]){vec(1), vec(2)}, out), JX_OK);
  assert_error_has("JX_PLATFORM='tpu' is not a platform (cpu, cuda or counting)");
  assert_int_equal(calls.attach, 0);
  /* a shard_map body runs somewhere: the CPU, the jit reports the name */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"i"});
  jx_fn *smap = jx_shard_map(f, m, (const char *[]){"i", "i"}, (const char *[]){"i"});
  check_ok(jx_call(smap, (jx_array *[]){vec(1), vec(2)}, out));
  assert_axpy(out[0], 1, 2);
  assert_int_equal(calls.mesh_fits + calls.mesh_attach, 0);
  jx_fn_release(smap);
  jx_mesh_release(m);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static jx_status refuse(const jx_program *p, const char *dump_prefix, jx_compile_times *times) {
  (void)p;
  (void)dump_prefix;
  (void)times;
  return JX_ERR_INTERNAL;
}

static void bad_tables_are_refused(void **state) {
  (void)state;
  assert_int_equal(jx_backend_register(&counting), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("a backend named 'counting' is registered already");
  assert_int_equal(jx_backend_register(&jx_backend_cpu), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("'cpu' is registered already");
  assert_int_equal(jx_backend_register(&(jx_backend){.name = "", .attach = refuse}),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("the backend has no name");
  assert_int_equal(jx_backend_register(&(jx_backend){.name = "half", .attach = refuse}),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("backend 'half' lacks an entry");
  assert_int_equal(jx_backend_register(NULL), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("the backend has no name");
  assert_null(jx_backend_find("half"));
}

int main(void) {
  const char *was = getenv("JX_PLATFORM");
  had_platform = was != NULL;
  if (was) snprintf(saved_platform, sizeof saved_platform, "%s", was);
  setenv("JX_NUM_CPU_DEVICES", "2", 1); /* the meshes' two devices */
  if (jx_backend_register(&counting)) {
    fprintf(stderr, "%s\n", jx_last_error());
    return 1;
  }
#define T(t) cmocka_unit_test_setup_teardown(t, setup_platform, restore_platform)
  const struct CMUnitTest tests[] = {
      T(cpu_and_cuda_registered_at_start_up),          T(default_platform_is_cpu),
      T(jit_compiles_with_the_selected_backend),       T(meshes_compile_with_the_selected_backend),
      T(unknown_platform_names_it_and_the_known_ones), T(bad_tables_are_refused),
  };
#undef T
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
