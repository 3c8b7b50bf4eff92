/// @file perf_internal.h
/// Tags and request ids gw-perf puts on the wire and in completions.
#pragma once

#include <cstdint>

namespace gw::perf {

/// Control messages use one tag; data of phase `seq` use data_tag(seq), so a receive left over
/// from one phase can never match a message of the next.
inline constexpr uint64_t kCtrlTag = 1;
inline constexpr uint64_t data_tag(uint64_t seq) { return (seq << 8) | 2; }

/// wr_id: kind in the top two bits, message index below.
inline constexpr uint64_t kWrKindShift = 62;
inline constexpr uint64_t kWrIndexMask = (uint64_t{1} << kWrKindShift) - 1;
inline constexpr uint64_t kWrCtrlSend = uint64_t{0} << kWrKindShift;
inline constexpr uint64_t kWrCtrlRecv = uint64_t{1} << kWrKindShift;
inline constexpr uint64_t kWrDataSend = uint64_t{2} << kWrKindShift;
inline constexpr uint64_t kWrDataRecv = uint64_t{3} << kWrKindShift;

}  // namespace gw::perf
