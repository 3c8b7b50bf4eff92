// SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause)
// XDP program for DPDK's net_af_xdp PMD (dpdk:vdev=net_af_xdp0,iface=IF): gradwire's UDP
// datagrams (dpdk.udp_port, GW_UDP_PORT) go to the AF_XDP socket of their receive queue, and
// everything else (the store's TCP, ARP, ssh) goes on to the kernel, so the interface stays
// usable by the host. The PMD's own program redirects every packet of the queue. Built by
// drivers/dpdk/meson.build with clang -target bpf; the PMD loads it (xdp_prog=) and fills
// xsks_map.
// The kernel's types first: libbpf's headers use them (and clang-format sorts each block).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef GW_UDP_PORT
#define GW_UDP_PORT 47592
#endif

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int gw_xdp_redirect(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP)) return XDP_PASS;
  struct iphdr* ip = (void*)(eth + 1);
  // gradwire sends no IP options and no fragments
  if ((void*)(ip + 1) > end || ip->protocol != IPPROTO_UDP || ip->ihl != 5) return XDP_PASS;
  struct udphdr* udp = (void*)(ip + 1);
  if ((void*)(udp + 1) > end || udp->dest != bpf_htons(GW_UDP_PORT)) return XDP_PASS;
  return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "Dual BSD/GPL";
