// DpdkTransport memory: registration (regions made known to the EAL, DMA-mapped where the
// port has an IOMMU mapping); memif's shared regions mapped in before the first traffic.
#include "dpdk_target.h"  // first: the ISA of DPDK's inline functions

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "dpdk_memif.h"
#include "dpdk_transport.h"
#include "log.h"

namespace gw::drv::dpdk {
namespace {

/// Keeps an rte_extmem registration (and the port's DMA mapping, where it has one).
class DpdkMr final : public MrHandle {
 public:
  DpdkMr(void* base, size_t len, uint16_t port, bool mapped)
      : base_(base), len_(len), port_(port), mapped_(mapped) {}
  ~DpdkMr() override {
    if (mapped_) {
      rte_eth_dev_info info{};
      if (rte_eth_dev_info_get(port_, &info) == 0 && info.device)
        rte_dev_dma_unmap(info.device, base_, reinterpret_cast<uintptr_t>(base_), len_);
    }
    rte_extmem_unregister(base_, len_);
  }

 private:
  void* base_;
  size_t len_;
  uint16_t port_;
  bool mapped_;
};

}  // namespace

Result<MemoryRegion> DpdkTransport::register_memory(void* addr, size_t length, MemKind kind) {
  GW_RETURN_IF_ERROR(check_region(addr, length, kind));
  // Staged through pinned host memory (dpdk_staging.cc): nothing for the port to map.
  if (kind == MemKind::kCudaDevice) return MemoryRegion(addr, length, kind, 0, nullptr);
  // Large regions are made known to the EAL (and DMA-mapped for the port where it has an
  // IOMMU mapping); vdevs copy from virtual addresses and need neither, so a failure is
  // logged at debug level and the region still works (IOVA = VA).
  const size_t pg = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto b = reinterpret_cast<uintptr_t>(addr);
  uintptr_t lo = b & ~(pg - 1), hi = (b + length + pg - 1) & ~(pg - 1);
  std::unique_ptr<MrHandle> h;
  if (length >= (size_t{1} << 20)) {
    void* base = reinterpret_cast<void*>(lo);
    if (rte_extmem_register(base, hi - lo, nullptr, 0, pg) == 0) {
      bool mapped = false;
      rte_eth_dev_info info{};
      if (rte_eth_dev_info_get(port_->id(), &info) == 0 && info.device)
        mapped = rte_dev_dma_map(info.device, base, lo, hi - lo) == 0;
      h = std::make_unique<DpdkMr>(base, hi - lo, port_->id(), mapped);
    } else {
      log_->debug("dpdk: rte_extmem_register({}, {} B): {}; using the region unregistered", base,
                  hi - lo, rte_strerror(rte_errno));
    }
  }
  return MemoryRegion(addr, length, kind, 0, std::move(h));
}

void DpdkTransport::prefault_shared(const Deadline& deadline) {
  if (prefaulted_ || port_->driver() != "net_memif") return;
  // The regions are mapped once the peer attached (the link is up); SYNs sent before are lost.
  const Deadline link_wait(std::chrono::seconds(2));
  while (!port_->link_up() && !deadline.expired() && !link_wait.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!port_->link_up()) return;  // the handshake's retries carry on; the pages fault in later
  prefaulted_ = true;
  const uint64_t t0 = now_ns();
  prefault_memif_regions();
  log_->debug("dpdk: memif regions of {} mapped in {} us", port_->name(), (now_ns() - t0) / 1000);
}

}  // namespace gw::drv::dpdk
