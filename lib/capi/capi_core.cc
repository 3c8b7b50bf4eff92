// C API: version check, errors, transports, communicators, registrations, request table.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "capi_impl.h"
#include "gw_config.h"

using gw::Code;
using gw::Status;
using gw::capi::guard;
using gw::capi::invalid;
using gw::capi::need;

// The C codes are the C++ codes: a cast converts.
static_assert(GW_ERR_INVALID_ARGUMENT == static_cast<int>(Code::kInvalidArgument));
static_assert(GW_ERR_REMOTE == static_cast<int>(Code::kRemoteError));
static_assert(GW_ERR_INTERNAL == static_cast<int>(Code::kInternal));
static_assert(GW_ERR_ABORTED == static_cast<int>(Code::kAborted));
static_assert(GW_UINT8 == static_cast<int>(gw::DataType::kUInt8));
static_assert(GW_AVG == static_cast<int>(gw::ReduceOp::kAvg));

namespace {

std::atomic<bool> g_initialized{false};
thread_local std::string t_error;
thread_local int t_error_rank = -1;
// Used when the text itself could not be allocated.
thread_local const char* t_error_fallback = nullptr;

std::string version_name(uint32_t v) {
  return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF);
}

Status check_initialized() {
  if (g_initialized.load(std::memory_order_acquire)) return Status();
  return Status(Code::kInvalidArgument, "call gw_init(GW_API_VERSION) first");
}

// Build the communicator over a connected Group, which takes the transport.
Status make_comm(std::shared_ptr<gw::Store> store, std::unique_ptr<gw::Transport> tr, int rank,
                 int size, int64_t timeout_ms, gw_comm_t** out) {
  if (timeout_ms < 0) return invalid("timeout_ms is negative");
  GW_ASSIGN_OR_RETURN(gw::Config cfg, gw::Config::global());
  GW_ASSIGN_OR_RETURN(int64_t dflt, cfg.get_int("coll.timeout_ms"));
  auto c = std::make_unique<gw_comm>();
  c->timeout = gw::Millis(timeout_ms > 0 ? timeout_ms : dflt);
  GW_ASSIGN_OR_RETURN(c->group,
                      gw::Group::create(std::move(store), std::move(tr), rank, size, c->timeout));
  gw::CommOptions opts;
  opts.timeout = c->timeout;
  GW_ASSIGN_OR_RETURN(c->comm, gw::Communicator::create(*c->group, opts));
  c->g = c->group.get();
  *out = c.release();
  return Status();
}

}  // namespace

namespace gw::capi {

void clear_error() noexcept {
  t_error.clear();
  t_error_rank = -1;
  t_error_fallback = nullptr;
}

gw_status_t set_error(const char* fn, const gw_comm* c, const Status& st) noexcept {
  t_error_rank = st.rank();
  try {
    t_error = fn;
    if (c && c->g) {
      t_error +=
          " [rank " + std::to_string(c->g->rank()) + "/" + std::to_string(c->g->size()) + "]";
    }
    t_error += ": ";
    t_error += st.to_string();
  } catch (...) {
    t_error_fallback = "out of memory while formatting the error";
  }
  return static_cast<gw_status_t>(st.code());
}

Status check_comm(const gw_comm* c) {
  GW_RETURN_IF_ERROR(need(c, "comm"));
  if (!c->broken.ok()) {
    return Status(c->broken.code(), "communicator unusable after an earlier error (destroy it): " +
                                        std::string(c->broken.message()))
        .with_rank(c->broken.rank());
  }
  return Status();
}

Result<size_t> dtype_bytes(gw_dtype_t dt) {
  auto v = static_cast<int>(dt);
  if (v < 0 || v >= kNumDataTypes) {
    return invalid("dtype " + std::to_string(v) + " is not a gw_dtype_t (GW_FLOAT32 .. GW_UINT8)");
  }
  return dtype_size(static_cast<DataType>(v));
}

Status check_count(size_t count, size_t es, size_t blocks) {
  const size_t max = std::numeric_limits<size_t>::max() / 2;
  if (es && blocks && count > max / es / blocks)
    return invalid("count " + std::to_string(count) + " overflows the buffer size");
  return Status();
}

gw_request* add_request(gw_comm& c, bool is_coll) {
  if (c.free_reqs.empty()) {
    c.reqs.push_back(std::make_unique<gw_request>());
    c.reqs.back()->slot = static_cast<uint32_t>(c.reqs.size() - 1);
    c.free_reqs.reserve(c.reqs.size());
    c.free_reqs.push_back(c.reqs.back()->slot);
  }
  gw_request* r = c.reqs[c.free_reqs.back()].get();
  c.free_reqs.pop_back();
  r->comm = &c;
  r->gen = (r->gen + 1) & 0xFFFFFF;
  r->active = true;
  r->is_coll = is_coll;
  r->done = false;
  r->status = Status();
  r->received = nullptr;
  r->source = nullptr;
  (is_coll ? c.colls_in_flight : c.p2p_in_flight)++;
  return r;
}

void finish_request(gw_request* r) {
  gw_comm& c = *r->comm;
  (r->is_coll ? c.colls_in_flight : c.p2p_in_flight)--;
  r->active = false;
  r->tmp_mr = MemoryRegion();
  c.free_reqs.push_back(r->slot);
}

}  // namespace gw::capi

extern "C" {

gw_status_t gw_init(uint32_t v) {
  return guard("gw_init", nullptr, [&] {
    if (v >> 16 != GW_API_VERSION_MAJOR || (v & 0xFFFF) > GW_API_VERSION_MINOR) {
      return Status(Code::kNotSupported,
                    "this program was compiled against gradwire C API " + version_name(v) +
                        " but the library implements " + version_name(GW_API_VERSION) +
                        " (the major versions must match and the library's minor be at least "
                        "the program's): rebuild it against the installed gradwire.h");
    }
    g_initialized.store(true, std::memory_order_release);
    return Status();
  });
}

uint32_t gw_api_version(void) { return GW_API_VERSION; }

const char* gw_last_error(void) { return t_error_fallback ? t_error_fallback : t_error.c_str(); }

int gw_last_error_rank(void) { return t_error_rank; }

const char* gw_status_name(gw_status_t s) {
  auto v = static_cast<int>(s);
  if (v < 0 || v > GW_ERR_ABORTED) return "unknown status";
  return v == 0 ? "OK" : gw::code_name(static_cast<Code>(v));
}

gw_status_t gw_transport_open(const char* spec, gw_transport_t** out) {
  return guard("gw_transport_open", nullptr, [&] {
    GW_RETURN_IF_ERROR(check_initialized());
    GW_RETURN_IF_ERROR(need(spec, "spec"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    *out = nullptr;
    GW_ASSIGN_OR_RETURN(auto t, gw::Transport::open(spec));
    *out = new gw_transport{std::move(t)};
    return Status();
  });
}

gw_status_t gw_transport_close(gw_transport_t* t) {
  return guard("gw_transport_close", nullptr, [&] {
    GW_RETURN_IF_ERROR(need(t, "transport"));
    delete t;
    return Status();
  });
}

gw_status_t gw_comm_init_env(gw_transport_t* t, int64_t timeout_ms, gw_comm_t** out) {
  return guard("gw_comm_init_env", nullptr, [&] {
    std::unique_ptr<gw_transport> owned(t);  // taken in every case, as documented
    GW_RETURN_IF_ERROR(need(t, "transport"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    *out = nullptr;
    GW_ASSIGN_OR_RETURN(gw::LaunchInfo info, gw::discover_launch());
    auto store = gw::store_for_launch(info, gw::Millis(timeout_ms > 0 ? timeout_ms : 60'000));
    if (!store.ok()) {
      return store.status().with_context("rank " + std::to_string(info.rank) + " (from " +
                                         info.source + ")");
    }
    return make_comm(*store, std::move(t->t), info.rank, info.world_size, timeout_ms, out);
  });
}

gw_status_t gw_comm_init_rendezvous(gw_transport_t* t, const gw_rendezvous_t* rdzv, int rank,
                                    int size, int64_t timeout_ms, gw_comm_t** out) {
  return guard("gw_comm_init_rendezvous", nullptr, [&] {
    std::unique_ptr<gw_transport> owned(t);
    GW_RETURN_IF_ERROR(need(t, "transport"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    GW_RETURN_IF_ERROR(need(rdzv, "rdzv"));
    if (!rdzv->set || !rdzv->get || !rdzv->wait)
      return invalid("rdzv->set, rdzv->get and rdzv->wait must all be set");
    *out = nullptr;
    return make_comm(gw::capi::make_callback_store(*rdzv), std::move(t->t), rank, size, timeout_ms,
                     out);
  });
}

gw_status_t gw_comm_destroy(gw_comm_t* c) {
  return guard("gw_comm_destroy", nullptr, [&] {
    GW_RETURN_IF_ERROR(need(c, "comm"));
    delete c;
    return Status();
  });
}

gw_status_t gw_comm_abort(gw_comm_t* c, const char* reason) {
  // No guard(): its error text is the calling thread's, and this call must not allocate
  // anything the owner thread reads; Communicator::abort() takes a lock and copies reason.
  if (!c) return GW_ERR_INVALID_ARGUMENT;
  try {
    c->comm->abort(reason ? reason : "gw_comm_abort");
  } catch (...) {
    return GW_ERR_RESOURCE_EXHAUSTED;
  }
  return GW_OK;
}

gw_status_t gw_comm_dump_flight(gw_comm_t* c, char* path, size_t path_len) {
  return guard("gw_comm_dump_flight", c, [&] {
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_ASSIGN_OR_RETURN(std::string p, c->comm->dump_flight_record());
    if (path && path_len) {
      const size_t k = std::min(p.size(), path_len - 1);
      std::memcpy(path, p.data(), k);
      path[k] = '\0';
    }
    return Status();
  });
}

gw_status_t gw_comm_shrink(gw_comm_t* c, const int* exclude, size_t n_exclude, gw_comm_t** out) {
  return guard("gw_comm_shrink", nullptr, [&] {  // shrink() holds the transport itself
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    if (n_exclude > 0) GW_RETURN_IF_ERROR(need(exclude, "exclude"));
    *out = nullptr;
    GW_ASSIGN_OR_RETURN(auto nc, c->comm->shrink({exclude, n_exclude}));
    auto n = std::make_unique<gw_comm>();
    n->timeout = c->timeout;
    n->comm = std::move(nc);
    n->g = &n->comm->group();
    *out = n.release();
    return Status();
  });
}

gw_status_t gw_comm_grow(gw_comm_t* c, int added, const char* name, int64_t timeout_ms,
                         gw_comm_t** out) {
  return guard("gw_comm_grow", nullptr, [&] {  // grow() holds the transport itself
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_RETURN_IF_ERROR(need(name, "name"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    *out = nullptr;
    if (c->p2p_in_flight) return invalid("send/receive requests in flight: finish them first");
    GW_ASSIGN_OR_RETURN(
        auto nc, c->comm->grow(added, name,
                               timeout_ms > 0 ? gw::Nanos(gw::Millis(timeout_ms)) : c->timeout));
    auto n = std::make_unique<gw_comm>();
    n->timeout = c->timeout;
    n->comm = std::move(nc);
    n->g = &n->comm->group();
    *out = n.release();
    return Status();
  });
}

gw_status_t gw_comm_join_env(gw_transport_t* t, const char* name, int64_t timeout_ms,
                             gw_comm_t** out) {
  return guard("gw_comm_join_env", nullptr, [&] {
    std::unique_ptr<gw_transport> owned(t);  // taken in every case, as gw_comm_init_env
    GW_RETURN_IF_ERROR(need(t, "transport"));
    GW_RETURN_IF_ERROR(need(name, "name"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    *out = nullptr;
    if (timeout_ms < 0) return invalid("timeout_ms is negative");
    GW_ASSIGN_OR_RETURN(gw::Config cfg, gw::Config::global());
    GW_ASSIGN_OR_RETURN(int64_t dflt, cfg.get_int("coll.timeout_ms"));
    const gw::Nanos timeout = gw::Millis(timeout_ms > 0 ? timeout_ms : dflt);
    const char* host = std::getenv("GW_MASTER_ADDR");
    const char* port = std::getenv("GW_MASTER_PORT");
    if (!host || !*host) host = std::getenv("MASTER_ADDR");
    if (!port || !*port) port = std::getenv("MASTER_PORT");
    if (!host || !*host || !port || std::atoi(port) <= 0 || std::atoi(port) > 65535)
      return Status(Code::kUnavailable,
                    "GW_MASTER_ADDR/GW_MASTER_PORT (or MASTER_*) must name "
                    "the job's store");
    GW_ASSIGN_OR_RETURN(
        auto store, gw::connect_tcp_store(host, static_cast<uint16_t>(std::atoi(port)), timeout));
    gw::CommOptions opts;
    opts.timeout = timeout;
    auto n = std::make_unique<gw_comm>();
    n->timeout = timeout;
    GW_ASSIGN_OR_RETURN(n->comm,
                        gw::Communicator::join(store, std::move(t->t), name, timeout, opts));
    n->g = &n->comm->group();
    *out = n.release();
    return Status();
  });
}

gw_status_t gw_comm_parent_rank(const gw_comm_t* c, int rank, int* parent) {
  return guard("gw_comm_parent_rank", c, [&] {
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_RETURN_IF_ERROR(need(parent, "parent"));
    if (rank < 0 || rank >= c->g->size())
      return invalid("rank " + std::to_string(rank) + " is not in 0.." +
                     std::to_string(c->g->size() - 1));
    *parent = c->g->parent_rank(rank);
    return Status();
  });
}

gw_status_t gw_comm_rank(const gw_comm_t* c, int* rank) {
  return guard("gw_comm_rank", c, [&] {
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_RETURN_IF_ERROR(need(rank, "rank"));
    *rank = c->g->rank();
    return Status();
  });
}

gw_status_t gw_comm_size(const gw_comm_t* c, int* size) {
  return guard("gw_comm_size", c, [&] {
    GW_RETURN_IF_ERROR(need(c, "comm"));
    GW_RETURN_IF_ERROR(need(size, "size"));
    *size = c->g->size();
    return Status();
  });
}

gw_status_t gw_mem_register(gw_comm_t* c, void* addr, size_t length, gw_mr_t** out) {
  return guard("gw_mem_register", c, [&] {
    GW_RETURN_IF_ERROR(gw::capi::check_comm(c));
    GW_RETURN_IF_ERROR(need(addr, "addr"));
    GW_RETURN_IF_ERROR(need(out, "out"));
    if (length == 0) return invalid("length is 0");
    *out = nullptr;
    GW_ASSIGN_OR_RETURN(gw::MemoryRegion mr,
                        c->g->transport().register_memory(addr, length, gw::MemKind::kHost));
    auto m = std::make_unique<gw_mr>();
    m->comm = c;
    m->mr = std::move(mr);
    c->mrs.push_back(std::move(m));
    *out = c->mrs.back().get();
    return Status();
  });
}

gw_status_t gw_mem_deregister(gw_mr_t* mr) {
  return guard("gw_mem_deregister", mr ? mr->comm : nullptr, [&] {
    GW_RETURN_IF_ERROR(need(mr, "mr"));
    auto& v = mr->comm->mrs;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->get() == mr) {
        v.erase(it);
        return Status();
      }
    }
    return invalid("mr is not a live registration");
  });
}

}  // extern "C"
