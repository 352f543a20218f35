/* Bounded, adaptive spinning before sleeping, for hand-offs between
 * threads. Waking a thread that sleeps on a condition variable goes through
 * the kernel (tens of microseconds on a virtual machine); a thread that
 * polls sees the change in well under one. Polling pays only when the other
 * side acts soon and has a core to act on, and it costs a core meanwhile,
 * so a hand-off polls for at most JX_SPIN_MAX_NS, and not at all when its
 * site's recent waits were long (a training step), on one CPU, while the
 * thread pool runs a job on as many threads as there are CPUs, or while
 * the machine has more runnable threads than CPUs (load from other
 * processes: the thread waited for is then queued for a core). */
#ifndef JX_SRC_BASE_SPIN_H
#define JX_SRC_BASE_SPIN_H

#include <stdint.h>

/* One pause of a polling loop (lets the sibling hyperthread run). */
static inline void jx_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

int64_t jx_now_ns(void); /* CLOCK_MONOTONIC */

/* The longest a hand-off spins: well past a blocked call of a small
 * function end to end, short enough that a wait that outlasts it costs
 * little CPU. */
enum { JX_SPIN_MAX_NS = 50000 };

/* 1 when no more threads are runnable on the machine than `cpus` (the
 * kernel's count, the first number of /proc/loadavg's fourth field, read
 * at most every 10 ms; 1 where it cannot be read). */
int jx_machine_has_room(int cpus);

/* A hand-off site's recent waits (zero-initialized; updated by any thread). */
typedef struct {
  int64_t typical_ns; /* moving average of the waits, each capped at 2 * JX_SPIN_MAX_NS */
} jx_spin_site;

/* Polls ready(arg), with a pause between polls, for as long as site's
 * recent waits suggest (at most JX_SPIN_MAX_NS): 1 as soon as it holds, 0
 * when the time is up or spinning would take a core from work (the caller
 * then sleeps). */
int jx_spin_until(jx_spin_site *site, int (*ready)(const void *arg), const void *arg);
/* Adds one wait to site: the time from its start to the moment the other
 * side acted (not to when the waiter noticed, so a sleep does not count). */
void jx_spin_note(jx_spin_site *site, int64_t waited_ns);

#endif
