/* The transformer block with Megatron's tensor parallelism inside a
 * shard_map (the GPT's pipeline stages run it over the model axis). */
#ifndef JX_NN_ATTENTION_H
#define JX_NN_ATTENTION_H

#include <jx/jx.h>

/* jx_transformer_block on this device's shards over mesh axis `axis`
 * (NULL: jx_transformer_block itself): the attention's wq, wk, wv and
 * their biases hold its columns (whole heads: n_heads is the whole
 * block's), wo its rows; the MLP's fc.w and fc.b its columns, proj.w its
 * rows (jx_gpt_param_specs's "model" specs); a psum over the axis after
 * each row-parallel product joins the shards. The norms and the other
 * biases are whole. */
jx_array *nn_transformer_block_over(const jx_tree *t, const char *prefix, jx_array *x, int n_heads,
                                    double eps, const char *axis);

#endif
