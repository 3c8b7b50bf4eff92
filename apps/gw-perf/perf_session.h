/// @file perf_session.h
/// One gw-perf connection between rank 0 (server, follows) and rank 1 (client, leads): buffers
/// registered once, the control messages that keep both ranks in step, and the progress engine
/// the timed loops run on. The client sends the plan of every phase, so a server started with
/// no test options follows whatever the client asks, as perftest's server does.
///
/// Thread-safety: one thread (the Group's).
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "gw_group.h"
#include "perf_options.h"

namespace gw::perf {

enum class CtrlType : uint32_t { kHello = 1, kPlan, kReady, kDone, kQuit, kBye };

inline constexpr uint32_t kCtrlMagic = 0x47575046;  // "GWPF"
inline constexpr uint32_t kFlagBidir = 1, kFlagCheck = 2, kFlagLat = 4, kFlagWarmup = 8;

/// Control message; fixed size, both ranks on the same ABI (as perftest's exchange).
struct Ctrl {
  uint32_t magic = kCtrlMagic;
  CtrlType type = CtrlType::kHello;
  uint64_t size = 0;      ///< Hello: largest size; Plan: this phase's size
  uint64_t iters = 0;     ///< Plan: messages each way
  uint64_t seq = 0;       ///< Plan: phase number (data tags and check patterns)
  uint32_t flags = 0;     ///< kFlag*
  uint32_t depth = 0;     ///< Hello/Plan: outstanding messages per direction
  uint64_t errors = 0;    ///< Done: check errors the sender of Done found
  double recv_peak = 0;   ///< Done: receive-side peak bandwidth (bytes/s)
  uint32_t rx_depth = 0;  ///< Hello: receives kept posted in bw
  uint32_t buffers = 0;   ///< Hello: message buffers per side (0: 1)
};
static_assert(sizeof(Ctrl) == 64);

/// Page-aligned message buffer (perftest's memalign): where a buffer starts within its page
/// changes the kernel's copy speed (a 64 KiB send from page offset 16 cost tcp up to 1.5x the
/// copy time of an aligned one on this machine).
class PageBuffer {
 public:
  /// n bytes set to v (touched now: no page faults in the timed loop).
  /// @return ResourceExhausted when the memory cannot be had.
  Status assign(size_t n, uint8_t v);
  uint8_t* data() { return p_.get(); }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<uint8_t, void (*)(void*)> p_{nullptr, &std::free};
  size_t n_ = 0;
};

/// State of one phase (one size, warm-up or timed). Plain data the hot loop updates.
struct Phase {
  uint64_t seq = 0;
  uint64_t size = 0;
  uint64_t send_total = 0, recv_total = 0;
  uint64_t send_posted = 0, send_done = 0, recv_posted = 0, recv_done = 0;
  uint32_t depth = 1;     ///< sends outstanding
  uint32_t rx_depth = 1;  ///< receives kept posted
  uint32_t slots = 1;     ///< buffer slots in use (check: one per outstanding message)
  bool check = false;
  bool auto_post = true;                ///< bw: refill sends/recvs after every poll
  bool echo = false;                    ///< lat server: answer every receive with a send
  uint32_t send_dir = 0, recv_dir = 0;  ///< rank whose pattern is sent / expected
  uint64_t errors = 0;
  uint64_t* recv_times = nullptr;  ///< bw: ns timestamp of each receive completion
  /// Buffer slot of message `i`; one slot (no division) unless checking.
  uint32_t slot(uint64_t i) const { return slots == 1 ? 0 : static_cast<uint32_t>(i % slots); }
};

class Session {
 public:
  /// Register the data buffers for messages up to `max_size` with `depth` sends and
  /// `rx_depth` receives outstanding. @return the transport's registration errors.
  static Result<std::unique_ptr<Session>> create(Group& group, const Options& opt,
                                                 uint64_t max_size, uint32_t depth,
                                                 uint32_t rx_depth, bool check,
                                                 uint32_t buffers = 1);
  /// Control buffers only; the server calls create_data() once the client's Hello arrives.
  static Result<std::unique_ptr<Session>> create_control(Group& group, const Options& opt);
  Status create_data(uint64_t max_size, uint32_t depth, uint32_t rx_depth, bool check,
                     uint32_t buffers = 1);

  /// Send a control message (waits for the previous one's send completion first).
  Status send_ctrl(const Ctrl& c);
  /// Wait until the last control message has been sent.
  Status flush_ctrl();
  /// Drive progress until a control message arrives. @return ProtocolError if it is not one
  /// of `want` / `alt`, Timeout/RemoteError from the transport.
  Result<Ctrl> recv_ctrl(CtrlType want, CtrlType alt = CtrlType{0});

  /// Start phase `p` (counters zeroed by the caller); posts nothing by itself.
  void begin(const Phase& p);
  Phase& phase() { return phase_; }
  /// Post what the phase allows (bw: keep `depth` sends and receives outstanding).
  Status fill();
  /// Post data send / receive number `index` of the phase now (lat).
  Status post_send_one(uint64_t index);
  Status post_recv_one(uint64_t index);
  /// Wait for completions (busy or blocking per the options) and account for them.
  Status pump();
  bool phase_done() const {
    return phase_.send_done == phase_.send_total && phase_.recv_done == phase_.recv_total;
  }

  /// Slots that fit in the buffers for messages of `size` (at least 1).
  uint32_t slots_for(uint64_t size) const;
  uint32_t depth() const { return depth_; }
  uint32_t rx_depth() const { return rx_depth_; }
  int rank() const { return rank_; }
  const TransportProperties& properties() const;

 private:
  Status fill_sends();
  Status fill_recvs();
  Session(Group& group, const Options& opt);
  Status handle(const Completion& c);
  Status post_ctrl_recv();
  Status fail(const Completion& c, const char* what) const;
  /// Post one request, letting completions drain while the queue is full.
  template <class Req, class PostFn>
  Status post_one(const Req& r, PostFn post) {
    for (;;) {
      GW_ASSIGN_OR_RETURN(size_t n, post(std::span<const Req>(&r, 1)));
      if (n == 1) return Status();
      GW_RETURN_IF_ERROR(pump());
    }
  }

  Group& group_;
  Endpoint& ep_;
  CompletionQueue& cq_;
  int rank_;
  Nanos timeout_;
  Nanos spin_;
  bool busy_;
  // Data buffers: `slot_bytes_ * nslots_` each way; kept for the whole run.
  PageBuffer send_buf_, recv_buf_;
  MemoryRegion send_mr_, recv_mr_;
  uint64_t buf_bytes_ = 0;
  uint32_t depth_ = 1;
  uint32_t rx_depth_ = 1;
  bool check_ = false;
  uint32_t buffers_ = 1;                        // without --check: message buffers cycled per side
  std::vector<uint8_t> send_busy_, recv_busy_;  // check mode: slot in flight
  // Control: one receive always posted, one send at a time.
  std::array<Ctrl, 2> ctrl_buf_{};  // [0] send, [1] receive
  MemoryRegion ctrl_mr_;
  bool ctrl_send_pending_ = false;
  bool ctrl_arrived_ = false;
  // After Quit/Bye the peer may close at any moment: its errors end the session quietly.
  bool closing_ = false;
  bool peer_gone_ = false;
  Ctrl ctrl_in_{};
  Phase phase_;
  std::array<Completion, 64> comps_{};
  std::array<SendRequest, 32> sreq_{};
  std::array<RecvRequest, 32> rreq_{};
};

}  // namespace gw::perf
