// Communicator::shrink (gw_coll.h): the survivors agree through the store on who is gone, take
// back what the broken communicator posted, and go on over the same endpoints. grow/join: new
// ranks connect to the members only (Group::grow), the members' endpoints carry on.
//
// Agreement, under "<prefix>/shrink/<communicator>/" in the Group's store. Every caller
// publishes its vote ("vote/<rank>": the ranks it suspects) and keeps it current while it
// waits. A rank is accounted for once it voted or some voter suspects it; when every rank is
// (or ShrinkOptions::wait has passed), a caller proposes the voters nobody suspects. The first
// proposal (the one whose add() on "ticket" returned 1) is the decision every caller adopts,
// so all survivors keep the same set even if their views differed. Only set, check, add and
// get of present keys: a TCP store fails every wait once a ranked client was killed.
#include <algorithm>
#include <string>
#include <vector>

#include "coll_impl.h"
#include "gw_config.h"
#include "log.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(coll_shrink, {"coll.shrink_wait_ms", ConfigType::kInt, "10000",
                             "Communicator::shrink: how long the survivors wait for a rank that "
                             "neither calls shrink nor is known to have failed, before they "
                             "exclude it (a rank computing outside gradwire calls late)"});

constexpr Millis kLook{1};        // store look-ups while agreeing
constexpr Millis kFullRead{20};   // every vote read again (suspicions of ranks that stay away)
constexpr Millis kDrain{1000};    // for the cancelled calls' requests to come back
constexpr Millis kDecide{10000};  // for the decision once proposed

std::string encode(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

std::vector<int> decode(const std::string& s, int n) {
  std::vector<int> v;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    const int r = std::atoi(s.substr(i, j - i).c_str());
    if (r >= 0 && r < n) v.push_back(r);
    i = j + 1;
  }
  return v;
}

// One shrink's view: what this rank knows and has read from the store.
struct Agreement {
  Store& store;
  std::string base;
  int n = 0, rank = 0;
  std::vector<char> suspect, voted;
  std::string my_vote;
  bool published = false;

  Status publish() {
    std::vector<int> mine;
    for (int r = 0; r < n; ++r)
      if (suspect[static_cast<size_t>(r)] && r != rank) mine.push_back(r);
    std::string v = encode(mine);
    if (published && v == my_vote) return Status();
    published = true;
    my_vote = v;
    return store.set(base + "vote/" + std::to_string(rank), "+" + v);  // "+": never empty
  }
  std::string vote_key(int r) const { return base + "vote/" + std::to_string(r); }
  // Reads the votes of the ranks not accounted for yet (`full`: every rank's again, for
  // suspicions added since); @return whether every rank is accounted for. Between full reads
  // one check() of the missing votes is enough (a file or TCP store: one operation).
  Result<bool> read_votes(bool full) {
    std::vector<std::string> missing;
    for (int r = 0; r < n; ++r)
      if (!voted[static_cast<size_t>(r)] && !suspect[static_cast<size_t>(r)])
        missing.push_back(vote_key(r));
    if (missing.empty()) return true;
    if (!full) {
      GW_ASSIGN_OR_RETURN(bool all_in, store.check(missing));
      if (!all_in) return false;
    }
    for (int r = 0; r < n; ++r) {
      if (!full && (voted[static_cast<size_t>(r)] || suspect[static_cast<size_t>(r)])) continue;
      const std::string key = vote_key(r);
      GW_ASSIGN_OR_RETURN(bool has, store.check({&key, 1}));
      if (!has) continue;
      GW_ASSIGN_OR_RETURN(std::string v, store.get(key, Millis(1000)));
      voted[static_cast<size_t>(r)] = 1;
      for (int s : decode(v.substr(v.empty() ? 0 : 1), n)) suspect[static_cast<size_t>(s)] = 1;
    }
    for (int r = 0; r < n; ++r)
      if (!voted[static_cast<size_t>(r)] && !suspect[static_cast<size_t>(r)]) return false;
    return true;
  }
  std::vector<int> proposal() const {
    std::vector<int> keep;
    for (int r = 0; r < n; ++r)
      if (voted[static_cast<size_t>(r)] && !suspect[static_cast<size_t>(r)]) keep.push_back(r);
    return keep;
  }
};

// Shrink's steps: break the communicator, so the others learn to shrink too.
void break_for_shrink(Communicator::Impl& im) {
  im.faults.abort_if_requested();
  if (im.broken.ok()) {  // the others may be inside a call: they learn to shrink too
    im.faults.fail_all(Status(Code::kAborted, "coll: rank " + std::to_string(im.rank) +
                                                  " started a shrink (call shrink() to go on)")
                           .with_rank(im.rank));
  } else {
    // Broken by a notice, this rank told nobody; a peer may still be waiting out its settle
    // time on the same failure (coll_notice.h): tell it now, it votes sooner.
    im.faults.tell_failure(im.broken);
  }
}

// This rank's first vote: the excluded ranks and the culprit of the failure, if any.
Agreement first_vote(Communicator::Impl& im, std::span<const int> exclude) {
  Agreement ag{im.group.store(),
               im.group.prefix() + "/shrink/" + std::to_string(im.comm_index) + "/",
               im.n,
               im.rank,
               std::vector<char>(static_cast<size_t>(im.n), 0),
               std::vector<char>(static_cast<size_t>(im.n), 0),
               {},
               false};
  for (int r : exclude)
    if (r >= 0 && r < im.n) ag.suspect[static_cast<size_t>(r)] = 1;
  const Code bc = im.broken.code();
  if ((bc == Code::kRemoteError || bc == Code::kTimeout) && im.broken.rank() >= 0 &&
      im.broken.rank() < im.n && im.broken.rank() != im.rank)
    ag.suspect[static_cast<size_t>(im.broken.rank())] = 1;
  return ag;
}

// Vote until a decision is in the store (one rank writes it). @return the decision.
Result<std::string> agree(Communicator::Impl& im, Agreement& ag, Clock::time_point t0, Nanos wait,
                          const std::string& me) {
  const std::string decision_key = ag.base + "decision";
  const auto vote_end = t0 + wait;
  std::string decision;
  bool proposed = false;
  auto next_full = Clock::now();
  while (true) {
    for (int p = 0; p < im.n; ++p)
      if (p != im.rank && !im.group.endpoint(p).status().ok())
        ag.suspect[static_cast<size_t>(p)] = 1;
    GW_RETURN_IF_ERROR(ag.publish().with_context(me));
    GW_ASSIGN_OR_RETURN(bool decided, im.group.store().check({&decision_key, 1}));
    if (decided) {
      GW_ASSIGN_OR_RETURN(decision, im.group.store().get(decision_key, Millis(1000)));
      break;
    }
    if (!proposed) {
      const bool full = Clock::now() >= next_full;
      if (full) next_full = Clock::now() + kFullRead;
      GW_ASSIGN_OR_RETURN(bool all, ag.read_votes(full));
      if (all || Clock::now() >= vote_end) {
        proposed = true;
        GW_ASSIGN_OR_RETURN(int64_t ticket, im.group.store().add(ag.base + "ticket", 1));
        if (ticket == 1) {
          GW_RETURN_IF_ERROR(
              im.group.store().set(decision_key, "+" + encode(ag.proposal())).with_context(me));
        }
        continue;
      }
    } else if (Clock::now() >= vote_end + kDecide) {
      return Status(Code::kTimeout,
                    me + ": no decision within " +
                        std::to_string(std::chrono::duration_cast<Millis>(wait + kDecide).count()) +
                        " ms (the rank that took it stopped?)");
    }
    (void)im.poll_once(kLook);  // endpoint failures and notices come in meanwhile
  }
  return decision;
}

}  // namespace

Group& Communicator::group() { return impl_->group; }

Result<std::unique_ptr<Communicator>> Communicator::shrink(std::span<const int> exclude,
                                                           const ShrinkOptions& so) {
  Impl& im = *impl_;
  auto lg = log::get("gw.coll");
  const auto t0 = Clock::now();
  Nanos wait = so.wait;
  if (wait.count() <= 0) {
    GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
    GW_ASSIGN_OR_RETURN(int64_t ms, cfg.get_int("coll.shrink_wait_ms"));
    wait = Millis(std::max<int64_t>(ms, 1));
  }
  const std::string me =
      "coll: shrink on rank " + std::to_string(im.rank) + " of " + std::to_string(im.n);
  std::unique_ptr<Group> ng;
  std::vector<int> gone;
  {
    auto d = im.drive();
    break_for_shrink(im);
    Agreement ag = first_vote(im, exclude);
    GW_ASSIGN_OR_RETURN(const std::string decision, agree(im, ag, t0, wait, me));
    const std::vector<int> keep = decode(decision.substr(decision.empty() ? 0 : 1), im.n);
    im.retire(me);
    if (std::find(keep.begin(), keep.end(), im.rank) == keep.end()) {
      return Status(Code::kAborted, me +
                                        ": this rank was excluded by the shrink (the others "
                                        "found it failed, stopped or late; keep: " +
                                        encode(keep) + ")")
          .with_rank(im.rank);
    }
    for (int r = 0; r < im.n; ++r)
      if (std::find(keep.begin(), keep.end(), r) == keep.end()) gone.push_back(r);
    GW_ASSIGN_OR_RETURN(ng, im.group.shrink(keep));  // renames endpoints: under the gate
  }
  // Outside the old calls' DriveScope: create() starts the transport's progress thread.
  Group& g = *ng;
  GW_ASSIGN_OR_RETURN(auto out, Communicator::create(g, im.opts, &im));
  out->impl_->owned = std::move(ng);
  lg->info("{}: {} ranks go on without rank(s) {} (this one is rank {} now) after {} ms", me,
           g.size(), encode(gone), g.rank(),
           std::chrono::duration_cast<Millis>(Clock::now() - t0).count());
  return out;
}

void Communicator::Impl::retire(const std::string& me) {
  // Take back every request of the old calls, then wait for what is still under way.
  auto held = group.transport().cancel_tags(coll::kEpochMask, coll::make_tag(0xC0, epoch, 0, 0));
  const auto drain_end = Clock::now() + kDrain;
  while (requests_out() > 0 && Clock::now() < drain_end) (void)poll_once(Millis(1));
  drained = held.ok() && *held == 0 && requests_out() == 0;
  if (!drained) {
    log::get("gw.coll")->warn(
        "{}: {} requests of the old calls still in the transport after {} ms; their memory "
        "stays until the process ends",
        me, requests_out(), kDrain.count());
  }
}

Result<std::unique_ptr<Communicator>> Communicator::grow(int added, const std::string& name,
                                                         Nanos timeout) {
  Impl& im = *impl_;
  const std::string me = "coll: grow on rank " + std::to_string(im.rank) + " of " +
                         std::to_string(im.n) + " (" + name + ")";
  const auto t0 = Clock::now();
  std::unique_ptr<Group> ng;
  {
    auto d = im.drive();
    im.faults.abort_if_requested();
    if (!im.broken.ok()) {
      return Status(Code::kInvalidArgument, me + ": this communicator is broken (" +
                                                im.broken.to_string() + "): shrink() it first");
    }
    for (const coll::Task& op : im.ops) {
      if (op.active && !op.done)
        return Status(Code::kInvalidArgument, me + ": calls in flight; wait for them first");
    }
    GW_ASSIGN_OR_RETURN(ng, im.group.grow(added, name, timeout));
    im.retire(me);
    // Not a failure: no notice, no flight dump; later calls get this error.
    im.broken = Status(Code::kAborted, me + ": grown; use the new communicator");
    im.health.set_broken(im.broken);
  }
  GW_ASSIGN_OR_RETURN(auto out, Communicator::create(*ng, im.opts, &im));
  out->impl_->owned = std::move(ng);
  log::get("gw.coll")->info("{}: {} ranks after {} ms", me, out->size(),
                            std::chrono::duration_cast<Millis>(Clock::now() - t0).count());
  return out;
}

Result<std::unique_ptr<Communicator>> Communicator::join(std::shared_ptr<Store> store,
                                                         std::unique_ptr<Transport> transport,
                                                         const std::string& name, Nanos timeout,
                                                         const CommOptions& opts) {
  GW_ASSIGN_OR_RETURN(auto g, Group::join(std::move(store), std::move(transport), name, timeout));
  GW_ASSIGN_OR_RETURN(auto out, Communicator::create(*g, opts));
  out->impl_->owned = std::move(g);
  return out;
}

}  // namespace gw
