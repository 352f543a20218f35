#include "dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/env.h"

const char *jx_dump_dir(void) {
  const char *d = jx_env_string("JX_DUMP");
  return d && *d ? d : NULL;
}

void jx_dump_text(const char *prefix, const char *suffix, const char *text) {
  const char *dir = jx_dump_dir();
  if (!dir || !text) return;
  mkdir(dir, 0755);
  char path[2048];
  snprintf(path, sizeof path, "%s/%s.%s", dir, prefix, suffix);
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0)
    fprintf(stderr, "jx: JX_DUMP: cannot write %s: %s\n", path, strerror(errno));
  if (f) fclose(f);
}

void jx_dump_program(const char *prefix, const char *pass, const jx_program *p) {
  if (!jx_dump_dir()) return;
  char *text = jx_program_print(p);
  char suffix[64];
  snprintf(suffix, sizeof suffix, "%s.txt", pass);
  jx_dump_text(prefix, suffix, text);
  free(text);
}
