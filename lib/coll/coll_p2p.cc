// Point-to-point sends and receives on the Communicator's endpoints: one request each, in a
// slot like a collective's, so wait/test/progress and the sticky errors cover them too.
#include "coll_device.h"
#include "coll_impl.h"

namespace gw {
namespace {

Result<CollHandle> start_p2p(Communicator::Impl& im, coll::Kind kind, void* buf, size_t bytes,
                             int peer, uint32_t tag, int* source, size_t* received,
                             const CallOptions& call) {
  const bool is_send = kind == coll::Kind::kSend;
  const char* what = is_send ? "send" : "recv";
  if (peer == im.rank || peer >= im.n || peer < (is_send ? 0 : -1)) {
    return Status(Code::kInvalidArgument,
                  std::string("coll: ") + what + " on rank " + std::to_string(im.rank) + " of " +
                      std::to_string(im.n) + ": bad peer rank " + std::to_string(peer));
  }
  if (bytes > 0 && buf == nullptr)
    return Status(Code::kInvalidArgument, std::string("coll: ") + what + " with a null buffer");
  GW_ASSIGN_OR_RETURN(coll::Task * o,
                      im.begin(kind, DataType::kUInt8, ReduceOp::kSum, bytes, call));
  o->engine = coll::Engine::kP2p;
  o->root = peer;
  o->desc.root = peer;
  o->source = source;
  o->received = received;
  // Device memory goes to the transport as it is (moved directly or staged there).
  o->device = bytes > 0 && coll::is_device_buffer(buf);
  (is_send ? o->sends_total : o->recvs_total) = 1;
  im.flight.start(*o);
  auto took = im.poster.p2p(*o, peer, is_send, buf, bytes, tag);
  if (!took.ok() || !*took) {
    o->active = false;
    Status st = !took.ok() ? took.status()
                           : Status(Code::kResourceExhausted,
                                    im.where(*o) + ": queue full; wait on earlier calls");
    im.flight.end(*o, st);
    return st;
  }
  return CollHandle{static_cast<uint32_t>(im.slot_of(*o)), o->gen};
}

}  // namespace

Result<CollHandle> Communicator::send_async(const void* buf, size_t bytes, int peer, uint32_t tag,
                                            const CallOptions& call) {
  auto d = impl_->drive();
  return start_p2p(*impl_, coll::Kind::kSend, const_cast<void*>(buf), bytes, peer, tag, nullptr,
                   nullptr, call);
}

Result<CollHandle> Communicator::recv_async(void* buf, size_t bytes, int peer, uint32_t tag,
                                            int* source, size_t* received,
                                            const CallOptions& call) {
  auto d = impl_->drive();
  return start_p2p(*impl_, coll::Kind::kRecv, buf, bytes, peer, tag, source, received, call);
}

}  // namespace gw
