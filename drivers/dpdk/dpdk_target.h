/// @file dpdk_target.h
/// Included first by every DPDK source of the driver: DPDK's inline functions (rte_memcpy, ...)
/// need the ISA Debian's DPDK was built for (-march=corei7 in its pkg-config flags). Setting it
/// here, per file, keeps that flag off the rest of libgradwire (which the drivers loop would
/// otherwise give it). DPDK itself runs only on such CPUs, so nothing is lost.
#pragma once
#pragma GCC target("arch=corei7")
// rte_dev_dma_map and the mbuf checksum helpers are still "experimental" in 22.11.
#ifndef ALLOW_EXPERIMENTAL_API
#define ALLOW_EXPERIMENTAL_API
#endif
#include <rte_config.h>
