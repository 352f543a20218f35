/* The jx command: subcommands share these. */
#ifndef JX_TOOLS_CLI_H
#define JX_TOOLS_CLI_H

int jx_cmd_train(int argc, char **argv);
int jx_cmd_info(int argc, char **argv);
/* Under mpirun or srun (a job of several processes): jx_distributed_initialize,
 * before any use of devices. Returns non-zero after printing why it failed. */
int jx_cli_join_job(const char *command);

#endif
