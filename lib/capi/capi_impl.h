/// @file capi_impl.h
/// What the C handles hold, and the boundary helpers: every C entry point runs its body through
/// guard(), which turns a Status (or any exception) into a gw_status_t and the thread's
/// last-error text. Thread-safety: as gradwire.h (one thread per communicator).
#pragma once

#include <array>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "gradwire.h"
#include "gw_coll.h"
#include "gw_group.h"

struct gw_transport {
  std::unique_ptr<gw::Transport> t;
};

struct gw_mr {
  gw_comm* comm = nullptr;
  gw::MemoryRegion mr;
};

/// A started collective (is_coll) or send/receive (finished by the comm's poll). Slots are
/// reused, so a warm communicator starts requests without allocating.
struct gw_request {
  gw_comm* comm = nullptr;
  uint32_t slot = 0;
  uint32_t gen = 0;  ///< bumped per use: a late completion cannot reach the slot's next request
  bool active = false;
  bool is_coll = false;
  gw::CollHandle coll;
  // Send/receive.
  bool is_send = false;
  bool done = false;
  int peer = 0;
  uint32_t tag = 0;
  size_t bytes = 0;
  gw::Status status;
  gw::Deadline deadline{gw::Nanos(0)};
  size_t* received = nullptr;
  int* source = nullptr;
  gw::MemoryRegion tmp_mr;  ///< per-request registration when the caller gave none
};

/// Declaration order is destruction order reversed: requests, registrations and the
/// Communicator go before the Group (and its Transport) they use.
struct gw_comm {
  std::unique_ptr<gw::Group> group;  ///< a created one's (a shrunk one's is comm's own)
  std::unique_ptr<gw::Communicator> comm;
  gw::Group* g = nullptr;  ///< the group comm runs on
  std::vector<std::unique_ptr<gw_mr>> mrs;
  std::vector<std::unique_ptr<gw_request>> reqs;  ///< by slot; inactive ones are free
  std::vector<uint32_t> free_reqs;
  int colls_in_flight = 0, p2p_in_flight = 0;
  gw::Nanos timeout{0};  ///< default deadline of a collective or send/receive
  gw::Status broken;     ///< set when a send/receive outlived its deadline (still posted)
  std::array<gw::Completion, 64> comps;
};

namespace gw::capi {

/// Clear the thread's last error (every entry point starts with it).
void clear_error() noexcept;
/// Record "fn [rank r/n]: message" as the thread's last error. @return st's code.
gw_status_t set_error(const char* fn, const gw_comm* c, const Status& st) noexcept;

/// Run `body` (returning Status) at the C boundary: no exception escapes.
template <class Body>
gw_status_t guard(const char* fn, const gw_comm* c, Body&& body) noexcept {
  clear_error();
  try {
    // The call drives the transport; its progress thread waits until it returns.
    std::optional<DriveScope> drive;
    if (c && c->g) drive.emplace(c->g->transport().gate());
    Status st = body();
    return st.ok() ? GW_OK : set_error(fn, c, st);
  } catch (const std::bad_alloc&) {
    return set_error(fn, c, Status(Code::kResourceExhausted, "out of memory"));
  } catch (const std::exception& e) {
    return set_error(fn, c, Status(Code::kInternal, std::string("exception: ") + e.what()));
  } catch (...) {
    return set_error(fn, c, Status(Code::kInternal, "unknown exception"));
  }
}

inline Status invalid(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }

/// InvalidArgument when p is null.
inline Status need(const void* p, const char* name) {
  return p ? Status() : invalid(std::string(name) + " is NULL");
}
/// A usable communicator: not null, not broken by a send/receive past its deadline.
Status check_comm(const gw_comm* c);
/// Element size of a valid dtype, or InvalidArgument naming the bad value.
Result<size_t> dtype_bytes(gw_dtype_t dt);
/// InvalidArgument when count elements of `es` bytes (times `blocks`) overflow size_t.
Status check_count(size_t count, size_t es, size_t blocks);

/// Take a free request slot of c; the pointer stays valid until finish_request.
gw_request* add_request(gw_comm& c, bool is_coll);
/// Give a finished request's slot back.
void finish_request(gw_request* r);
/// "gw_recv from rank 1 (tag 7, 64 B)", for errors.
std::string describe(const gw_request& r);

/// A Store over the caller's rendezvous callbacks (rendezvous_store.cc).
std::shared_ptr<Store> make_callback_store(const gw_rendezvous_t& r);

/// Send/receive progress: poll (wait > 0: sleep up to it) and finish what completed.
Status p2p_progress(gw_comm& c, Nanos wait);

}  // namespace gw::capi
