/* `jx generate`, run as a user runs it, on a checkpoint `jx train` wrote
 * (whose run ends by sampling with the same code): greedy decoding is the
 * same on 1 device and on a 2x2 data x model mesh, and repeats; bad input
 * (a prompt longer than the context or empty, heads that do not fit the
 * checkpoint's width, a directory without checkpoints) gets a clear error. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char dir[256];

/* Runs `jx <args>` with stdout to out.txt and stderr to err.txt; returns the
 * exit status and reads the two files into out and err. */
static int run(const char *args, char *out, char *err, size_t cap) {
  char cmd[2048], path[300];
  snprintf(cmd, sizeof cmd, "%s %s > %s/out.txt 2> %s/err.txt", JX_CLI, args, dir, dir);
  int rc = system(cmd);
  const char *names[2] = {"out.txt", "err.txt"};
  char *bufs[2] = {out, err};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(bufs[i], 1, cap - 1, f);
    bufs[i][n] = 0;
    fclose(f);
  }
  return rc;
}

static void assert_has(const char *text, const char *want) {
  if (!strstr(text, want)) fprintf(stderr, "no '%s' in:\n%s", want, text);
  assert_non_null(strstr(text, want));
}

static char out[8192], err[8192];

static int setup_checkpoint(void **state) {
  (void)state;
  char args[1024];
  snprintf(args, sizeof args,
           "train --layers 1 --width 32 --heads 2 --context 16 --batch 8 --steps 6 --sample 24 "
           "--data %s --ckpt %s/ck",
           JX_CORPUS, dir);
  int rc = run(args, out, err, sizeof out);
  if (rc) fprintf(stderr, "%s%s", out, err);
  assert_int_equal(rc, 0);
  assert_has(out, "sample:\nThe "); /* the end of jx train runs the generation code */
  assert_has(err, "decode: ");
  return 0;
}

/* The same decoding on 1 device, again, and on a 2x2 mesh: the same text.
 * Returns how many distinct bytes it has. */
static int same_text_everywhere(const char *flags) {
  char args[1024], one[8192], again[8192];
  snprintf(args, sizeof args, "generate --ckpt %s/ck --prompt 'The t' --max-tokens 40 --batch 4 %s",
           dir, flags);
  int rc = run(args, one, err, sizeof one);
  if (rc) fprintf(stderr, "%s", err);
  assert_int_equal(rc, 0);
  assert_has(err, "GPT 1 layers, d 32, 2 heads, context 16");
  assert_has(err, "tokens/s");
  assert_has(one, "--- sequence 3 ---\nThe t");
  assert_true(strlen(one) > 4 * (5 + 40));
  assert_int_equal(run(args, again, err, sizeof again), 0);
  assert_string_equal(one, again);
  snprintf(args, sizeof args,
           "generate --ckpt %s/ck --prompt 'The t' --max-tokens 40 --batch 4 --devices 4 --mesh "
           "data=2,model=2 %s",
           dir, flags);
  rc = run(args, again, err, sizeof again);
  if (rc) fprintf(stderr, "%s", err);
  assert_int_equal(rc, 0);
  assert_string_equal(one, again);
  int seen[256] = {0}, distinct = 0;
  for (const char *c = one; *c; c++) distinct += !seen[(unsigned char)*c]++;
  return distinct;
}

static void greedy_is_the_same_on_a_mesh_and_repeats(void **state) {
  (void)state;
  same_text_everywhere("--temperature 0");
}

/* A draw with a seed too (the text varies, so this also checks the sliding
 * window's prefills and the sampler under a mesh). */
static void sampling_is_the_same_on_a_mesh_and_repeats(void **state) {
  (void)state;
  assert_true(same_text_everywhere("--temperature 1 --top-k 50 --top-p 0.95 --seed 3") > 12);
}

static void bad_input_is_named(void **state) {
  (void)state;
  char args[1024];
  snprintf(args, sizeof args, "generate --ckpt %s/ck --prompt 'seventeen bytes!!'", dir);
  assert_int_not_equal(run(args, out, err, sizeof out), 0);
  assert_has(err, "the prompt has 17 bytes, longer than the model's context of 16");
  snprintf(args, sizeof args, "generate --ckpt %s/ck --prompt ''", dir);
  assert_int_not_equal(run(args, out, err, sizeof out), 0);
  assert_has(err, "the prompt is empty");
  snprintf(args, sizeof args, "generate --ckpt %s/ck --prompt 'x' --heads 3", dir);
  assert_int_not_equal(run(args, out, err, sizeof out), 0);
  assert_has(err, "3 heads do not divide its width 32");
  snprintf(args, sizeof args, "generate --ckpt %s --prompt 'x'", dir);
  assert_int_not_equal(run(args, out, err, sizeof out), 0);
  assert_has(err, "no checkpoint in");
  snprintf(args, sizeof args, "generate --ckpt %s/ck --prompt 'x' --top-k many", dir);
  assert_int_not_equal(run(args, out, err, sizeof out), 0);
  assert_has(err, "--top-k wants a number, got 'many'");
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/jx-generate-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(greedy_is_the_same_on_a_mesh_and_repeats),
      cmocka_unit_test(sampling_is_the_same_on_a_mesh_and_repeats),
      cmocka_unit_test(bad_input_is_named),
  };
  int rc = cmocka_run_group_tests(tests, setup_checkpoint, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (rc == 0 && system(cmd) != 0) rc = 1;
  return rc;
}
