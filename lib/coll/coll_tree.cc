// Binomial-tree gather and scatter of small host blocks: ceil(log2 n) rounds instead of the
// root's n - 1 messages one after another. Ranks are taken relative to the root (v = rank -
// root mod n); v owns the subtree [v, v + min(lowbit(v), n - v)), gathers it from its children
// v + 2^k (2^k below lowbit(v)) into scratch in relative order and sends it to v - lowbit(v)
// (scatter: the reverse, the largest subtree first). The exchange engine runs the steps; its
// relay flag holds the sends until every receive is in, then the final copies put the blocks
// in place (the root's rotation back to rank order, a scatter rank's own block). Blocks above
// coll.gather_tree_max_bytes go direct: the tree relays every byte up to log2 n times.
#include <algorithm>
#include <cstring>

#include "coll_impl.h"

namespace gw {

using coll::Task;
using coll::XPart;

namespace {

int subtree(int v, int n) { return std::min(v ? v & -v : n, n - v); }

}  // namespace

Result<bool> coll::tree::parts(Communicator::Impl& im, Task& op, bool gather, size_t b) {
  if (op.device || im.n < 3 || b == 0 || b > im.tree_max_bytes) return false;
  const int root = op.root, v = (im.rank - root + im.n) % im.n;
  const auto mine = static_cast<size_t>(subtree(v, im.n)), nb = static_cast<size_t>(im.n);
  const auto head = static_cast<size_t>(im.n - root) * b;  // relative blocks before the wrap
  GW_RETURN_IF_ERROR(op.scratch.ensure(im.group.transport(), mine * b));
  uint8_t* tmp = op.scratch.data();
  const int low = v ? v & -v : im.n;
  auto abs = [&](int rel) { return (rel + root) % im.n; };
  op.xrelay = true;
  if (gather) {
    std::memcpy(tmp, op.in, b);
    for (int m = 1; m < low && v + m < im.n; m <<= 1) {
      const auto sub = static_cast<size_t>(subtree(v + m, im.n));
      op.xparts.push_back(XPart{-1, abs(v + m), nullptr, tmp + size_t(m) * b, 0, sub * b});
    }
    if (v) op.xparts.push_back(XPart{abs(v - low), -1, tmp, nullptr, mine * b, 0});
    if (!v)
      op.xfinal = {{{op.out + size_t(root) * b, tmp, head}, {op.out, tmp + head, nb * b - head}}};
    return true;
  }
  if (v) {
    op.xparts.push_back(XPart{-1, abs(v - low), nullptr, tmp, 0, mine * b});
    op.xfinal[0] = {op.out, tmp, b};
  } else {  // the root's blocks in relative order, and its own block
    std::memcpy(tmp, op.in + size_t(root) * b, head);
    std::memcpy(tmp + head, op.in, nb * b - head);
    if (op.out != op.in + size_t(root) * b) std::memcpy(op.out, op.in + size_t(root) * b, b);
  }
  int top = 1;
  while (top * 2 < low && v + top * 2 < im.n) top *= 2;
  for (int m = top; m >= 1; m >>= 1) {
    if (v + m >= im.n || m >= low) continue;
    const auto sub = static_cast<size_t>(subtree(v + m, im.n));
    op.xparts.push_back(XPart{abs(v + m), -1, tmp + size_t(m) * b, nullptr, sub * b, 0});
  }
  return true;
}

}  // namespace gw
