/* The environment variables jx reads: each one is a row of the table in
 * env.c (name, kind, default, meaning), which the README's environment
 * table is generated from (tests/unit/test_env.c keeps the two equal), and
 * every read goes through the readers below.
 *
 * A reader given a name the table lacks reads it all the same; a build
 * without NDEBUG aborts instead, naming it, so a misspelt name fails the
 * tests. The readers look at the environment at each call, so a program may
 * change a variable between calls (each caller says when it reads). */
#ifndef JX_SRC_BASE_ENV_H
#define JX_SRC_BASE_ENV_H

typedef enum {
  JX_ENV_FLAG,   /* on or off: "0" is off, any other text on, unset or "" the default */
  JX_ENV_INT,    /* a whole number */
  JX_ENV_NUMBER, /* a real number */
  JX_ENV_TEXT    /* a path, an address, a name, a spec */
} jx_env_kind;

typedef struct {
  const char *name;
  jx_env_kind kind;
  const char *fallback; /* what unset means; a flag's is "0" or "1" */
  const char *meaning;  /* one line (Markdown, as the README shows it) */
} jx_env_var;

extern const jx_env_var jx_env_vars[];
extern const int jx_env_nvars;

/* The table's row for name; NULL when there is none. */
const jx_env_var *jx_env_find(const char *name);

/* The variable's text, NULL when unset (getenv's answer). */
const char *jx_env_string(const char *name);

/* A flag: 0 when set to "0", the table's default when unset or "", else 1
 * (JX_LOG_COMPILES=1 turns logging on, JX_RECOMPUTE=0 turns recomputing off). */
int jx_env_flag(const char *name);

/* A whole number (strtoll, base 10, nothing after it) or a real number
 * (strtod, nothing after it) into *out: 1 when read, 0 when unset or "" (*out
 * untouched), -1 when the text is no such number (the caller names it). */
int jx_env_int(const char *name, long long *out);
int jx_env_double(const char *name, double *out);

#endif
