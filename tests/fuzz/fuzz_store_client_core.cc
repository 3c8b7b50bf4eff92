// The TCP store client's reply parsing (store::Replies, tcp_store_replies.h, the code the real
// client runs on what it reads) fed bytes without a socket or a thread: the same input format
// and requests as fuzz_store_client (which keeps the client's sockets, pool and session
// covered) at the rate of a pure target. The first input byte picks up to four requests (2
// bits each, bit 7: a SET first; bit 6: a ranked client, whose HELLO reads the first reply);
// the rest is the server's reply stream. A request that fails ends the input, as the client's
// connection is then gone; the stream's end is the server's close.
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tcp_store_proto.h"
#include "tcp_store_replies.h"

namespace {

namespace wire = gw::store::wire;
const gw::store::Replies kReplies("tcp store 127.0.0.1:1");
const char* const kOps[] = {"get", "add", "wait", "check", "set"};  // 4: set

// What the caller may see, whatever the server sent: a malformed reply, a timeout or a
// rank that left (within the rank limit) and the server's text for ADD; never anything else.
void check(const gw::Status& s, bool add) {
  switch (s.code()) {
    case gw::Code::kOk:
    case gw::Code::kProtocolError:
    case gw::Code::kTimeout:
      return;
    case gw::Code::kRemoteError:
      if (s.rank() >= 0 && s.rank() <= static_cast<int>(wire::kMaxRank)) return;
      break;
    case gw::Code::kInvalidArgument:
      if (add && s.message().size() <= gw::store::kMaxItem) return;
      break;
    default:
      break;
  }
  std::abort();
}

// The next reply's payload, read as the client reads it: a header, then its length in bytes.
// @return false where the client fails: a bad header or the stream ends first.
bool next_reply(gw::fuzz::Input& in, const char* op, std::string& payload) {
  if (in.size() < wire::kHeader) return false;
  auto len = kReplies.header(op, in.take(wire::kHeader));
  check(len.status(), false);
  if (!len.ok() || in.size() < *len) return false;
  if (*len > wire::kMaxFrame) std::abort();
  payload.assign(in.take(*len));  // the client receives into a string of its own
  return true;
}

// One request's reply. @return whether it succeeded (the client goes on to the next).
bool one(int op, std::string_view reply) {
  const gw::Millis wait(10);
  gw::Status s;
  switch (op) {
    case 0: {
      auto v = kReplies.get("k", wait, reply);
      if (v.ok() && v->size() > gw::store::kMaxItem) std::abort();
      s = v.status();
      break;
    }
    case 1:
      s = kReplies.add(reply).status();
      break;
    case 2:
      s = kReplies.wait(4, wait, reply);  // as a client waiting for 4 keys
      break;
    case 3:
      s = kReplies.check(reply).status();
      break;
    default:
      s = kReplies.ok("set", reply);
      break;
  }
  check(s, op == 1);
  return s.ok();
}

}  // namespace

GW_FUZZ_QUIET_INIT()

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gw::fuzz::Input in(data, size);
  uint8_t ops = in.u8();
  std::string payload;
  if (ops & 0x40) {  // the session's HELLO
    if (!next_reply(in, "hello", payload)) return 0;
    auto s = kReplies.ok("hello", payload);
    check(s, false);
    if (!s.ok()) return 0;
  }
  for (int i = 0; i < 4; ++i) {
    const int op = i == 0 && (ops & 0x80) ? 4 : (ops >> (2 * i)) & 3;  // 4: set first
    if (!next_reply(in, kOps[op], payload) || !one(op, payload)) break;
  }
  return 0;
}
