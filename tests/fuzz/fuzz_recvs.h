/// @file fuzz_recvs.h
/// The receives the frame targets post, read off their input (fuzz_tcp_frames,
/// fuzz_tcp_frames_core, fuzz_dpdk_frames_core): for each, a size (u16, modulo 8192) and a tag
/// byte (0xff: any tag); wr_id is its index. Thread-safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "fuzz_util.h"
#include "gw_transport.h"

namespace gw::fuzz {

struct Receives {
  Receives(Input& in, int count) {
    for (int i = 0; i < count; ++i) {
      size_t len = in.u16() % 8192;
      uint8_t tag = in.u8();
      bufs.emplace_back(len);
      caps.push_back(len);
      reqs.push_back({bufs.back().data(), len, tag == 0xff ? kAnyTag : tag,
                      static_cast<uint64_t>(i), nullptr});
    }
  }
  /// Whether a successful receive completion reports no more bytes than its buffer holds.
  bool fits(const Completion& c) const {
    return c.op != Op::kRecv || c.code != Code::kOk ||
           (c.wr_id < caps.size() && c.len <= caps[c.wr_id]);
  }
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<RecvRequest> reqs;
  std::vector<size_t> caps;
};

}  // namespace gw::fuzz
