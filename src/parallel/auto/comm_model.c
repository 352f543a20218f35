/* The alpha-beta model of the collectives (comm_model.h); its
 * calibration is comm_calibration.c's. */
#define _POSIX_C_SOURCE 200809L
#include "comm_model.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "../device.h"

void jx_comm_model_uniform(jx_comm_model *cm, const jx_mesh *m, double alpha_s, double bytes_per_s,
                           double flops_per_s) {
  memset(cm, 0, sizeof *cm);
  cm->naxes = m->ndim;
  for (int a = 0; a < m->ndim; a++) {
    cm->size[a] = m->size[a];
    cm->link[a] = jx_link_uniform(alpha_s, 1.0 / bytes_per_s);
  }
  cm->flops_per_s = flops_per_s;
}

void jx_ring_terms(jx_coll_kind kind, double n, double *messages, double *moved) {
  double share = (n - 1) / n;
  switch (kind) {
  case JX_COLL_ALL_REDUCE: *messages = 2 * (n - 1), *moved = 2 * share; return;
  case JX_COLL_PERMUTE: *messages = 1, *moved = 1; return;
  default: *messages = n - 1, *moved = share; return;
  }
}

double jx_byte_rate_time(const jx_byte_rate *r, double bytes) {
  double cached = fmin(bytes, r->knee_bytes);
  return cached * r->cached_s_per_byte + (bytes - cached) * r->s_per_byte;
}

jx_link_model jx_link_uniform(double alpha_s, double beta_s_per_byte) {
  jx_link_model l;
  for (int k = 0; k < JX_COLL_KINDS; k++)
    l.alpha_s[k] = alpha_s, l.beta[k] = (jx_byte_rate){0, beta_s_per_byte, beta_s_per_byte};
  return l;
}

double jx_comm_model_time(const jx_comm_model *cm, jx_coll_kind kind, uint32_t axes_mask,
                          double bytes) {
  if (kind < 0 || kind >= JX_COLL_KINDS) return 0;
  double n = 1, alpha = 0, per_byte = 0;
  uint32_t split = 0;
  for (int a = 0; a < cm->naxes; a++) {
    if (!(axes_mask & (1u << a))) continue;
    n *= (double)cm->size[a];
    alpha = fmax(alpha, cm->link[a].alpha_s[kind]);
    per_byte = fmax(per_byte, jx_byte_rate_time(&cm->link[a].beta[kind], bytes));
    if (cm->size[a] > 1) split |= 1u << a;
  }
  if (cm->group_axes && split == cm->group_axes) { /* measured together */
    alpha = cm->group.alpha_s[kind];
    per_byte = jx_byte_rate_time(&cm->group.beta[kind], bytes);
  }
  if (n <= 1) return 0;
  double messages, moved;
  jx_ring_terms(kind, n, &messages, &moved);
  return messages * alpha + moved * per_byte;
}

int jx_devices_per_core(const jx_mesh *m) {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int local = 0;
  for (int p = 0; p < m->ndev; p++) local += jx_device_is_local(m->device[p]);
  return online > 0 && local > online ? (int)((local + online - 1) / online) : 0;
}
