"""The transports gw-compare drives, how each rank of each one is started, and why one that
cannot run here cannot (it is then listed with that reason, never dropped).

Every gradwire transport runs gw-perf / gw-coll-perf as two processes, server (rank 0) first.
Waiting modes: "tcp" sleeps on the socket at once (transport.spin_us=0, as a blocking recv()
does); "tcp-busy" and the dpdk rows poll throughout (--busy, transport.spin_us=-1).
"""
import os
import shutil
import socket
import subprocess

VETH_NET = "10.252.0"  # addresses exist only inside the two namespaces gw-compare makes
# Rows must reach gw-compare as they are printed (stdout is a pipe): line buffering.
LINEBUF = ["stdbuf", "-oL"]


class Transport:
    def __init__(self, name, label, spec0, spec1, busy, netns=None, peer="127.0.0.1",
                 driver="tcp"):
        self.name, self.label = name, label
        self.spec = (spec0, spec1)  # rank 0 (server), rank 1 (client)
        self.busy = busy
        self.netns = netns or (None, None)
        self.peer = peer
        self.driver = driver
        self.why = None  # reason it cannot run, once known

    def env(self):
        e = {"GW_TRANSPORT_SPIN_US": "-1" if self.busy else "0",
             "GW_LOG_LEVEL": os.environ.get("GW_LOG_LEVEL", "error")}
        if self.driver == "dpdk":
            # On a loaded 2-CPU machine a busy rank can be off the CPU for over 1.5 s (the
            # default); that is a slow peer, not a dead one.
            e["GW_DPDK_PEER_TIMEOUT_MS"] = "10000"
        return e

    def fresh(self, n):
        """Specs for run number n: each memif run gets its own socket file."""
        return tuple(s.replace("{n}", str(n)) for s in self.spec)

    def perf_ranks(self, ctx, n, args):
        """(argv, env, netns) of the gw-perf server and client for one measurement."""
        s0, s1 = self.fresh(n)
        port = str(ctx.port())
        busy = ["--busy"] if self.busy else []
        common = args + busy + ["--stats", "-p", port, "--timeout", "20000"]
        return [(LINEBUF + [ctx.gw_perf, "-t", s0] + common, self.env(), self.netns[0]),
                (LINEBUF + [ctx.gw_perf, "-t", s1] + common + [self.peer], self.env(),
                 self.netns[1])]

    def coll_ranks(self, ctx, n, args):
        """(argv, env, netns) of the two gw-coll-perf ranks (launched by GW_* variables)."""
        s = self.fresh(n)
        port = str(ctx.port())
        out = []
        for r in (0, 1):
            env = dict(self.env(), GW_RANK=str(r), GW_WORLD_SIZE="2", GW_LOCAL_WORLD_SIZE="1",
                       GW_MASTER_ADDR=self.peer, GW_MASTER_PORT=port)
            out.append((LINEBUF + [ctx.gw_coll_perf, "-t", s[r]] + args, env, self.netns[r]))
        return out


def make_transports(run_id):
    sock = "/tmp/gwc-%s-{n}.sock" % run_id
    memif = "dpdk:vdev=net_memif0,role=%s,socket=" + sock
    ns = ("gwc%sa" % run_id, "gwc%sb" % run_id)
    ifs = ("gwc%sa0" % run_id, "gwc%sb1" % run_id)
    afp = "dpdk:vdev=net_af_packet0,iface=%s"
    afx = "dpdk:vdev=net_af_xdp0,iface=%s"  # copy mode on veth; gradwire's XDP program
    return [
        Transport("tcp", "tcp (sleep)", "tcp:iface=lo", "tcp:iface=lo", busy=False),
        Transport("tcp-busy", "tcp (busy)", "tcp:iface=lo", "tcp:iface=lo", busy=True),
        # Explicit roles: role=auto made both memif ranks servers (issue 20).
        Transport("memif", "dpdk memif", memif % "server", memif % "client", busy=True,
                  driver="dpdk"),
        Transport("af_packet", "dpdk af_packet/veth", afp % ifs[0], afp % ifs[1], busy=True,
                  netns=ns, peer=VETH_NET + ".1", driver="dpdk"),
        Transport("af_xdp", "dpdk af_xdp/veth", afx % ifs[0], afx % ifs[1], busy=True,
                  netns=ns, peer=VETH_NET + ".1", driver="dpdk"),
        Transport("rdma", "rdma soft-RoCE (VM)", "rdma", "rdma", busy=True, driver="rdma"),
    ]


def check_available(t, ctx):
    """Reason `t` cannot run here, or None."""
    for b in (ctx.gw_perf, ctx.gw_coll_perf):
        if not os.access(b, os.X_OK):
            return "%s is not built (run usertools/gw-build.sh)" % b
    if t.driver != "tcp" and not ctx.driver_built(t.driver):
        return "the %s driver is not built here (see the meson configure summary)" % t.driver
    if t.name == "rdma" and not ctx.in_vm:
        return "the host kernel has no RDMA: add --rdma-vm to run it on soft-RoCE in a VM"
    if t.name == "af_xdp":
        try:
            socket.socket(44, socket.SOCK_RAW).close()  # AF_XDP
        except OSError as e:
            return "the kernel refuses AF_XDP sockets (CONFIG_XDP_SOCKETS): %s" % e.strerror
    if t.name in ("af_packet", "af_xdp"):
        if os.geteuid() != 0:
            return "needs root to create the two network namespaces and the veth pair"
        if not shutil.which("ip"):
            return "the ip tool (iproute2) is missing"
    return None


class Veth:
    """Two namespaces joined by a veth pair, through usertools/gw-compare-netns.sh; always
    torn down (context manager), also when a measurement fails."""

    def __init__(self, script, run_id):
        self.script, self.run_id = script, run_id
        self.up = False
        self.why = None

    def __enter__(self):
        r = subprocess.run(["bash", self.script, "up", self.run_id], capture_output=True,
                           text=True)
        self.up = r.returncode == 0
        if not self.up:
            self.why = "creating the namespaces failed: " + (r.stderr.strip() or "?")[-200:]
        return self

    def __exit__(self, *exc):
        subprocess.run(["bash", self.script, "down", self.run_id], capture_output=True)
        return False
