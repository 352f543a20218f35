/* Which launcher started a process (src/parallel/launcher.h), checked with
 * the variables each launcher sets, set by the test:
 *   - Slurm's compressed node lists, host by host, and malformed ones;
 *   - srun without MPI: a coordinator on the first host, port 61440 +
 *     SLURM_JOB_ID mod 4096 (JAX's), never MPI; two forked processes with
 *     srun's variables join as processes 0 and 1 of 2 (MPI would make each a
 *     job of one: "srun says process 1 of 2 but MPI says 0 of 1");
 *   - mpirun inside a Slurm allocation is mpirun; PMIx from its variables;
 *   - JX_COORDINATOR_ADDRESS wins over a launcher, whose numbers stand in
 *     for missing JX_NUM_PROCESSES / JX_PROCESS_ID;
 *   - the GPU a local rank takes, CUDA_VISIBLE_DEVICES respected;
 *   - processes with different device counts: every process fails naming
 *     each one's count. */
#define _GNU_SOURCE /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jx/jx.h>

#include "parallel/launcher.h"

static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_RANK",
                                            "OMPI_COMM_WORLD_SIZE",
                                            "OMPI_COMM_WORLD_LOCAL_RANK",
                                            "OMPI_COMM_WORLD_LOCAL_SIZE",
                                            "PMIX_RANK",
                                            "PMIX_NAMESPACE",
                                            "PMI_RANK",
                                            "PMI_SIZE",
                                            "SLURM_PROCID",
                                            "SLURM_NTASKS",
                                            "SLURM_STEP_NUM_TASKS",
                                            "SLURM_LOCALID",
                                            "SLURM_NODEID",
                                            "SLURM_STEP_NODELIST",
                                            "SLURM_JOB_NODELIST",
                                            "SLURM_JOB_ID",
                                            "SLURM_STEP_TASKS_PER_NODE",
                                            "SLURM_TASKS_PER_NODE",
                                            "JX_COORDINATOR_ADDRESS",
                                            "JX_NUM_PROCESSES",
                                            "JX_PROCESS_ID",
                                            "JX_LOCAL_PROCESS_ID",
                                            "JX_LOCAL_PROCESS_COUNT"};

static int clean_environment(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++)
    unsetenv(launcher_vars[i]);
  return 0;
}

static void srun_vars(int procid, int ntasks, const char *nodelist, int job) {
  char v[32];
  snprintf(v, sizeof v, "%d", procid);
  setenv("SLURM_PROCID", v, 1);
  setenv("SLURM_LOCALID", v, 1);
  snprintf(v, sizeof v, "%d", ntasks);
  setenv("SLURM_NTASKS", v, 1);
  setenv("SLURM_STEP_NODELIST", nodelist, 1);
  snprintf(v, sizeof v, "%d", job);
  setenv("SLURM_JOB_ID", v, 1);
}

static void expect_host(const char *list, int i, int count, const char *host) {
  char got[64] = "";
  assert_int_equal(jx_slurm_host(list, i, got, sizeof got), count);
  assert_string_equal(got, host);
}

/* jx_launch_detect fails, saying says */
static void expect_refusal(const char *says) {
  jx_launch l;
  jx_clear_error();
  assert_int_equal(jx_launch_detect(NULL, &l), JX_ERR_INVALID_ARGUMENT);
  fprintf(stderr, "  %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), says));
  jx_clear_error();
}

static void reads_slurm_node_lists(void **state) {
  (void)state;
  expect_host("node07", 0, 1, "node07");
  expect_host("node[01-04,07]", 0, 5, "node01");
  expect_host("node[01-04,07]", 3, 5, "node04");
  expect_host("node[01-04,07]", 4, 5, "node07");
  expect_host("login1,gpu[8-10]", 3, 4, "gpu10");
  expect_host("gpu[8-10]-ib,cpu1", 1, 4, "gpu9-ib");
  expect_host("rack[1-2]-n[01-02]", 1, 4, "rack1-n02");
  expect_host("rack[1-2]-n[01-02]", 2, 4, "rack2-n01");
  const char *bad[] = {"", "node[01-", "node[3-1]", "node[]", "node[1,]", "a,,b", "node]1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char host[64];
    assert_int_equal(jx_slurm_host(bad[i], 0, host, sizeof host), -1);
  }
}

static void srun_without_mpi_meets_at_the_first_host(void **state) {
  (void)state;
  srun_vars(1, 2, "node[07-08]", 4097);
  setenv("SLURM_LOCALID", "0", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "1(x2)", 1);
  setenv("SLURM_NODEID", "1", 1);
  jx_launch l;
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.name, "srun");
  assert_false(l.use_mpi);
  assert_string_equal(l.coordinator, "node07:61441"); /* 61440 + 4097 mod 4096 */
  assert_int_equal(l.rank, 1);
  assert_int_equal(l.size, 2);
  assert_int_equal(l.local_count, 1);
  /* the step's node list before the job's; tasks per node by node */
  setenv("SLURM_JOB_NODELIST", "login[1-9]", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "4(x2),2", 1);
  setenv("SLURM_NODEID", "2", 1);
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.coordinator, "node07:61441");
  assert_int_equal(l.local_count, 2);
  unsetenv("SLURM_STEP_NODELIST");
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.coordinator, "login1:61441");
  unsetenv("SLURM_JOB_NODELIST");
  expect_refusal("neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST");
  setenv("SLURM_STEP_NODELIST", "node[07-", 1);
  expect_refusal("SLURM_STEP_NODELIST='node[07-' is not a Slurm node");
  jx_clear_error();
}

static void mpi_launchers_come_first(void **state) {
  (void)state;
  /* mpirun in a batch script: Slurm's variables are the allocation's */
  srun_vars(0, 8, "node[01-08]", 17);
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  jx_launch l;
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.name, "mpirun");
  assert_true(l.use_mpi);
  assert_int_equal(l.rank, 3);
  assert_int_equal(l.size, 4);
  assert_int_equal(l.local_rank, 1);
  assert_int_equal(l.local_count, 2);
  clean_environment(NULL);
  /* srun --mpi=pmix */
  setenv("PMIX_RANK", "5", 1);
  setenv("PMIX_NAMESPACE", "slurm.pmix.17.0", 1);
  expect_refusal("no variable gives the process count");
  srun_vars(5, 6, "node[01-03]", 17);
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.name, "PMIx");
  assert_true(l.use_mpi);
  assert_int_equal(l.rank, 5);
  assert_int_equal(l.size, 6);
  clean_environment(NULL);
  setenv("PMI_RANK", "2", 1);
  setenv("PMI_SIZE", "2", 1);
  expect_refusal("PMI (mpiexec) says process 2 of 2");
  jx_clear_error();
}

static void the_coordinator_variables_come_before_a_launcher(void **state) {
  (void)state;
  srun_vars(1, 2, "node[07-08]", 4097); /* jx launch on the nodes of an allocation */
  setenv("JX_COORDINATOR_ADDRESS", "10.0.0.1:29400", 1);
  setenv("JX_NUM_PROCESSES", "8", 1);
  setenv("JX_PROCESS_ID", "6", 1);
  setenv("JX_LOCAL_PROCESS_ID", "2", 1);
  setenv("JX_LOCAL_PROCESS_COUNT", "4", 1);
  jx_launch l;
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_string_equal(l.name, "JX_COORDINATOR_ADDRESS");
  assert_false(l.use_mpi);
  assert_string_equal(l.coordinator, "10.0.0.1:29400");
  assert_int_equal(l.rank, 6);
  assert_int_equal(l.size, 8);
  assert_int_equal(l.local_rank, 2);
  assert_int_equal(l.local_count, 4);
  /* the launcher's numbers stand in for missing ones */
  unsetenv("JX_NUM_PROCESSES");
  unsetenv("JX_PROCESS_ID");
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_int_equal(l.rank, 1);
  assert_int_equal(l.size, 2);
  /* without a launcher they are needed */
  clean_environment(NULL);
  setenv("JX_COORDINATOR_ADDRESS", "10.0.0.1:29400", 1);
  expect_refusal("needs JX_NUM_PROCESSES (>= 1) and JX_PROCESS_ID");
  setenv("JX_NUM_PROCESSES", "2", 1);
  setenv("JX_PROCESS_ID", "0", 1);
  setenv("JX_COORDINATOR_ADDRESS", "10.0.0.1", 1);
  expect_refusal("'10.0.0.1' is not host:port");
  /* nothing at all: one process */
  clean_environment(NULL);
  assert_int_equal(jx_launch_detect(NULL, &l), JX_OK);
  assert_null(l.name);
  assert_int_equal(l.size, 1);
  jx_clear_error();
}

static void a_local_rank_picks_a_gpu(void **state) {
  (void)state;
  char why[512] = "";
  assert_int_equal(jx_gpu_for_local_rank(0, 1, NULL, 8, why, sizeof why), -1); /* alone: all */
  assert_int_equal(jx_gpu_for_local_rank(0, 0, NULL, 8, why, sizeof why), -1); /* unknown */
  assert_int_equal(jx_gpu_for_local_rank(3, 4, NULL, 4, why, sizeof why), 3);  /* one each */
  assert_int_equal(jx_gpu_for_local_rank(1, 2, "5,7", 8, why, sizeof why), 1); /* GPU 7 */
  assert_int_equal(jx_gpu_for_local_rank(2, 4, "5,7", 8, why, sizeof why), -2);
  assert_non_null(
      strstr(why, "4 processes of the job but 2 visible GPU(s) (CUDA_VISIBLE_DEVICES=5,7)"));
  assert_int_equal(jx_gpu_for_local_rank(0, 2, "", 8, why, sizeof why), -2); /* none visible */
  assert_non_null(strstr(why, "but 0 visible GPU(s)"));
  assert_int_equal(jx_gpu_for_local_rank(1, 2, NULL, 0, why, sizeof why), -2);
  /* through the public function: a job of one whose launcher says local process 1 of 2 (in a
   * child: a joined process keeps its one-process device table on purpose) */
  pid_t pid = fork();
  if (pid == 0) {
    setenv("JX_COORDINATOR_ADDRESS", "127.0.0.1:1", 1);
    setenv("JX_NUM_PROCESSES", "1", 1);
    setenv("JX_PROCESS_ID", "0", 1);
    setenv("JX_LOCAL_PROCESS_ID", "1", 1);
    setenv("JX_LOCAL_PROCESS_COUNT", "2", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    int ok = jx_distributed_initialize(NULL) == JX_OK && jx_process_local_index() == 1 &&
             jx_process_local_count() == 2 && jx_process_gpu(4) == 1;
    setenv("CUDA_VISIBLE_DEVICES", "3", 1);
    jx_clear_error();
    ok = ok && jx_process_gpu(4) == -2 &&
         strstr(jx_last_error(), "jx_process_gpu: this host has 2 processes") != NULL;
    if (!ok) fprintf(stderr, "  the public function: %s\n", jx_last_error());
    _exit(ok && jx_distributed_shutdown() == JX_OK ? 0 : 1);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- two processes started as srun would start them ---- */

/* their collectives go over the Gloo plugin, where it was built */
#ifdef JX_GLOO_PLUGIN_FILE
#define NEEDS_GLOO() setenv("JX_GLOO_PLUGIN", JX_GLOO_PLUGIN_FILE, 1)
#else
#define NEEDS_GLOO() skip()
#endif

/* a port nobody listens on now, in srun's range (61440 + job id mod 4096) */
static int free_slurm_port(void) {
  for (int tries = 0; tries < 200; tries++) {
    int port = 61440 + (int)((unsigned)getpid() * 7919u + (unsigned)tries * 131u) % 4096;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    if (ok) return port;
  }
  fail_msg("no free port in 61440..65535");
  return -1;
}

/* Forks two processes with srun's variables and `devices[p]` devices; each
 * writes what it saw (or its error) to out[p]. */
static void run_srun_pair(const int devices[2], char out[2][1024]) {
  int port = free_slurm_port(), fds[2][2];
  pid_t pid[2];
  for (int p = 0; p < 2; p++) {
    assert_int_equal(pipe(fds[p]), 0);
    if ((pid[p] = fork()) == 0) {
      close(fds[p][0]);
      srun_vars(p, 2, "127.0.0.1", port - 61440 + 4096 * 5);
      setenv("JX_COLLECTIVE_TIMEOUT", "20", 1);
      char msg[1024];
      if (jx_set_cpu_device_count(devices[p]) || jx_distributed_initialize(NULL))
        snprintf(msg, sizeof msg, "error: %s", jx_last_error());
      else
        snprintf(msg, sizeof msg, "process %d of %d, %d devices, launcher %s", jx_process_index(),
                 jx_process_count(), jx_device_count(), jx_distributed_launcher());
      ssize_t w = write(fds[p][1], msg, strlen(msg) + 1);
      _exit(w > 0 ? 0 : 1);
    }
    close(fds[p][1]);
  }
  for (int p = 0; p < 2; p++) {
    memset(out[p], 0, 1024);
    size_t got = 0;
    ssize_t r;
    while (got < 1023 && (r = read(fds[p][0], out[p] + got, 1023 - got)) > 0) got += (size_t)r;
    close(fds[p][0]);
    int status = -1;
    waitpid(pid[p], &status, 0);
    fprintf(stderr, "  [p%d] %s\n", p, out[p]);
    assert_true(WIFEXITED(status));
  }
}

static void srun_without_mpi_joins_two_processes(void **state) {
  (void)state;
  NEEDS_GLOO();
  char out[2][1024];
  run_srun_pair((const int[]){2, 2}, out);
  for (int p = 0; p < 2; p++) {
    char want[128];
    snprintf(want, sizeof want,
             "process %d of 2, 4 devices, launcher srun (coordinator 127.0.0.1:", p);
    assert_non_null(strstr(out[p], want));
  }
}

static void different_device_counts_are_named(void **state) {
  (void)state;
  NEEDS_GLOO();
  char out[2][1024];
  run_srun_pair((const int[]){2, 3}, out);
  for (int p = 0; p < 2; p++)
    assert_non_null(strstr(out[p], "the processes have different device counts (process 0: 2, "
                                   "process 1: 3); every process needs the same"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* first: these fork, before this process starts jx's threads */
      cmocka_unit_test_setup(srun_without_mpi_joins_two_processes, clean_environment),
      cmocka_unit_test_setup(different_device_counts_are_named, clean_environment),
      cmocka_unit_test_setup(reads_slurm_node_lists, clean_environment),
      cmocka_unit_test_setup(srun_without_mpi_meets_at_the_first_host, clean_environment),
      cmocka_unit_test_setup(mpi_launchers_come_first, clean_environment),
      cmocka_unit_test_setup(the_coordinator_variables_come_before_a_launcher, clean_environment),
      cmocka_unit_test_setup(a_local_rank_picks_a_gpu, clean_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
