/* libjx_gloo.so: jx's collectives over processes that met at a coordinator,
 * on Gloo's TCP transport and algorithms (src/parallel/mpi_plugin.h says
 * what each entry does; the only C++ of jx is here).
 *
 * Rendezvous. Each communicator is a Gloo context of its members, connected
 * pair by pair through the job's key-value store: member r publishes, for
 * each other member q, the address of its side of the pair (r, q) under
 * "<communicator>/<r>/<q>" and reads the one q published for it; every
 * process reads and writes O(members) small keys, all processes at once.
 * The processes share one TCP device (one listening socket, one event
 * loop thread). A split first agrees, with an all-gather over the context
 * of all processes made at init, on what is made (check) and who is in it.
 * A communicator of all processes in their order shares that context (its
 * collectives carry a tag of their own, the split's serial number, so they
 * never meet the splits' all-gathers): the full mesh of pairs is made once.
 *
 * Collectives. all_reduce up to SMALL_BYTES is Gloo's all-gather of every
 * member's buffer, then each member reduces them in member order (the same
 * expression everywhere); larger ones are Gloo's ring (every element is
 * reduced along one chain of members and handed to the others). Either way
 * every process gets the same bits. The reductions are jx's (integers
 * wrap, NaN propagates through max and min, bool is or / and).
 * reduce_scatter sends each member its block of every member's buffer
 * (Gloo's all-to-all) and reduces them there in member order, so each
 * process moves only its share and the bits are the small all-reduce's;
 * all_gather, all_to_all, broadcast and barrier are Gloo's allgatherv,
 * alltoallv, broadcast and barrier. Every collective carries its deadline
 * into Gloo.
 *
 * Failures. Gloo says that an operation timed out, or that a peer's
 * connection closed. To name the process that did not arrive, each member
 * that failed marks in the store that it reached this collective (the
 * communicator's serial and the collective's sequence number), then looks,
 * for a second at most, for the others' marks: the members without a mark
 * never got there. Those whose process ended are named so: Gloo's message
 * names their address, or the store saw their connection close
 * ("closed/<id>"). A process that ends after a failure of its own says so
 * in the store first ("gone/<id>"), so that the others name the process
 * that failed first rather than those that followed. A failed communicator
 * is broken: its later collectives fail at once.
 *
 * Interruption. jx_gloo_interrupt (another thread: a heartbeat watcher)
 * fails every collective at once, those in flight included: it shuts down
 * the sockets of Gloo's pairs (found by their ends: one is this process's or
 * a peer's Gloo listener), whose closing Gloo's event loop reports to the
 * waiting operations; their messages carry the reason given. */
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

extern "C" {
#include "../../parallel/mpi_plugin.h"
}

namespace {

/* all-reduces up to this many bytes are one all-gather and a reduction on
 * every member (half the steps of a ring: latency decides there) */
constexpr size_t SMALL_BYTES = 64 << 10;

/* the jx_dtype numbers (jx/array.h), repeated so the plugin needs no jx header */
enum { D_BOOL, D_I8, D_I16, D_I32, D_I64, D_U8, D_U16, D_U32, D_U64, D_F16, D_BF16, D_F32, D_F64 };

const jx_plugin_store *store;
int my_id, nproc;
std::string my_host;
double default_timeout;
bool any_failure;
std::shared_ptr<gloo::transport::Device> device;

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::chrono::milliseconds ms(double s) {
  return std::chrono::milliseconds(s > 1e9 ? (int64_t)1e12 : (int64_t)(s * 1000) + 1);
}

/* ---- the store, as Gloo's rendezvous wants it ---- */

std::vector<char> store_get(const std::string &key, double timeout_s) {
  char msg[JX_MPI_MSG];
  void *v = nullptr;
  size_t len = 0;
  if (store->get(store->self, key.c_str(), timeout_s, &v, &len, msg, sizeof msg))
    throw failure(msg);
  std::vector<char> r((char *)v, (char *)v + len);
  free(v);
  return r;
}

void store_set(const std::string &key, const std::vector<char> &value) {
  char msg[JX_MPI_MSG];
  if (store->set(store->self, key.c_str(), value.data(), value.size(), msg, sizeof msg))
    throw failure(msg);
}

/* The listening addresses of this process's Gloo device and of its peers':
 * every socket of Gloo's pairs has one of them at one end (for
 * jx_gloo_interrupt). Under listeners_mu. */
std::mutex listeners_mu;
std::vector<sockaddr_storage> listeners;

void note_listener(const sockaddr_storage &a) {
  std::lock_guard<std::mutex> hold(listeners_mu);
  for (auto &l : listeners)
    if (!memcmp(&l, &a, sizeof a)) return;
  listeners.push_back(a);
}

bool same_endpoint(const sockaddr_storage &a, const sockaddr_storage &b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    auto &x = (const sockaddr_in &)a, &y = (const sockaddr_in &)b;
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  auto &x = (const sockaddr_in6 &)a, &y = (const sockaddr_in6 &)b;
  return x.sin6_port == y.sin6_port && !memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr);
}

/* Shuts down every socket of Gloo's pairs: Gloo's event loop sees them close
 * and fails the operations waiting on them at once. */
void shut_pairs(void) {
  std::lock_guard<std::mutex> hold(listeners_mu);
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  while (struct dirent *e = readdir(d)) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d)) continue;
    sockaddr_storage mine{}, theirs{};
    socklen_t ml = sizeof mine, tl = sizeof theirs;
    if (getsockname(fd, (sockaddr *)&mine, &ml) || getpeername(fd, (sockaddr *)&theirs, &tl))
      continue; /* not a connected socket */
    for (auto &l : listeners)
      if (same_endpoint(mine, l) || same_endpoint(theirs, l)) {
        shutdown(fd, SHUT_RDWR);
        break;
      }
  }
  closedir(d);
}

/* A context connected through the store under prefix. */
class context : public gloo::rendezvous::Context {
public:
  context(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  /* peer: per member, its side's address as Gloo's messages print it */
  void connect(const std::string &prefix, double timeout_s, std::vector<std::string> &peer) {
    auto tc = device->createContext(rank, size);
    tc->setTimeout(ms(timeout_s));
    for (int q = 0; q < size; q++)
      if (q != rank) {
        auto &pair = tc->createPair(q);
        note_listener(
            dynamic_cast<const gloo::transport::tcp::Address &>(pair->address()).getSockaddr());
        store_set(prefix + std::to_string(rank) + "/" + std::to_string(q), pair->address().bytes());
      }
    peer.assign((size_t)size, "");
    for (int q = 0; q < size; q++)
      if (q != rank) {
        auto bytes = store_get(prefix + std::to_string(q) + "/" + std::to_string(rank), timeout_s);
        gloo::transport::tcp::Address theirs(bytes);
        peer[(size_t)q] = theirs.str();
        note_listener(theirs.getSockaddr());
        tc->getPair(q)->connect(bytes);
      }
    device_ = device;
    transportContext_ = std::move(tc);
  }
};

} // namespace

struct jx_mpi_comm {
  std::shared_ptr<context> ctx;
  std::vector<int> world;        /* per member: its process id */
  std::vector<std::string> peer; /* per member: its side's address, as Gloo's messages print it */
  std::string label, serial;
  uint32_t tag = 0; /* Gloo's tag of its collectives: communicators that share a context differ */
  uint64_t seq = 0; /* collectives so far: the same count on every member */
  std::mutex mu;    /* one collective at a time */
  bool broken = false;
  std::string reason;
};

namespace {

std::mutex split_mu;
jx_mpi_comm *control;                 /* every process, for splits and the final barrier */
std::vector<jx_mpi_comm *> all_comms; /* under comms_mu */
std::mutex comms_mu;
std::string interruption; /* why jx_gloo_interrupt stopped every collective; under comms_mu */

void remember(jx_mpi_comm *c) {
  std::lock_guard<std::mutex> hold(comms_mu);
  all_comms.push_back(c);
}
unsigned split_serial;

jx_mpi_comm *make_comm(int rank, std::vector<int> world, const std::string &label,
                       const std::string &serial, double timeout_s) {
  auto c = std::make_unique<jx_mpi_comm>();
  c->ctx = std::make_shared<context>(rank, (int)world.size());
  c->ctx->setTimeout(ms(timeout_s));
  c->ctx->connect(serial + "/", timeout_s, c->peer);
  /* every member's side of every pair is up before any member uses (or
   * leaves) the communicator */
  if (c->world.size() > 1) {
    gloo::BarrierOptions meet(c->ctx);
    meet.setTimeout(ms(timeout_s));
    gloo::barrier(meet);
  }
  c->world = std::move(world);
  c->label = label;
  c->serial = serial;
  remember(c.get());
  return c.release();
}

/* ---- reductions: out = a op b ---- */

template <typename T, typename U> void int_reduce(int op, T *o, const T *a, const T *b, size_t n) {
  switch (op) {
  case JX_MPI_SUM:
    for (size_t i = 0; i < n; i++) o[i] = (T)((U)a[i] + (U)b[i]);
    break;
  case JX_MPI_PROD:
    for (size_t i = 0; i < n; i++) o[i] = (T)((U)a[i] * (U)b[i]);
    break;
  case JX_MPI_MAX:
    for (size_t i = 0; i < n; i++) o[i] = a[i] > b[i] ? a[i] : b[i];
    break;
  default:
    for (size_t i = 0; i < n; i++) o[i] = a[i] < b[i] ? a[i] : b[i];
  }
}

template <typename T> void float_reduce(int op, T *o, const T *a, const T *b, size_t n) {
  switch (op) {
  case JX_MPI_SUM:
    for (size_t i = 0; i < n; i++) o[i] = a[i] + b[i];
    break;
  case JX_MPI_PROD:
    for (size_t i = 0; i < n; i++) o[i] = a[i] * b[i];
    break;
  case JX_MPI_MAX: /* NaN propagates (XLA's semantics) */
    for (size_t i = 0; i < n; i++)
      o[i] = std::isnan(a[i]) || std::isnan(b[i]) ? a[i] + b[i] : std::max(a[i], b[i]);
    break;
  default:
    for (size_t i = 0; i < n; i++)
      o[i] = std::isnan(a[i]) || std::isnan(b[i]) ? a[i] + b[i] : std::min(a[i], b[i]);
  }
}

size_t elem_size(int dt) {
  switch (dt) {
  case D_BOOL:
  case D_I8:
  case D_U8: return 1;
  case D_I16:
  case D_U16: return 2;
  case D_I32:
  case D_U32:
  case D_F32: return 4;
  case D_I64:
  case D_U64:
  case D_F64: return 8;
  default: return 0; /* f16, bf16: the callers reduce them in f32 */
  }
}

gloo::AllreduceOptions::Func reducer(int dt, int op) {
#define R(T, CALL)                                                                                 \
  [op](void *o, const void *a, const void *b, size_t n) {                                          \
    CALL(op, (T *)o, (const T *)a, (const T *)b, n);                                               \
  }
  switch (dt) {
  case D_BOOL: { /* or (sum, max), and (prod, min) */
    int bop = op == JX_MPI_SUM || op == JX_MPI_MAX ? JX_MPI_MAX : JX_MPI_MIN;
    return [bop](void *o, const void *a, const void *b, size_t n) {
      int_reduce<uint8_t, uint32_t>(bop, (uint8_t *)o, (const uint8_t *)a, (const uint8_t *)b, n);
    };
  }
  case D_I8: return R(int8_t, (int_reduce<int8_t, uint32_t>));
  case D_I16: return R(int16_t, (int_reduce<int16_t, uint32_t>));
  case D_I32: return R(int32_t, (int_reduce<int32_t, uint32_t>));
  case D_I64: return R(int64_t, (int_reduce<int64_t, uint64_t>));
  case D_U8: return R(uint8_t, (int_reduce<uint8_t, uint32_t>));
  case D_U16: return R(uint16_t, (int_reduce<uint16_t, uint32_t>));
  case D_U32: return R(uint32_t, (int_reduce<uint32_t, uint32_t>));
  case D_U64: return R(uint64_t, (int_reduce<uint64_t, uint64_t>));
  case D_F32: return R(float, float_reduce<float>);
  default: return R(double, float_reduce<double>);
  }
#undef R
}

/* ---- the collectives ---- */

struct call {
  jx_mpi_comm *c;
  std::chrono::milliseconds timeout;
};

/* in place on buf (count elements of dt) */
void allreduce(const call &k, int dt, int op, void *buf, size_t count) {
  size_t n = k.c->world.size(), es = elem_size(dt), bytes = count * es;
  if (n == 1 || !count) return;
  if (bytes <= SMALL_BYTES) { /* every member's buffer to every member, reduced in member order */
    std::vector<char> all(n * bytes);
    gloo::AllgathervOptions o(k.c->ctx);
    o.setTimeout(k.timeout);
    o.setTag(k.c->tag);
    o.setInput((char *)buf, bytes);
    o.setOutput(all.data(), std::vector<size_t>(n, bytes));
    gloo::allgatherv(o);
    auto reduce = reducer(dt, op);
    for (size_t q = 1; q < n; q++) reduce(all.data(), all.data(), all.data() + q * bytes, count);
    memcpy(buf, all.data(), bytes);
    return;
  }
  gloo::AllreduceOptions o(k.c->ctx);
  o.setTimeout(k.timeout);
  o.setTag(k.c->tag);
  o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  o.setReduceFunction(reducer(dt, op));
  switch (elem_size(dt)) {
  case 1: o.setOutput((uint8_t *)buf, count); break;
  case 2: o.setOutput((uint16_t *)buf, count); break;
  case 4: o.setOutput((uint32_t *)buf, count); break;
  default: o.setOutput((uint64_t *)buf, count);
  }
  gloo::allreduce(o);
}

/* the displacements are the prefix sums of the counts */
bool packed(const int64_t *counts, const int64_t *displs, size_t n) {
  int64_t at = 0;
  for (size_t q = 0; q < n; q++) {
    if (displs[q] != at) return false;
    at += counts[q];
  }
  return true;
}

void allgatherv(const call &k, const jx_mpi_op *op) {
  size_t n = k.c->world.size(), me = (size_t)k.c->ctx->rank, total = 0;
  std::vector<size_t> counts(n);
  for (size_t q = 0; q < n; q++) total += counts[q] = (size_t)op->rcounts[q];
  char *recv = (char *)op->recv;
  /* Gloo's input is a buffer of its own (it copies it into place) */
  std::vector<char> mine(op->send ? 0 : counts[me]);
  if (!op->send && counts[me]) memcpy(mine.data(), recv + op->rdispls[me], counts[me]);
  bool direct = packed(op->rcounts, op->rdispls, n);
  std::vector<char> out(direct ? 0 : total);
  gloo::AllgathervOptions o(k.c->ctx);
  o.setTimeout(k.timeout);
  o.setTag(k.c->tag);
  o.setInput(op->send ? (char *)op->send : mine.data(), counts[me]);
  o.setOutput(direct ? recv : out.data(), counts);
  gloo::allgatherv(o);
  for (size_t q = 0, at = 0; !direct && q < n; at += counts[q++])
    memcpy(recv + op->rdispls[q], out.data() + at, counts[q]);
}

void alltoallv(const call &k, const jx_mpi_op *op) {
  size_t n = k.c->world.size();
  std::vector<int64_t> sc(op->scounts, op->scounts + n), rc(op->rcounts, op->rcounts + n);
  bool sdirect = packed(op->scounts, op->sdispls, n), rdirect = packed(op->rcounts, op->rdispls, n);
  std::vector<char> sbuf, rbuf;
  const char *send = (const char *)op->send;
  char *recv = (char *)op->recv;
  if (!sdirect) {
    for (size_t q = 0; q < n; q++)
      sbuf.insert(sbuf.end(), send + op->sdispls[q], send + op->sdispls[q] + sc[q]);
  }
  int64_t rtotal = 0;
  for (size_t q = 0; q < n; q++) rtotal += rc[q];
  if (!rdirect) rbuf.resize((size_t)rtotal);
  gloo::AlltoallvOptions o(k.c->ctx);
  o.setTimeout(k.timeout);
  o.setTag(k.c->tag);
  o.setInput(sdirect ? (char *)send : sbuf.data(), sc);
  o.setOutput(rdirect ? recv : rbuf.data(), rc);
  gloo::alltoallv(o);
  for (size_t q = 0, at = 0; !rdirect && q < n; at += (size_t)rc[q++])
    memcpy(recv + op->rdispls[q], rbuf.data() + at, (size_t)rc[q]);
}

/* Member q's block of every member's buffer goes to member q (Gloo's
 * all-to-all), which reduces the blocks it got in member order: each process
 * sends and receives its share only ((members-1)/members of the buffer), and
 * every element is the same expression as in the small all-reduce. */
void reduce_scatter(const call &k, const jx_mpi_op *op) {
  size_t n = k.c->world.size(), me = (size_t)k.c->ctx->rank, es = elem_size(op->dtype);
  size_t mine = (size_t)op->rcounts[me] * es, total = 0;
  std::vector<int64_t> sc(n), rc(n, (int64_t)mine);
  for (size_t q = 0; q < n; q++) total += (size_t)(sc[q] = op->rcounts[q] * (int64_t)es);
  const char *send = op->send ? (const char *)op->send : (const char *)op->recv;
  if (!total) return;
  std::vector<char> blocks(n * mine);
  if (n == 1) {
    memcpy(blocks.data(), send, mine);
  } else {
    gloo::AlltoallvOptions o(k.c->ctx);
    o.setTimeout(k.timeout);
    o.setTag(k.c->tag);
    o.setInput((char *)send, sc);
    o.setOutput(blocks.data(), rc);
    gloo::alltoallv(o);
  }
  auto reduce = reducer(op->dtype, op->op);
  size_t count = (size_t)op->rcounts[me];
  for (size_t q = 1; q < n && count; q++)
    reduce(blocks.data(), blocks.data(), blocks.data() + q * mine, count);
  if (mine) memcpy(op->recv, blocks.data(), mine);
}

void run_op(const call &k, const jx_mpi_op *op) {
  jx_mpi_comm *c = k.c;
  size_t es = elem_size(op->dtype), n = c->world.size();
  switch (op->kind) {
  case JX_MPI_ALLREDUCE:
    if (!es) throw failure("dtype " + std::to_string(op->dtype) + " cannot be reduced over Gloo");
    if (op->send != op->recv && op->count) memcpy(op->recv, op->send, op->count * es);
    allreduce(k, op->dtype, op->op, op->recv, op->count);
    return;
  case JX_MPI_REDUCE_SCATTER:
    if (!es) throw failure("dtype " + std::to_string(op->dtype) + " cannot be reduced over Gloo");
    reduce_scatter(k, op);
    return;
  case JX_MPI_ALLGATHERV: allgatherv(k, op); return;
  case JX_MPI_ALLTOALLV: alltoallv(k, op); return;
  case JX_MPI_BCAST: {
    if (n == 1 || !op->count) return;
    gloo::BroadcastOptions o(c->ctx);
    o.setTimeout(k.timeout);
    o.setTag(k.c->tag);
    o.setTag(k.c->tag);
    o.setRoot(op->root);
    o.setOutput((char *)op->recv, op->count);
    gloo::broadcast(o);
    return;
  }
  case JX_MPI_BARRIER: {
    if (n == 1) return;
    gloo::BarrierOptions o(c->ctx);
    o.setTimeout(k.timeout);
    o.setTag(k.c->tag);
    o.setTag(k.c->tag);
    gloo::barrier(o);
    return;
  }
  }
  throw failure("unknown collective " + std::to_string(op->kind));
}

const char *kind_name(int k) {
  static const char *const n[] = {"all_reduce", "all_gather", "broadcast",
                                  "barrier",    "all_to_all", "reduce_scatter"};
  return k >= 0 && k <= JX_MPI_REDUCE_SCATTER ? n[k] : "?";
}

bool key_set(const std::string &key) {
  char msg[JX_MPI_MSG];
  void *v = nullptr;
  size_t len;
  int st = store->get(store->self, key.c_str(), 0, &v, &len, msg, sizeof msg);
  free(v);
  return !st;
}

std::string list(const std::vector<int> &ids) {
  std::string s = ids.size() == 1 ? "process" : "processes";
  for (size_t i = 0; i < ids.size(); i++) s += (i ? ", " : " ") + std::to_string(ids[i]);
  return s;
}

/* Why collective seq on c failed (what Gloo said: why), naming who did not
 * arrive (the header comment says how). */
std::string blame(jx_mpi_comm *c, uint64_t seq, const std::string &why, double timeout_s) {
  size_t n = c->world.size(), me = (size_t)c->ctx->rank;
  std::string at = c->serial + "/arrived/" + std::to_string(seq) + "/";
  char msg[JX_MPI_MSG];
  std::vector<std::string> keys;
  std::vector<const char *> kp;
  for (size_t q = 0; q < n; q++)
    if (q != me) keys.push_back(at + std::to_string(q));
  for (auto &k : keys) kp.push_back(k.c_str());
  bool marked = !store->set(store->self, (at + std::to_string(me)).c_str(), "", 0, msg, sizeof msg);
  /* the store answers (a missing mark is its timeout, not a lost coordinator) */
  bool all_came = marked && !store->wait(store->self, kp.data(), (int)kp.size(),
                                         std::min(1.0, timeout_s), msg, sizeof msg);
  bool store_ok = marked && (all_came || strstr(msg, "not set within"));
  std::vector<int> ended, late, failed_first;
  for (size_t q = 0; q < n; q++) {
    if (q == me) continue;
    int id = c->world[q];
    std::string ids = std::to_string(id);
    bool came = store_ok && (all_came || key_set(at + std::to_string(q)));
    bool closed = (!c->peer[q].empty() && why.find(c->peer[q]) != std::string::npos) ||
                  (store_ok && key_set("closed/" + ids));
    if (came && !closed) continue;
    if (store_ok && key_set("gone/" + ids))
      failed_first.push_back(id);
    else if (closed)
      ended.push_back(id);
    else if (store_ok)
      late.push_back(id);
  }
  char t[32];
  snprintf(t, sizeof t, "%g", timeout_s);
  if (!ended.empty())
    return list(ended) + " did not arrive within " + t +
           (ended.size() == 1 ? " s (it ended)" : " s (they ended)");
  if (!late.empty()) return list(late) + " did not arrive within " + t + " s";
  if (!failed_first.empty())
    return list(failed_first) + " did not arrive within " + t +
           (failed_first.size() == 1 ? " s (it ended after a failure of its own)"
                                     : " s (they ended after failures of their own)");
  if (why.find("Timed out") != std::string::npos)
    return "did not finish within " + std::string(t) + " s: " + why;
  return "failed: " + why;
}

std::string members(const jx_mpi_comm *c) {
  std::string s;
  for (size_t q = 0; q < c->world.size(); q++) s += (q ? "," : "") + std::to_string(c->world[q]);
  return s;
}

int fail(char *msg, size_t cap, const std::string &text) {
  any_failure = true;
  snprintf(msg, cap, "%s", text.c_str());
  return 1;
}

/* ---- the table ---- */

int g_init(double timeout_s, int *rank, int *size, char *msg, size_t cap) {
  default_timeout = timeout_s;
  try {
    gloo::transport::tcp::attr attr(my_host.c_str());
    device = gloo::transport::tcp::CreateDevice(attr);
    std::vector<int> world(nproc);
    for (int q = 0; q < nproc; q++) world[q] = q;
    control = make_comm(my_id, world, "all processes", "control", timeout_s);
  } catch (const std::exception &e) {
    snprintf(msg, cap, "process %d: connecting the processes over Gloo: %s", my_id, e.what());
    return 1;
  }
  *rank = my_id;
  *size = nproc;
  return 0;
}

int g_split(int member, int key, uint64_t check, const char *label, double timeout_s,
            jx_mpi_comm **out, char *msg, size_t cap) {
  *out = nullptr;
  std::lock_guard<std::mutex> hold(split_mu);
  std::string what = std::string("making the communicators of ") + label + ": ";
  std::vector<uint64_t> all(3 * (size_t)nproc);
  uint64_t mine[3] = {check, (uint64_t)(member != 0), (uint64_t)(int64_t)key};
  try {
    std::lock_guard<std::mutex> one(control->mu);
    gloo::AllgathervOptions o(control->ctx);
    o.setTimeout(ms(timeout_s));
    o.setTag(control->tag);
    o.setInput(mine, 3);
    o.setOutput(all.data(), std::vector<size_t>((size_t)nproc, 3));
    control->seq++;
    gloo::allgatherv(o);
  } catch (const std::exception &e) {
    return fail(msg, cap, what + blame(control, control->seq, e.what(), timeout_s));
  }
  std::vector<int> differ;
  for (int q = 1; q < nproc; q++)
    if (all[3 * (size_t)q] != all[0]) differ.push_back(q);
  if (!differ.empty())
    return fail(msg, cap,
                what + list(differ) +
                    " disagree with process 0 on what they make (every process must create the "
                    "same meshes that span processes, in the same order)");
  unsigned number = ++split_serial; /* every process counts every split */
  std::string serial = "s" + std::to_string(number);
  std::vector<std::pair<int64_t, int>> order;
  for (int q = 0; q < nproc; q++)
    if (all[3 * (size_t)q + 1]) order.push_back({(int64_t)all[3 * (size_t)q + 2], q});
  std::sort(order.begin(), order.end());
  if (!member) return 0;
  std::vector<int> world;
  int me = 0;
  for (auto &m : order) {
    if (m.second == my_id) me = (int)world.size();
    world.push_back(m.second);
  }
  bool everyone = (int)world.size() == nproc;
  for (int q = 0; q < nproc && everyone; q++) everyone = world[(size_t)q] == q;
  if (everyone) {
    auto c = std::make_unique<jx_mpi_comm>();
    c->ctx = control->ctx;
    c->world = world;
    c->peer = control->peer;
    c->label = label;
    c->serial = serial;
    c->tag = number;
    remember(c.get());
    *out = c.release();
    return 0;
  }
  try {
    *out = make_comm(me, world, label, serial, timeout_s);
  } catch (const std::exception &e) {
    return fail(msg, cap, what + "connecting its members over Gloo: " + e.what());
  }
  return 0;
}

int g_run(jx_mpi_comm *c, const jx_mpi_op *op, double timeout_s, char *msg, size_t cap) {
  std::lock_guard<std::mutex> hold(c->mu);
  if (c->broken)
    return fail(msg, cap,
                "the Gloo communicator is unusable after an earlier failure: " + c->reason);
  uint64_t seq = ++c->seq;
  try {
    run_op(call{c, ms(timeout_s)}, op);
    return 0;
  } catch (const failure &e) {
    return fail(msg, cap, std::string(kind_name(op->kind)) + ": " + e.what());
  } catch (const std::exception &e) {
    /* Gloo's pairs are out of step now: nothing more on c */
    std::string why;
    {
      std::lock_guard<std::mutex> hold(comms_mu);
      why = interruption;
    }
    c->broken = true;
    c->reason = std::string(kind_name(op->kind)) + " over Gloo among processes " + members(c) +
                " (" + c->label +
                "): " + (why.empty() ? blame(c, seq, e.what(), timeout_s) : "interrupted: " + why);
    return fail(msg, cap, c->reason);
  }
}

/* Orderly: a barrier of all processes within the deadline. After a failure
 * (or abort_now) this process ends at once with code, as MPI_Abort ends a
 * job: it says so in the store, its connections close, and every other
 * process's next (or current) collective fails at once. */
int g_finalize(int abort_now, int code) {
  if (!control) return 0;
  if (abort_now || any_failure) {
    char msg[JX_MPI_MSG];
    store->set(store->self, ("gone/" + std::to_string(my_id)).c_str(), "", 0, msg, sizeof msg);
    fflush(nullptr);
    _exit(code ? code : 1);
  }
  jx_mpi_op b = {};
  b.kind = JX_MPI_BARRIER;
  char msg[JX_MPI_MSG] = "";
  int st = g_run(control, &b, default_timeout, msg, sizeof msg);
  if (st) fprintf(stderr, "jx: the final barrier over Gloo failed: %s\n", msg);
  /* meshes keep their pointers, but never use them after shutdown */
  std::lock_guard<std::mutex> hold(comms_mu);
  for (jx_mpi_comm *c : all_comms) delete c;
  all_comms.clear();
  control = nullptr;
  device.reset();
  return st;
}

const char *g_version(void) {
  static char v[128];
  snprintf(v, sizeof v, "Gloo %d.%d.%d (TCP)", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
           GLOO_VERSION_PATCH);
  return v;
}

const jx_mpi_api api = {JX_MPI_ABI, g_init, g_split, g_run, g_finalize, g_version};

} // namespace

/* Stops every collective of the process, those in flight included: they
 * fail at once saying why (the job cannot go on: a peer stopped beating),
 * and so does every later one. Any thread may call it. */
extern "C" __attribute__((visibility("default"))) void jx_gloo_interrupt(const char *why) {
  std::lock_guard<std::mutex> hold(comms_mu);
  interruption = why && *why ? why : "interrupted";
  shut_pairs();
}

extern "C" __attribute__((visibility("default"))) const jx_mpi_api *
jx_gloo_plugin_api(const jx_plugin_store *s, int rank, int size, const char *host) {
  store = s;
  my_id = rank;
  nproc = size;
  my_host = host;
  return &api;
}
