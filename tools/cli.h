/* The jx command: subcommands share these. */
#ifndef JX_TOOLS_CLI_H
#define JX_TOOLS_CLI_H

#include <jx/jx.h>

int jx_cmd_train(int argc, char **argv);
int jx_cmd_info(int argc, char **argv);
int jx_cmd_generate(int argc, char **argv);
int jx_cmd_launch(int argc, char **argv);
int jx_cmd_plan(int argc, char **argv);
/* jx_distributed_initialize(NULL) (mpirun, srun, PMIx, jx launch, or a job of
 * one), before any use of devices. Returns non-zero after printing why it failed. */
int jx_cli_join_job(const char *command);

/* "data=4,model=2" -> a mesh; empty: "data" over every device. In a job of
 * several processes the mesh must cover all their devices. NULL (the
 * error recorded) on a bad spec. */
jx_mesh *jx_cli_mesh(const char *spec, int devices);

/* --mesh auto[:data=A,model=B]: 1 when spec asks for planned layouts; spec
 * then points at the mesh part ("" for the default mesh). */
int jx_cli_mesh_auto(const char **spec);
/* Every entry JX_AUTO, but the first output's (a step's loss); donate (nin
 * entries) marks the inputs a training step gives back (outputs 1..: the
 * parameters and optimizer state), so that the plan gives each back in the
 * layout it takes it in (jx_jit_options.donate). */
void jx_cli_auto_layouts(int nin, jx_sharding **in_sh, int nout, jx_sharding **out_sh, int *donate);
/* "200MiB", "80GiB", "50GB/s", "10us", "1e9" -> *out (bytes, bytes/s,
 * seconds); 0 when text is none of these. */
int jx_cli_parse_size(const char *text, double *out);

/* Generates text from the GPT with params (on one device, or on mesh) and
 * streams it to stdout: the prompt, then sequence 0's bytes as they come
 * (the other sequences of a batch after it); the prefill and decode rates
 * on stderr. What jx generate and the end of jx train run. Returns
 * non-zero after printing why it failed. */
typedef struct {
  const char *prompt;
  int64_t batch;
  jx_sampling sampling;
  int64_t max_tokens;
  uint64_t seed;
  const char *const *stop;
  int nstop;
} jx_cli_generate_options;
int jx_cli_generate(const char *command, const jx_gpt_config *c, const jx_tree *params,
                    jx_mesh *mesh, const jx_cli_generate_options *o);

#endif
