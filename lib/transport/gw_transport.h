/// @file gw_transport.h
/// The one transport interface. Transport = one driver on one device; Endpoint = reliable,
/// ordered, message-based connection to one peer; MemoryRegion = registration of caller memory;
/// CompletionQueue = where finished requests are reported (any peer).
///
/// Thread-safety: a Transport, its endpoints and its CQ are used by one thread at a time (the
/// caller drives progress by polling, as with DPDK ports and NCCL net plugins), except
/// Transport::abort(), which any thread may call at any time. Open one Transport per thread
/// for concurrent use. Once a layer has started the progress thread (a Communicator, a
/// PsWorker or PsServer on this transport: start_background()), every other use of the
/// transport -- a poll, a post, a registration -- must hold its gate (DriveScope, gw_progress.h),
/// or it races with that thread. Endpoints and MemoryRegions must not outlive the Transport that
/// made them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gw_memory.h"
#include "gw_progress.h"
#include "gw_status.h"
#include "gw_time.h"

namespace gw {

class Endpoint;

/// Opaque connection blob made and read by one driver; exchanged through the Store.
/// Layout: driver name (8 bytes, zero-padded), version (1 byte), payload.
class Address {
 public:
  static constexpr size_t kMaxSize = 128;
  static constexpr size_t kHeader = 9;

  Address() = default;
  /// @return InvalidArgument if the payload does not fit.
  static Result<Address> make(std::string_view driver, uint8_t version,
                              std::span<const uint8_t> payload);
  /// Parse bytes received from a peer. @return ProtocolError if too short or too long.
  static Result<Address> from_bytes(std::string_view bytes);

  std::string_view driver() const;
  uint8_t version() const { return bytes_[8]; }
  std::span<const uint8_t> payload() const { return {bytes_.data() + kHeader, size_ - kHeader}; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(bytes_.data()), size_}; }

 private:
  std::array<uint8_t, kMaxSize> bytes_{};
  size_t size_ = 0;
};

/// Driver-private state of a registration; destroying it deregisters.
class MrHandle {
 public:
  virtual ~MrHandle() = default;
};

/// Move-only registration of memory the caller owns.
class MemoryRegion {
 public:
  MemoryRegion() = default;
  MemoryRegion(void* addr, size_t length, MemKind kind, uint64_t remote_key,
               std::unique_ptr<MrHandle> handle)
      : addr_(addr),
        length_(length),
        kind_(kind),
        remote_key_(remote_key),
        handle_(std::move(handle)) {}
  MemoryRegion(MemoryRegion&&) noexcept = default;
  MemoryRegion& operator=(MemoryRegion&&) noexcept = default;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* addr() const { return addr_; }
  size_t length() const { return length_; }
  MemKind kind() const { return kind_; }
  /// Key a peer needs for one-sided access (RDMA rkey); 0 where there is none.
  uint64_t remote_key() const { return remote_key_; }
  MrHandle* handle() const { return handle_.get(); }
  bool valid() const { return addr_ != nullptr || length_ == 0; }
  bool contains(const void* p, size_t n) const {
    auto b = reinterpret_cast<uintptr_t>(addr_), q = reinterpret_cast<uintptr_t>(p);
    return q >= b && q - b <= length_ && n <= length_ - (q - b);
  }

 private:
  void* addr_ = nullptr;
  size_t length_ = 0;
  MemKind kind_ = MemKind::kHost;
  uint64_t remote_key_ = 0;
  std::unique_ptr<MrHandle> handle_;
};

/// Matches a receive against any tag.
inline constexpr uint64_t kAnyTag = ~uint64_t{0};

struct SendRequest {
  const void* buf = nullptr;
  size_t len = 0;
  uint64_t tag = 0;    ///< must not be kAnyTag
  uint64_t wr_id = 0;  ///< returned in the completion
  /// Must cover buf; may be null if !requires_registration. The region (this object, at
  /// this address) must outlive the request's completion, as its memory must.
  const MemoryRegion* mr = nullptr;
};

struct RecvRequest {
  void* buf = nullptr;
  size_t len = 0;    ///< capacity; a longer message fails this receive
  uint64_t tag = 0;  ///< or kAnyTag
  uint64_t wr_id = 0;
  const MemoryRegion* mr = nullptr;  ///< as SendRequest::mr
};

enum class Op : uint8_t {
  kSend = 0,
  kRecv = 1,
  kEndpointError = 2,  ///< the endpoint failed; Endpoint::status() has the reason
};

/// One finished request. For errors, code != kOk; ep->status() holds the sticky reason, except
/// for a receive whose message was longer than the buffer (kInvalidArgument, len = message
/// length; the endpoint stays usable).
struct Completion {
  uint64_t wr_id = 0;
  uint64_t tag = 0;
  size_t len = 0;          ///< bytes sent or received
  Endpoint* ep = nullptr;  ///< which peer (any-source receives learn it here)
  uint32_t peer_id = 0;    ///< the ConnectParams::peer_id of ep
  Op op = Op::kSend;
  Code code = Code::kOk;
};

/// Where a Transport reports finished requests.
class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  /// Make progress and return finished requests without blocking.
  /// @return the number written to `out`; an error only if the transport itself failed.
  virtual Result<size_t> poll(std::span<Completion> out) = 0;
  /// A file descriptor that becomes readable when progress may be possible; -1 if none.
  /// Ask for it before each sleep on it, not once: a driver arms its notification here (rdma
  /// its completion channel; tcp puts busy-polled sockets back into its epoll set).
  virtual int wait_fd() const = 0;
  /// Sleep up to `timeout_ms` until progress may be possible, then poll. The default sleeps on
  /// wait_fd(); a driver may override it to fold the sleep into its own event wait.
  virtual Result<size_t> sleep_poll(std::span<Completion> out, int timeout_ms);

  /// Block until at least one completion or the timeout: spin for `spin` (poll only), then
  /// sleep on wait_fd() between polls (drivers without an fd back off instead).
  /// @return count (>0), or Timeout naming how long it waited.
  Result<size_t> wait(std::span<Completion> out, Nanos timeout, Nanos spin);
  /// As above with the spin time from transport.spin_us.
  Result<size_t> wait(std::span<Completion> out, Nanos timeout);

 protected:
  Nanos default_spin_{Nanos(20'000)};
};

/// How to reach one peer. Both sides call connect() with the same `key`; exactly one of them
/// has `active` set (it dials, the other accepts). Active connects never wait for the peer's
/// process to call connect(), so a Group can dial all then accept all without deadlock.
struct ConnectParams {
  Address remote;
  uint64_t key = 0;
  bool active = false;
  uint32_t peer_id = 0;   ///< caller's id for the peer (its rank); echoed in completions
  std::string peer_name;  ///< for error messages, e.g. "rank 3"
  /// Optional, accepting side only: called between the driver's polls (every few ms) while it
  /// waits for the peer to dial. An error stops the wait and connect() returns it, e.g. when
  /// the job learnt meanwhile that this peer, or the rank it waits on, is gone (Group::create
  /// asks the store). Keep it cheap or rate-limit it.
  std::function<Status()> give_up;
};

/// A reliable, ordered, message-based connection to one peer. Receives are matched to
/// messages in posting order among those whose tag matches. Errors are sticky.
///
/// The same on every driver (the transport core, gw_core.h, enforces it):
/// - A completed send's buffer may be reused at once: its bytes were copied out (kernel
///   socket buffer, inline work request, bounce buffer) or acknowledged by the peer.
/// - Messages sent before their receive is posted are buffered up to the driver's
///   `unexpected_bytes`; beyond it the peer is made to wait (back-pressure), never failed.
/// - Every accepted request completes exactly once; when the CQ's `cq_depth` requests are
///   outstanding, post_* accept fewer (poll, then post the rest). No completion is dropped.
/// - An endpoint failure is logged as a warning when it lost work (requests pending), at
///   debug level when the peer left in order with nothing pending.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  /// Post a burst of sends. @return how many were taken (fewer when the send queue is full:
  /// poll and post the rest), or the endpoint's sticky error, or InvalidArgument.
  virtual Result<size_t> post_send(std::span<const SendRequest> reqs) = 0;
  /// Post a burst of receives; same return rules as post_send.
  virtual Result<size_t> post_recv(std::span<const RecvRequest> reqs) = 0;
  /// OK, or the first error this endpoint hit.
  virtual Status status() const = 0;

  uint32_t peer_id() const { return peer_id_; }
  const std::string& peer_name() const { return peer_name_; }
  /// New id and name for the peer (Group::shrink renumbers the ranks); completions made from
  /// now on carry `id`. Same thread rules as a post.
  void rename(uint32_t id, std::string name) {
    peer_id_ = id;
    peer_name_ = std::move(name);
  }

 protected:
  uint32_t peer_id_ = 0;
  std::string peer_name_;
};

struct TransportProperties {
  std::string name;                      ///< driver name, "tcp"
  std::string device;                    ///< device/interface, "lo"
  uint64_t link_speed_mbps = 0;          ///< 0 if unknown
  std::vector<MemKind> zero_copy_kinds;  ///< kinds moved without a staging copy
  size_t max_message_size = 0;
  bool one_sided = false;              ///< has RDMA-style one-sided writes
  bool requires_registration = false;  ///< SendRequest/RecvRequest.mr must be set
  size_t max_outstanding = 0;          ///< per endpoint and direction
  /// transport.progress=auto starts a progress thread (dpdk: nobody else answers its peers).
  bool progress_thread = true;
  /// The progress thread's longest sleep between passes (the heartbeat and retransmission
  /// timers' resolution when the driver's fd stays quiet).
  uint32_t progress_tick_us = 1000;
};

class ProgressThread;

/// One driver on one device.
class Transport {
 public:
  Transport();
  virtual ~Transport();

  /// Open a transport by spec "driver[:key=value,...]" or "auto" (rdma, then dpdk, then tcp;
  /// logs which was picked and why the others were skipped). Keys are the driver's config keys.
  /// @return InvalidArgument (unknown driver or key), Unavailable (no device), SystemError.
  static Result<std::unique_ptr<Transport>> open(std::string_view spec);
  /// Drivers compiled into this library, best first.
  static std::vector<std::string> drivers();

  virtual const TransportProperties& properties() const = 0;
  /// Where peers reach this transport.
  virtual const Address& address() const = 0;
  /// Connect to one peer before `deadline`. @return InvalidArgument (the address is another
  /// driver's), Timeout (the peer did not come), Unavailable (no route, refused),
  /// ProtocolError (a bad hello), RemoteError (the peer refused us), SystemError.
  virtual Result<std::unique_ptr<Endpoint>> connect(const ConnectParams& params,
                                                    Deadline deadline) = 0;
  /// Register caller memory. @return InvalidArgument (bad pointer/length), NotSupported
  /// (kind), ResourceExhausted (pinning limit).
  virtual Result<MemoryRegion> register_memory(void* addr, size_t length, MemKind kind) = 0;
  /// Post receives matched against messages from any endpoint of this transport.
  virtual Result<size_t> post_recv_any(std::span<const RecvRequest> reqs) = 0;
  virtual CompletionQueue& cq() = 0;
  /// Counters (bytes, messages, errors, ...), for tools and tests.
  virtual std::map<std::string, uint64_t> stats() const = 0;
  /// Abort everything, from any thread (also while another thread is in poll() or wait()):
  /// within 200 ms every request posted on every endpoint, and every any-source receive,
  /// completes with Code::kAborted, each endpoint fails with Aborted naming `reason` (its
  /// Op::kEndpointError event follows its requests), a thread sleeping in the CQ's wait()
  /// wakes, and every later post_send/post_recv/post_recv_any is refused with Aborted. The
  /// driving thread carries it out in its next poll; wake-up: tcp and rdma write an eventfd
  /// in their epoll set, dpdk's idle wait sees it within its 1 ms back-off. The peers see
  /// their endpoint fail at once, as when this process closes it (tcp and rdma close the
  /// connection, dpdk sends its FIN): RemoteError "closed the connection", without the reason
  /// -- who aborted and why is the layer above's to tell (Communicator's failure notice).
  /// Irreversible: open a new Transport to communicate again. Later calls do nothing.
  /// @return OK; NotSupported from a driver without it.
  virtual Status abort(std::string_view reason);
  /// Take back what a layer above posted under the tags (tag & mask) == value, when the
  /// calls that used them are over but the peers go on (Communicator::shrink): each such
  /// receive still posted completes with Aborted, and such messages, buffered or arriving
  /// later, are dropped. Receives a peer may write into directly (rdma's advertised ones)
  /// stay and complete as usual. Same thread rules as a poll.
  /// @return how many receives stayed; NotSupported from a driver without it.
  virtual Result<size_t> cancel_tags(uint64_t mask, uint64_t value);
  /// Receive those tags again (a new communicator reuses them after many shrinks).
  virtual void accept_tags(uint64_t mask, uint64_t value);

  // --- background progress (gw_progress.h) ---
  /// Who drives the data path now; every call of a layer that started the progress thread
  /// holds it (DriveScope), so the thread and the application never run the driver at once.
  ProgressGate& gate() { return gate_; }
  /// Whether a progress thread serves this transport's peers while no call is in it.
  bool background() const { return bg_on_.load(std::memory_order_relaxed); }
  /// Asked for by a layer that opens a DriveScope in each of its calls on this transport
  /// (Communicator, the parameter server); counted, the last stop_background() ends the
  /// thread. transport.progress decides whether one runs (caller: none; auto: the driver's
  /// TransportProperties::progress_thread). Call it outside any DriveScope.
  /// @return OK; InvalidArgument for a bad transport.progress; SystemError.
  Status start_background();
  void stop_background();
  /// Passes the progress thread made (0 without one), for stats and tests.
  uint64_t background_passes() const;

 protected:
  /// Drivers: the first statement of their destructor (the thread must not outlive them).
  void end_background();

 private:
  ProgressGate gate_;
  std::atomic<bool> bg_on_{false};
  int bg_users_ = 0;
  std::unique_ptr<ProgressThread> bg_;
  uint64_t bg_passes_done_ = 0;  // of threads that ended
};

}  // namespace gw
