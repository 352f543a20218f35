/* The environment table (src/base/env.c) and its readers: what each reader
 * makes of set, unset, empty and malformed values; the README's environment
 * table is the table rendered, row for row; every read in src/ and tools/
 * goes through the readers and names a variable of the table, and every
 * variable of the table is read somewhere; a misspelt name aborts a build
 * without NDEBUG.
 *
 * `test_env --readme` prints the README's rows from the table. */
#define _DEFAULT_SOURCE /* setenv, DT_DIR */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#include "base/env.h"

static const char *kind_word(jx_env_kind k) {
  switch (k) {
  case JX_ENV_FLAG: return "flag";
  case JX_ENV_INT: return "integer";
  case JX_ENV_NUMBER: return "number";
  case JX_ENV_TEXT: return "text";
  }
  return "?";
}

/* The README's table: a header and one row per variable, each line ending in
 * '\n'. Caller frees. */
static char *render_table(void) {
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  n += (size_t)snprintf(s + n, cap - n, "| variable | kind | default | effect |\n");
  n += (size_t)snprintf(s + n, cap - n, "| --- | --- | --- | --- |\n");
  for (int i = 0; i < jx_env_nvars; i++) {
    const jx_env_var *v = &jx_env_vars[i];
    n += (size_t)snprintf(s + n, cap - n, "| `%s` | %s | %s | %s |\n", v->name, kind_word(v->kind),
                          v->fallback, v->meaning);
    assert_true(n < cap);
  }
  return s;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)len + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)len, f), (size_t)len);
  s[len] = 0;
  fclose(f);
  return s;
}

/* ---- the readers ---- */

static void test_flag(void **state) {
  (void)state;
  /* JX_LOG_COMPILES is off by default, JX_RECOMPUTE on */
  unsetenv("JX_LOG_COMPILES");
  assert_int_equal(jx_env_flag("JX_LOG_COMPILES"), 0);
  setenv("JX_LOG_COMPILES", "", 1);
  assert_int_equal(jx_env_flag("JX_LOG_COMPILES"), 0);
  setenv("JX_LOG_COMPILES", "0", 1);
  assert_int_equal(jx_env_flag("JX_LOG_COMPILES"), 0);
  setenv("JX_LOG_COMPILES", "1", 1);
  assert_int_equal(jx_env_flag("JX_LOG_COMPILES"), 1);
  setenv("JX_LOG_COMPILES", "yes", 1);
  assert_int_equal(jx_env_flag("JX_LOG_COMPILES"), 1);
  unsetenv("JX_LOG_COMPILES");

  unsetenv("JX_RECOMPUTE");
  assert_int_equal(jx_env_flag("JX_RECOMPUTE"), 1);
  setenv("JX_RECOMPUTE", "", 1);
  assert_int_equal(jx_env_flag("JX_RECOMPUTE"), 1);
  setenv("JX_RECOMPUTE", "0", 1);
  assert_int_equal(jx_env_flag("JX_RECOMPUTE"), 0);
  setenv("JX_RECOMPUTE", "00", 1); /* only "0" is off */
  assert_int_equal(jx_env_flag("JX_RECOMPUTE"), 1);
  unsetenv("JX_RECOMPUTE");
}

static void test_int(void **state) {
  (void)state;
  long long n = -7;
  unsetenv("JX_NUM_CPU_DEVICES");
  assert_int_equal(jx_env_int("JX_NUM_CPU_DEVICES", &n), 0);
  assert_int_equal(n, -7); /* untouched */
  setenv("JX_NUM_CPU_DEVICES", "", 1);
  assert_int_equal(jx_env_int("JX_NUM_CPU_DEVICES", &n), 0);
  setenv("JX_NUM_CPU_DEVICES", "12", 1);
  assert_int_equal(jx_env_int("JX_NUM_CPU_DEVICES", &n), 1);
  assert_int_equal(n, 12);
  setenv("JX_NUM_CPU_DEVICES", "-3", 1);
  assert_int_equal(jx_env_int("JX_NUM_CPU_DEVICES", &n), 1);
  assert_int_equal(n, -3);
  n = 5;
  const char *bad[] = {"12x", "1.5", "x", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("JX_NUM_CPU_DEVICES", bad[i], 1);
    assert_int_equal(jx_env_int("JX_NUM_CPU_DEVICES", &n), -1);
    assert_int_equal(n, 5);
  }
  unsetenv("JX_NUM_CPU_DEVICES");
}

static void test_double(void **state) {
  (void)state;
  double x = -1;
  unsetenv("JX_PEAK_FLOPS");
  assert_int_equal(jx_env_double("JX_PEAK_FLOPS", &x), 0);
  setenv("JX_PEAK_FLOPS", "2.5e12", 1);
  assert_int_equal(jx_env_double("JX_PEAK_FLOPS", &x), 1);
  assert_true(x == 2.5e12);
  x = -1;
  setenv("JX_PEAK_FLOPS", "2.5T", 1);
  assert_int_equal(jx_env_double("JX_PEAK_FLOPS", &x), -1);
  assert_true(x == -1);
  unsetenv("JX_PEAK_FLOPS");
}

static void test_string(void **state) {
  (void)state;
  setenv("JX_DUMP", "/some/dir", 1);
  assert_string_equal(jx_env_string("JX_DUMP"), "/some/dir");
  unsetenv("JX_DUMP");
  assert_null(jx_env_string("JX_DUMP"));
}

/* A name the table lacks: read all the same with NDEBUG, an abort naming it
 * without. */
static void test_unknown_name(void **state) {
  (void)state;
  assert_null(jx_env_find("JX_LOG_COMPILE"));
  assert_non_null(jx_env_find("JX_LOG_COMPILES"));
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    fclose(stderr); /* the message is not this test's output */
    setenv("JX_LOG_COMPILE", "1", 1);
    _exit(jx_env_flag("JX_LOG_COMPILE") == 1 ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef NDEBUG
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#endif
}

/* ---- the table ---- */

static void test_table_rows(void **state) {
  (void)state;
  assert_true(jx_env_nvars > 0);
  for (int i = 0; i < jx_env_nvars; i++) {
    const jx_env_var *v = &jx_env_vars[i];
    assert_true(!strncmp(v->name, "JX_", 3) || !strcmp(v->name, "CC"));
    for (int j = 0; j < i; j++)
      if (!strcmp(v->name, jx_env_vars[j].name)) fail_msg("%s is in the table twice", v->name);
    if (v->kind == JX_ENV_FLAG && strcmp(v->fallback, "0") && strcmp(v->fallback, "1"))
      fail_msg("%s: a flag's default is \"0\" or \"1\", not \"%s\"", v->name, v->fallback);
    /* one line each, and nothing that would split the README's row */
    assert_true(*v->fallback && *v->meaning);
    if (strpbrk(v->meaning, "|\n") || strpbrk(v->fallback, "|\n"))
      fail_msg("%s: the default and meaning are one line without '|'", v->name);
  }
}

/* The README's environment table: the lines starting with '|' after the
 * "## Environment" heading. */
static void test_readme_matches_table(void **state) {
  (void)state;
  char *readme = read_file(JX_SOURCE_DIR "/README.md");
  const char *sec = strstr(readme, "\n## Environment\n");
  if (!sec) fail_msg("README.md has no \"## Environment\" section");
  const char *t = strstr(sec, "\n|");
  assert_non_null(t);
  t++;
  const char *end = t;
  while (*end == '|') {
    const char *nl = strchr(end, '\n');
    end = nl ? nl + 1 : end + strlen(end);
  }
  char *want = render_table();
  size_t len = (size_t)(end - t);
  if (len != strlen(want) || memcmp(t, want, len)) {
    fprintf(stderr,
            "README.md's environment table differs from src/base/env.c's; the rows the table "
            "gives (`test_env --readme`):\n%s",
            want);
    fail_msg("README.md's environment table is not src/base/env.c's");
  }
  free(want);
  free(readme);
}

/* ---- the sources ---- */

typedef struct {
  int getenv_jx;     /* getenv("JX_...") outside env.c */
  int unknown;       /* jx_env_*("NAME") with a NAME the table lacks */
  char *all_sources; /* every source's text, for the unused rows */
  size_t len, cap;
} scan;

static void scan_text(scan *sc, const char *path, const char *text) {
  static const char *const readers[] = {"jx_env_flag(\"", "jx_env_string(\"", "jx_env_int(\"",
                                        "jx_env_double(\""};
  if (!strstr(path, "/src/base/env.c")) {
    for (const char *p = text; (p = strstr(p, "getenv(\"JX_")); p++) {
      fprintf(stderr, "%s: %.40s: read it with src/base/env.h's readers\n", path, p);
      sc->getenv_jx++;
    }
  }
  for (size_t r = 0; r < sizeof readers / sizeof readers[0]; r++)
    for (const char *p = text; (p = strstr(p, readers[r])); p++) {
      const char *name = p + strlen(readers[r]);
      const char *q = strchr(name, '"');
      char buf[128];
      snprintf(buf, sizeof buf, "%.*s", (int)(q ? q - name : 0), name);
      if (!jx_env_find(buf)) {
        fprintf(stderr, "%s: %s is not in src/base/env.c's table\n", path, buf);
        sc->unknown++;
      }
    }
  if (strstr(path, "/src/base/env.c")) return;
  size_t n = strlen(text);
  if (sc->len + n + 1 > sc->cap) {
    sc->cap = (sc->len + n + 1) * 2;
    sc->all_sources = realloc(sc->all_sources, sc->cap);
    assert_non_null(sc->all_sources);
  }
  memcpy(sc->all_sources + sc->len, text, n + 1);
  sc->len += n;
}

static void scan_dir(scan *sc, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t n = strlen(e->d_name);
    if (e->d_type == DT_DIR) {
      scan_dir(sc, path);
    } else if (n > 2 && (!strcmp(e->d_name + n - 2, ".c") || !strcmp(e->d_name + n - 2, ".h"))) {
      char *text = read_file(path);
      scan_text(sc, path, text);
      free(text);
    }
  }
  closedir(d);
}

static void test_sources_read_through_table(void **state) {
  (void)state;
  scan sc = {0};
  scan_dir(&sc, JX_SOURCE_DIR "/src");
  scan_dir(&sc, JX_SOURCE_DIR "/tools");
  assert_int_equal(sc.getenv_jx, 0);
  assert_int_equal(sc.unknown, 0);
  /* every row is read somewhere (its name in quotes) */
  int unused = 0;
  for (int i = 0; i < jx_env_nvars; i++) {
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", jx_env_vars[i].name);
    if (!strstr(sc.all_sources, quoted)) {
      fprintf(stderr, "%s is in the table but nothing in src/ or tools/ reads it\n",
              jx_env_vars[i].name);
      unused++;
    }
  }
  assert_int_equal(unused, 0);
  free(sc.all_sources);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--readme")) {
    char *t = render_table();
    fputs(t, stdout);
    free(t);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flag),
      cmocka_unit_test(test_int),
      cmocka_unit_test(test_double),
      cmocka_unit_test(test_string),
      cmocka_unit_test(test_unknown_name),
      cmocka_unit_test(test_table_rows),
      cmocka_unit_test(test_readme_matches_table),
      cmocka_unit_test(test_sources_read_through_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
