/* jx: the command-line front end. `jx train` trains a byte-level GPT on a
 * mesh of devices; `jx generate` continues text with it; `jx plan` plans its
 * layouts on a mesh; `jx info` says what this build and machine offer;
 * `jx launch` starts a job's processes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f) {
  fprintf(f, "usage: jx <command> [options]\n"
             "  train   train a byte-level GPT on a text corpus (jx train --help)\n"
             "  generate  continue a prompt with a model jx train saved (jx generate --help)\n"
             "  plan    plan the GPT's layouts on a mesh under a memory limit (jx plan --help)\n"
             "  info    devices, processes and build options\n"
             "  launch  start a job's processes on this node, restart them on failure\n"
             "          (jx launch --help)\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "train")) return jx_cmd_train(argc - 1, argv + 1);
  if (!strcmp(argv[1], "generate")) return jx_cmd_generate(argc - 1, argv + 1);
  if (!strcmp(argv[1], "info")) return jx_cmd_info(argc - 1, argv + 1);
  if (!strcmp(argv[1], "plan")) return jx_cmd_plan(argc - 1, argv + 1);
  if (!strcmp(argv[1], "launch")) return jx_cmd_launch(argc - 1, argv + 1);
  fprintf(stderr, "jx: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
