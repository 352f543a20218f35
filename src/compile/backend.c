/* The backend registry and the one place JX_PLATFORM is read (backend.h). */
#include "backend.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"

/* The platform of a JX_PLATFORM that is unset or empty. */
#define DEFAULT_PLATFORM "cpu"
#define MAX_BACKENDS     8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const jx_backend *backends[MAX_BACKENDS] = {&jx_backend_cpu};
static int nbackends = 1;

static const jx_backend *find_locked(const char *name) {
  for (int i = 0; i < nbackends; i++)
    if (!strcmp(backends[i]->name, name)) return backends[i];
  return NULL;
}

jx_status jx_backend_register(const jx_backend *b) {
  if (!b || !b->name || !*b->name)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_backend_register: the backend has no name");
  if (!b->attach || !b->set_donation || !b->mesh_attach)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_backend_register: backend '%s' lacks an entry (attach, set_donation "
                        "and mesh_attach are required)",
                        b->name);
  pthread_mutex_lock(&lock);
  jx_status st = JX_OK;
  if (find_locked(b->name))
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_backend_register: a backend named '%s' is registered already", b->name);
  else if (nbackends == MAX_BACKENDS)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "jx_backend_register: backend '%s': the registry is full (%d backends)",
                      b->name, MAX_BACKENDS);
  else
    backends[nbackends++] = b;
  pthread_mutex_unlock(&lock);
  return st;
}

const jx_backend *jx_backend_find(const char *name) {
  if (!name) return NULL;
  pthread_mutex_lock(&lock);
  const jx_backend *b = find_locked(name);
  pthread_mutex_unlock(&lock);
  return b;
}

/* "a or b", "a, b or c": the registered names, in order. */
static void known_names(char *text, size_t cap) {
  size_t used = 0;
  text[0] = '\0';
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nbackends && used < cap; i++) {
    const char *sep = i == 0 ? "" : i == nbackends - 1 ? " or " : ", ";
    int n = snprintf(text + used, cap - used, "%s%s", sep, backends[i]->name);
    used += n > 0 ? (size_t)n : 0;
  }
  pthread_mutex_unlock(&lock);
}

/* JX_PLATFORM's name: the default when unset or empty. */
static const char *platform_name(void) {
  const char *name = jx_env_string("JX_PLATFORM");
  return name && *name ? name : DEFAULT_PLATFORM;
}

const jx_backend *jx_backend_select(const char *what_name) {
  const char *name = platform_name();
  const jx_backend *b = jx_backend_find(name);
  if (!b) {
    char known[256];
    known_names(known, sizeof known);
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jit of '%s': JX_PLATFORM='%s' is not a platform (%s)",
                 what_name ? what_name : "?", name, known);
  }
  return b;
}

jx_status jx_backend_attach_mesh(const jx_program *p, jx_mesh *m, const char *what_name,
                                 const char *dump_prefix) {
  const jx_backend *b = jx_backend_select(what_name ? what_name : p->name);
  return b ? b->mesh_attach(p, m, what_name, dump_prefix) : jx_last_status();
}

jx_status jx_backend_attach_body(const jx_program *p, jx_mesh *m, const char *what_name,
                                 const char *dump_prefix) {
  const jx_backend *b = jx_backend_find(platform_name());
  if (!b) b = &jx_backend_cpu;
  char why[512] = "";
  if (b->mesh_fits && !b->mesh_fits(m, why, sizeof why)) {
    if (jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr, "jx: %s: %s: runs on the CPU devices\n", what_name ? what_name : p->name,
              why);
    b = &jx_backend_cpu;
  }
  return b->mesh_attach(p, m, what_name, dump_prefix);
}
