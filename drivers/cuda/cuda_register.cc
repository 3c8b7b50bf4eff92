// Installs the CUDA reduction kernels as lib/coll's device reducer at load time.
#include "coll_device.h"
#include "cuda_reduce.h"

namespace {
const bool gw_cuda_reduce_registered =
    (gw::coll::set_device_reduce(&gw::drv::cuda::launch_reduce), true);
}  // namespace
