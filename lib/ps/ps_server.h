/// @file ps_server.h
/// PsServer internals: per-part state, the shards and staging buffers. Setup and the key-table
/// check live in ps_server.cc, the serving data path in ps_serve.cc.
/// Thread-safety: as PsServer (one thread at a time).
#pragma once

#include <deque>
#include <vector>

#include "ps_impl.h"

namespace gw {

struct PsServer::Impl final : ps::PsPeer {
  struct Held {     // a push received but not applied yet (its staging slot stays busy)
    uint32_t slot;  // staging slot within the part
    int worker;     // worker index
  };
  struct Pull {  // a pull waiting for its consistency condition
    int rank;
    int64_t clock;
    uint32_t slot, gen;
  };
  struct Part {
    uint32_t id = 0;              // global part id
    uint64_t off = 0, count = 0;  // in params_ (elements)
    uint64_t stage_off = 0;       // in stage_ (elements); slots of `count` each
    int inflight = 0;             // pull replies being sent from params_
    bool round_full = false;      // BSP: all pushes of the round are in agg_
    int round_pushes = 0;
    int64_t rounds = 0;
    int64_t min_clock = 0;
    std::vector<int64_t> clock;   // per worker: pushes applied
    std::vector<uint8_t> pushed;  // BSP: pushed in this round
    std::deque<Held> held;
    std::deque<Pull> pulls;
  };

  Impl(Group& g, ps::Settings s, PsLayout l, std::unique_ptr<Updater> u)
      : PsPeer(g, std::move(s), std::move(l), "server"), upd_(std::move(u)) {}

  // setup (ps_server.cc)
  Status setup(const PsInit& init);
  uint64_t take_parts();  // this server's parts of the layout; returns their elements
  Status size_slots();    // push staging slots per part
  Status check_tables();
  std::string check_table(int rank, const uint8_t* p, size_t len) const;

  // data path (ps_serve.cc)
  void on_ctrl(int peer, const ps::CtrlMsg& m, size_t len) override;
  void dispatch(const Completion& c) override;
  void on_push(Part& p, uint32_t slot, int worker);
  void on_pull(int rank, const ps::CtrlMsg& m);
  void reject_pull(int rank, const ps::CtrlMsg& m, const std::string& why);
  void try_round(Part& p);
  void apply_async(Part& p, uint32_t slot, int worker);
  void drain(Part& p);
  void serve_pulls(Part& p);
  bool servable(const Part& p, int64_t clock) const;
  bool blocked(const Part& p) const;
  void serve_pull(Part& p, const Pull& q);
  void repost(Part& p, uint32_t slot);
  float* stage_at(const Part& p, uint32_t slot) const {
    return stage_.floats() + p.stage_off + slot * p.count;
  }
  bool all_done() const;
  // lost peers (ps_serve.cc)
  bool on_peer_lost(int peer, const Status& why) override;
  bool round_complete(const Part& p) const;
  void update_min_clock(Part& p);

  std::unique_ptr<Updater> upd_;
  std::vector<Part> parts_;
  std::vector<int32_t> local_;         // global part id -> index in parts_, or -1
  std::vector<uint64_t> pushes_from_;  // per rank
  ps::RegMem params_, state_, agg_, stage_, table_rx_;
  size_t table_cap_ = 0;
  uint32_t slots_ = 1;  // staging slots per part
  int workers_ = 0;
  int live_ = 0;                // workers not lost
  std::vector<uint8_t> alive_;  // per worker index
  PsServerStats stats_;
};

}  // namespace gw
