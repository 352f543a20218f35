/* The jx command: subcommands share these. */
#ifndef JX_TOOLS_CLI_H
#define JX_TOOLS_CLI_H

int jx_cmd_train(int argc, char **argv);
int jx_cmd_info(int argc, char **argv);

#endif
