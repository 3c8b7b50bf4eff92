/// @file gw_transport_core.h
/// The transport core's per-transport half: completions, any-source receives, the unexpected
/// budget, abort and cancelled tags. The per-endpoint half: gw_endpoint_core.h.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gw_core_msg.h"

namespace spdlog {
class logger;
}

namespace gw::core {

class EndpointCore;

/// The log level of an endpoint failure: a peer leaving in order with nothing pending is how
/// a job ends (debug); anything else loses work (warn).
void log_failure(spdlog::logger& log, const Status& st, bool orderly, bool pending);

struct CoreCounters {
  uint64_t msgs_received = 0, unexpected_msgs = 0, truncated_recvs = 0, endpoint_errors = 0;
};

/// Per transport: completions, any-source receives, the unexpected budget, its endpoints.
class TransportCore {
 public:
  /// `driver` names it in messages ("tcp"); `max_any`: any-source receives posted at once.
  void init(const char* driver, std::shared_ptr<spdlog::logger> log, size_t cq_depth,
            size_t max_any, uint64_t unexpected_budget);
  CompletionSink& sink() { return sink_; }
  UnexpectedStore& store() { return store_; }
  const UnexpectedStore& store() const { return store_; }
  /// Post receives matched against messages of any endpoint (Transport::post_recv_any).
  Result<size_t> post_recv_any(std::span<const RecvRequest> reqs);
  size_t any_posted() const { return any_.size(); }
  /// The earliest any-source receive a message with `tag` would match; -1 if none.
  int find_any(uint64_t tag) const;
  uint64_t next_post_seq() { return post_seq_++; }
  const CoreCounters& counters() const { return counters_; }
  /// A message a driver completed without finish() (rdma: rendezvous, after release()).
  void count_received() { ++counters_.msgs_received; }
  /// Adds the core's counters to a driver's Transport::stats().
  void add_stats(std::map<std::string, uint64_t>& m) const;

  // --- Transport::abort ---
  /// Any thread: record the abort (Aborted, "<driver>: transport aborted: <reason>"). From now
  /// on post_recv_any and EndpointCore::post_recv refuse, and refusal() says so to post_send.
  /// @return false if it was requested before (the driver then needs no wake-up).
  bool request_abort(std::string_view reason);
  /// The driving thread, at the end of each progress pass (one load): true once after
  /// request_abort(). The driver then fails each of its endpoints with abort_status() (its
  /// usual failure path) and calls fail_any().
  bool take_abort() { return abort_.take(); }
  /// abort() was called (any thread): a driver's blocking set-up step gives up.
  bool abort_requested() const { return abort_.requested(); }
  const Status& abort_status() const { return abort_.status(); }
  /// Complete every any-source receive still posted with `code`.
  void fail_any(Code code);

  // --- Transport::cancel_tags (a communicator's tags after it shrank) ---
  /// Complete with Aborted every posted receive whose tag has (tag & mask) == value and which
  /// no driver holds (rdma's advertised ones stay), drop such buffered messages, and drop
  /// such messages arriving from now on (the last kMaxDrops rules are kept).
  /// @return the receives it could not take back.
  size_t cancel_tags(uint64_t mask, uint64_t value);
  /// Receive (tag & mask) == value again: cancel_tags' rule for exactly these goes.
  void accept_tags(uint64_t mask, uint64_t value);
  /// Whether an arriving message with `tag` is dropped (one load when no rule is set).
  bool dropped(uint64_t tag) const {
    for (size_t i = 0; i < ndrops_; ++i)
      if ((tag & drops_[i].mask) == drops_[i].value) return true;
    return false;
  }
  static constexpr size_t kMaxDrops = 8;

 private:
  struct DropRule {
    uint64_t mask = 0, value = 0;
  };
  friend class EndpointCore;
  bool take_unexpected_any(const RecvRequest& r);

  const char* driver_ = "";
  std::shared_ptr<spdlog::logger> log_;
  CompletionSink sink_;
  UnexpectedStore store_;
  SlotList<Posted> any_;
  uint64_t post_seq_ = 0, arrivals_ = 0;
  std::vector<EndpointCore*> eps_;
  CoreCounters counters_;
  AbortLatch abort_;
  std::array<DropRule, kMaxDrops> drops_{};
  size_t ndrops_ = 0;
};

}  // namespace gw::core
