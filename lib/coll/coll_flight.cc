// The Communicator's flight recorder (flight_recorder.h): a record per call, its end, and the
// dumps -- on the first error that breaks the communicator, on SIGUSR1, on request.
#include <time.h>

#include "coll_notice.h"
#include "gw_config.h"
#include "log.h"

namespace gw {
namespace {

GW_CONFIG_KEYS(coll_flight,
               {"coll.flight_records", ConfigType::kInt, "2000",
                "flight recorder: the last calls each rank keeps (a fixed ring allocated once, "
                "~80 B a call), dumped as JSON on a failure, a timeout, an abort, SIGUSR1 or "
                "Communicator::dump_flight_record(); read the dumps with gw-doctor; 0: off"},
               {"coll.flight_dir", ConfigType::kString, "",
                "directory of the flight recorder's dumps, gw-flight-<rank>.json (empty: "
                "$TMPDIR, else /tmp); a directory all ranks share lets gw-doctor read them all"},
               {"coll.flight_signal", ConfigType::kBool, "true",
                "flight recorder on: SIGUSR1 makes every rank of the process dump (the handler "
                "only sets a flag; the thread in a call dumps within 20 ms, else the next "
                "call); not installed when the application has a SIGUSR1 handler"});

// now_ns()'s clock at its tick's resolution (1-4 ms), at a fraction of its cost: the
// "last heard" stamps are taken for every batch of completions.
int64_t coarse_now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

coll::FlightState state_of(const Status& st) {
  switch (st.code()) {
    case Code::kOk:
      return coll::FlightState::kOk;
    case Code::kTimeout:
      return coll::FlightState::kTimedOut;
    case Code::kAborted:
      return coll::FlightState::kAborted;
    default:
      return coll::FlightState::kFailed;
  }
}

}  // namespace

Status coll::Flight::init(int64_t records, std::string dir, Impl* prev) {
  GW_ASSIGN_OR_RETURN(Config cfg, Config::global());
  ConfigReader rd(cfg);
  if (records < 0) records = rd.in("coll.flight_records", 0, 1 << 24);
  if (dir.empty()) dir = rd.str("coll.flight_dir");
  const bool sig = rd.flag("coll.flight_signal");
  GW_RETURN_IF_ERROR(rd.status());
  if (records > 1 << 24)
    return Status(Code::kInvalidArgument, "coll: flight_records above 16777216");
  if (records == 0) return Status();
  if (prev && prev->flight.recorder &&
      prev->flight.recorder->capacity() == static_cast<size_t>(records)) {
    // prev's health thread may be reading the recorder: Health::init moves it under the
    // server's lock when it takes that thread over.
    from = prev;
    if (!prev->health.server) adopt();
  } else {
    recorder = std::make_unique<coll::FlightRecorder>(static_cast<size_t>(records));
  }
  dump_dir = std::move(dir);
  heard_ns = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(im.n));
  if (sig && !coll::flight_install_signal())
    log::get("gw.coll")->debug("coll: SIGUSR1 has another handler: no flight dump on it");
  sigs = coll::flight_signals();
  return Status();
}

void coll::Flight::adopt() {
  recorder = std::move(from->flight.recorder);
  recorder->restart();
  from = nullptr;
}

void coll::Flight::start(coll::Task& op) {
  if (!recorder) return;
  coll::FlightEntry e;
  e.seq = op.seq;
  e.kind = static_cast<uint8_t>(op.kind);
  e.dtype = static_cast<uint8_t>(op.dt);
  e.rop = op.desc.op;
  e.algo = static_cast<uint8_t>(op.algo);
  e.device = op.device;
  e.root = op.root;
  e.ranks = static_cast<uint32_t>(im.n);
  e.count = op.desc.count;
  e.bytes = op.desc.count * op.es;
  e.start_ns = std::chrono::duration_cast<Nanos>(op.started.time_since_epoch()).count();
  op.flight_id = recorder->begin(e);
}

void coll::Flight::end(coll::Task& op, const Status& st) {
  if (!recorder || !op.flight_id) return;
  // The end at the clock tick's resolution (1-4 ms): a precise read costs ~35 ns on a VM's
  // kvm-clock, 1-2 % of a 4 KiB allreduce; the start is exact (begin()'s deadline read).
  const int64_t start = std::chrono::duration_cast<Nanos>(op.started.time_since_epoch()).count();
  recorder->end(op.flight_id, state_of(st), static_cast<uint8_t>(st.code()),
                st.ok() ? 0 : im.faults.waiting_mask(), std::max(coarse_now_ns(), start));
  op.flight_id = 0;
}

void coll::Flight::refused(coll::Kind kind, DataType dt, ReduceOp rop, size_t count) {
  if (!recorder || kind == coll::Kind::kSend || kind == coll::Kind::kRecv) return;
  if (kind == coll::Kind::kReduceScatter || kind == coll::Kind::kAllgather)
    count /= static_cast<size_t>(im.n);  // begin() has the whole vector, the record the block
  coll::FlightEntry e;
  e.seq = ++im.seq;  // the communicator is broken: only the records read this number
  e.kind = static_cast<uint8_t>(kind);
  e.dtype = static_cast<uint8_t>(dt);
  e.rop = static_cast<uint8_t>(rop);
  e.root = -1;
  e.ranks = static_cast<uint32_t>(im.n);
  e.count = count;
  e.bytes = count * dtype_size(dt);
  e.start_ns = static_cast<int64_t>(now_ns());
  recorder->end(recorder->begin(e), coll::FlightState::kRefused,
                static_cast<uint8_t>(im.broken.code()), 0, e.start_ns);
}

void coll::Flight::heard(std::span<const Completion> cs) {
  if (!recorder || cs.empty()) return;
  const int64_t t = coarse_now_ns();
  for (const Completion& c : cs)
    if (c.code == Code::kOk && c.peer_id < static_cast<size_t>(im.n))
      heard_ns[c.peer_id].store(t, std::memory_order_relaxed);
}

Result<std::string> coll::Flight::dump(const char* trigger) {
  if (!recorder) {
    return Status(Code::kNotSupported,
                  "coll: no flight recorder here (coll.flight_records = 0, or shrink/grow moved "
                  "it to the new communicator)");
  }
  coll::FlightContext c;
  c.rank = im.rank;
  c.size = im.n;
  c.trigger = trigger;
  c.transport = im.group.transport().properties().name;
  c.broken = im.broken;
  for (int p = 0; p < im.n; ++p) {
    if (p == im.rank) continue;
    coll::FlightPeer fp;
    fp.rank = p;
    const Status es = im.group.endpoint(p).status();
    fp.endpoint_ok = es.ok();
    if (!es.ok()) fp.error = es.to_string();
    fp.last_heard_ns = heard_ns[static_cast<size_t>(p)].load(std::memory_order_relaxed);
    fp.pending_recvs = im.faults.notices->pend_from[static_cast<size_t>(p)];
    fp.pending_sends = im.faults.notices->pend_to[static_cast<size_t>(p)];
    c.peers.push_back(std::move(fp));
  }
  const std::string path = coll::flight_path(dump_dir, im.rank);
  Status st = recorder->write_json(path, c);
  if (!st.ok()) {
    log::get("gw.coll")->warn("coll: rank {}: flight record not written ({}): {}", im.rank, trigger,
                              st.to_string());
    return st;
  }
  log::get("gw.coll")->warn("coll: rank {}: flight record ({}, {} calls) written to {}", im.rank,
                            trigger, recorder->recorded(), path);
  return path;
}

void coll::Flight::on_signal() {
  sigs = coll::flight_signals();
  (void)dump("signal");
}

Result<std::string> Communicator::dump_flight_record() {
  auto d = impl_->drive();
  return impl_->flight.dump("request");
}

std::vector<FlightRecord> Communicator::flight_records() const {
  std::vector<FlightRecord> out;
  if (!impl_->flight.recorder) return out;
  for (const coll::FlightEntry& e : impl_->flight.recorder->snapshot()) {
    out.push_back(FlightRecord{
        .seq = e.seq,
        .op = coll::kind_name(static_cast<coll::Kind>(e.kind)),
        .dt = static_cast<DataType>(e.dtype),
        .count = e.count,
        .root = e.root,
        .state = coll::flight_state_name(static_cast<coll::FlightState>(e.state)),
        .code = static_cast<Code>(e.code),
    });
  }
  return out;
}

}  // namespace gw
