/* JX_DUMP=dir: every jit compilation writes its program after each pass and
 * the source of each kernel into dir, named by function and signature hash,
 * so a user can read what was compiled. */
#ifndef JX_SRC_COMPILE_DUMP_H
#define JX_SRC_COMPILE_DUMP_H

#include "../ir/program.h"

/* The dump directory, or NULL when dumping is off. */
const char *jx_dump_dir(void);
/* Writes text to dir/<prefix>.<suffix>; errors are reported on stderr only
 * (dumping never fails a compilation). */
void jx_dump_text(const char *prefix, const char *suffix, const char *text);
void jx_dump_program(const char *prefix, const char *pass, const jx_program *p);

#endif
