/* The GPT's config check, shared by the model (gpt.c) and its decoding
 * (kv_cache.c, generate.c). */
#ifndef JX_NN_GPT_CHECK_H
#define JX_NN_GPT_CHECK_H

#include "nn_util.h"

/* 1 if c is a usable config; else an error naming fn and the config, and 0. */
int nn_gpt_check_config(const char *fn, const jx_gpt_config *c);

#endif
