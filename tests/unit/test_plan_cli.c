/* Automatic sharding from the command line: `jx plan` plans the GPT's
 * training step on a 2x2 mesh and prints the plan beside data parallel,
 * Megatron and FSDP; `jx train --mesh auto:data=2,model=2` trains with the
 * planned layouts and gives the losses of training on one device;
 * --plan-only prints the plan and trains nothing; a memory limit no plan
 * meets is the planner's error. `jx plan` holds shapes alone: a GPT whose
 * parameters alone outgrow the address space the command is given plans,
 * and its recipes' parameter and optimizer bytes per device are the hand
 * count's. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, popen */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

enum { STEPS = 8 };

static char dir[256];

#define MODEL "--layers 1 --width 32 --heads 2 --context 16 --batch 8"

/* The command's output (stdout and stderr) and exit status, run after the
 * shell commands of prefix ("" or "ulimit ...; "). */
static char *run_after(const char *prefix, const char *args, int *rc) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s%s %s 2>&1", prefix, JX_CLI, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  size_t got;
  while ((got = fread(text + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (len + 1 == cap) text = realloc(text, cap *= 2);
  }
  text[len] = '\0';
  *rc = pclose(p);
  return text;
}

static char *run(const char *args, int *rc) { return run_after("", args, rc); }

static void train(const char *extra, const char *name, double *loss) {
  char args[1024], metrics[512];
  snprintf(metrics, sizeof metrics, "%s/%s.jsonl", dir, name);
  snprintf(args, sizeof args, "train " MODEL " --steps %d --sample 0 --data %s --metrics %s %s",
           STEPS, JX_CORPUS, metrics, extra);
  int rc;
  char *out = run(args, &rc);
  if (rc) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
  FILE *f = fopen(metrics, "r");
  assert_non_null(f);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    int step;
    double l;
    if (sscanf(line, "{\"step\": %d, \"loss\": %lf", &step, &l) == 2 && step >= 1 && step <= STEPS)
      loss[step - 1] = l;
  }
  fclose(f);
}

static void plan_prints_the_plan_and_the_recipes(void **state) {
  (void)state;
  int rc;
  /* figures given, as for a cluster on paper */
  char *out = run("plan --devices 4 --mesh data=2,model=2 --link data=50GB/s,model=900GB/s "
                  "--flops 1T " MODEL,
                  &rc);
  printf("%s", out);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "plan of 'jit(train_step(gpt_loss))' on the mesh (data=2, model=2"));
  assert_non_null(strstr(out, "estimated"));
  assert_non_null(strstr(out, "data parallel"));
  assert_non_null(strstr(out, "Megatron (model)"));
  assert_non_null(strstr(out, "FSDP (data)"));
  assert_non_null(strstr(out, "planned in"));
  /* intra names the last axis and inter the others: the same figures */
  int rc2;
  char *named = run("plan --devices 4 --mesh data=2,model=2 --link intra=900GB/s,inter=50GB/s "
                    "--flops 1T " MODEL,
                    &rc2);
  assert_int_equal(rc2, 0);
  *strstr(out, "planned in") = *strstr(named, "planned in") = '\0';
  assert_string_equal(out, named);
  free(named);
  free(out);
  out = run("plan --devices 4 --mesh data=2,model=2 --link data=50GB/s " MODEL, &rc);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "--link gives no bandwidth for mesh axis 'model'"));
  free(out);
  /* --measure's bad values, refused before anything runs */
  out = run("plan --devices 4 --mesh data=2,model=2 --measure 0 " MODEL, &rc);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "bad option or value '--measure 0'"));
  free(out);
  out = run("plan --devices 4 --mesh data=2,model=2 --measure 3 --limits 100,half " MODEL, &rc);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "--limits wants positive percents (100,50,30), got 'half'"));
  free(out);
}

/* The sanitizers reserve terabytes of shadow address space, so the address
 * space limit applies to plain builds only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

/* The number after `after` on the line holding `line`, or -1. */
static double figure(const char *out, const char *line, const char *after) {
  const char *at = strstr(out, line);
  if (!at) return -1;
  at = strstr(at, after);
  return at ? strtod(at + strlen(after), NULL) : -1;
}

static void plan_holds_shapes_alone(void **state) {
  (void)state;
  /* d 6144: 0.45e9 parameters, 1.8 GB of f32 and 5.4 GB with Adam's moments,
   * against 1.5 GB of address space */
  enum { LAYERS = 1, WIDTH = 6144, VOCAB = 256, CONTEXT = 16, DATA_WAYS = 2, MODEL_WAYS = 4 };
  char args[512];
  snprintf(args, sizeof args,
           "plan --devices 8 --mesh data=%d,model=%d --layers %d --width %d --heads 8 "
           "--vocab %d --context %d --batch 8 --memory-limit 80GiB "
           "--link data=50GB/s,model=900GB/s",
           DATA_WAYS, MODEL_WAYS, LAYERS, WIDTH, VOCAB, CONTEXT);
  int rc;
#ifdef SANITIZED
  char *out = run(args, &rc);
#else
  char *out = run_after("ulimit -v 1500000; ", args, &rc);
#endif
  printf("%s", out);
  assert_int_equal(rc, 0);
  const double d = WIDTH, v = VOCAB, t = CONTEXT, l = LAYERS, m = MODEL_WAYS;
  const double params = v * d + t * d + l * (12 * d * d + 13 * d) + 2 * d;
  /* Megatron over "model": wte's rows, the six matrices and the q, k, v and
   * fc biases split four ways; wpe, the norms and the other biases whole */
  const double megatron = v * d / m + t * d + l * (12 * d * d / m + 7 * d / m + 6 * d) + 2 * d;
  /* f32 parameters and two f32 moments each, and Adam's i32 count */
  assert_true(figure(out, "data parallel                  parameters", "optimizer state ") ==
              12 * params + 4);
  assert_true(figure(out, "Megatron (model)", "parameters and optimizer state ") ==
              12 * megatron + 4);
  assert_non_null(strstr(out, "planned in"));
  free(out);
}

static void train_with_planned_layouts(void **state) {
  (void)state;
  double one[STEPS], planned[STEPS];
  train("--devices 1", "one", one);
  train("--devices 4 --mesh auto:data=2,model=2", "auto", planned);
  for (int s = 0; s < STEPS; s++) {
    printf("step %d: %.7g (one device) %.7g (planned)\n", s + 1, one[s], planned[s]);
    assert_true(fabs(one[s] - planned[s]) <= 2e-5 * fabs(one[s]));
  }
  int rc;
  char *out = run("train --devices 4 --mesh auto:data=2,model=2 --plan-only " MODEL
                  " --steps 2 --sample 0 --data " JX_CORPUS,
                  &rc);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(out, "plan of 'jit(train_step(gpt_loss))'"));
  assert_null(strstr(out, "step 1/2"));
  free(out);
  out = run("train --devices 4 --mesh auto --memory-limit 1KiB " MODEL
            " --steps 2 --sample 0 --data " JX_CORPUS,
            &rc);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "fits 1024 bytes per device; the smallest peak found is"));
  free(out);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/jx_plan_cli_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plan_prints_the_plan_and_the_recipes),
      cmocka_unit_test(plan_holds_shapes_alone),
      cmocka_unit_test(train_with_planned_layouts),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
