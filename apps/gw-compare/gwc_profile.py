"""--profile: where the CPU time of a workload goes, by category, the way "Understanding Host
Network Stack Overheads" (SIGCOMM 2021) splits one flow's time.

One more bandwidth-64 KiB run per transport under `perf record -e cpu-clock -g -k
CLOCK_MONOTONIC` on both ranks; only samples between the tool's column heads and its row (the
workload's own window, same as the cost counters) are kept. Each sample's category comes from
its leaf frame through CATEGORIES below (first match wins), kernel symbols included. Frames
that only re-enable interrupts are skipped first: with cpu-clock, a kernel section that ran
with interrupts off is sampled where they come back on (pvm_irq_enable on this machine's
paravirtualised kernel), which would otherwise hide the section that spent the time.
"""
import os
import re
import subprocess
import tempfile
import time

import gwc_proc
import gwc_workloads as W

# (category, symbol regex, dso regex or None). Documented in the report; extend as needed.
CATEGORIES = [
    ("data copy", r"copy_user|copy_to_user|copy_from_user|_copy_to_iter|_copy_from_iter|"
                  r"memcpy|memmove|rep_movs|copy_page|skb_copy_datagram|simple_copy_to_iter|"
                  r"csum_partial_copy|rte_memcpy", None),
    # Not in the study's list, but where busy polling spent most of its time here: a poll loop
    # that reads the clock on every pass (the vDSO's, or a system call on some VMs).
    ("clock reads", r"clock_gettime|steady_clock|system_clock|^__vdso|rdtsc", r"\[vdso\]"),
    ("DPDK PMD", r"^rte_|memif|eth_af_packet|af_packet|af_xdp|xsk_|_pmd_|^eth_", r"librte_"),
    ("gradwire", r"^gw::|gw_", r"gw-perf|gw-coll-perf|libgradwire"),
    ("TCP/IP", r"^tcp_|^__tcp|^tcp4|^ip_|^__ip_|^ipv4_|^inet_|^__inet|^udp|^raw_|"
               r"^sk_stream|^sock_|^__sock|^sk_wait|^release_sock|^lock_sock|^__release_sock",
     None),
    ("loopback/netdev", r"loopback|netif_|^__netif|net_rx_action|napi|process_backlog|^dev_|"
                        r"^__dev_|validate_xmit|^veth_|^packet_|tpacket|__do_softirq|"
                        r"^do_softirq|^irq_exit|^__local_bh_enable", None),
    ("skb/memory", r"skb|kmem_cache|kmalloc|kfree|^__alloc_|alloc_pages|free_pages|page_frag|"
                   r"get_page_from_freelist|^__free_|mem_cgroup|^__mod_|sk_mem|rmqueue|"
                   r"^page_|^__page|folio|^memset|clear_page", None),
    ("scheduling/wake-ups", r"schedule|wake_up|try_to_wake|enqueue_|dequeue_|pick_next|"
                            r"update_curr|finish_task_switch|switch_mm|__switch_to|^sched_|"
                            r"ep_poll|epoll|^ep_|futex|hrtimer|select_task_rq|ttwu|"
                            r"update_load|psi_|^idle|cpuidle|yield", None),
    ("syscall entry/exit", r"entry_SYSCALL|do_syscall|^syscall_|^__x64_sys|^__sys_|"
                           r"exit_to_user|syscall_exit|fdget|^fput|^__fget|security_|"
                           r"^ksys_|^vfs_|^rw_verify|^__fsnotify|^fsnotify", None),
]
_RULES = [(name, re.compile(sym), re.compile(dso) if dso else None)
          for name, sym, dso in CATEGORIES]
NAMES = [c[0] for c in CATEGORIES] + ["other"]
_IRQ_ENABLE = re.compile(r"irq_enable|irqrestore|unlock_irq|^__raw_callee_save")


def categorize(frames):
    """frames: [(sym, dso)] leaf first -> category name."""
    i = 0
    while i < len(frames) - 1 and _IRQ_ENABLE.search(frames[i][0]):
        i += 1
    for sym, dso in frames[i:i + 3]:  # a few callers up when the leaf is anonymous
        for name, srx, drx in _RULES:
            if srx.search(sym) or (drx and drx.search(dso)):
                return name
        if "kernel" not in dso:
            break
    return "other"


def parse_script(text, t0, t1, other=None):
    """perf script -F time,ip,sym,dso output -> {category: samples} within [t0, t1];
    the leaf symbols filed under "other" are counted in `other` (a dict) when given."""
    counts = {}
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        try:
            t = float(lines[0].strip().rstrip(":"))
        except ValueError:
            continue
        if t < t0 or t > t1:
            continue
        frames = []
        for ln in lines[1:]:
            m = re.match(r"\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", ln)
            if m:
                frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
        cat = categorize(frames) if frames else "other"
        counts[cat] = counts.get(cat, 0) + 1
        if cat == "other" and other is not None:
            leaf = "%s (%s)" % frames[0] if frames else "?"
            other[leaf] = other.get(leaf, 0) + 1
    return counts


def profile_one(ctx, t, n, duration, timeout):
    tmp = tempfile.mkdtemp(prefix="gwc-prof-")
    data = [os.path.join(tmp, "rank%d.data" % r) for r in (0, 1)]
    run = W.Run("perf", ["--test", "bw", "-D", "%g" % max(duration, 0.3), "-s", "64K"],
                ["bw_64k"])
    ranks = t.perf_ranks(ctx, n, run.args)
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, watch=1, profile=data,
                                          mark_time=True)
    for p in procs:
        p.close()
    rows = [i for i, (ln, _) in enumerate(marks) if W.is_row(ln)]
    if not ok or not rows or rows[0] == 0:
        return None, []
    t0, t1 = marks[rows[0] - 1][1]["t"], marks[rows[0]][1]["t"]
    counts, other = {}, {}
    for d in data:
        r = subprocess.run(["perf", "script", "-i", d, "-F", "time,ip,sym,dso"],
                           capture_output=True, text=True)
        for k, v in parse_script(r.stdout, t0, t1, other).items():
            counts[k] = counts.get(k, 0) + v
    subprocess.run(["rm", "-rf", tmp])
    total = sum(counts.values())
    top = sorted(other.items(), key=lambda kv: -kv[1])[:8]
    return ({k: v / total for k, v in counts.items()}, top) if total else (None, [])


def profile_all(a, ctx, transports, run_pair, log):
    """{"categories": [...], "by_column": {name: {category: share}}, "table": text}."""
    by, others = {}, {}
    for i, t in enumerate(transports):
        t0 = time.monotonic()
        share, top = profile_one(ctx, t, 900000 + i, a.duration, a.timeout)
        log("profile   %-10s bw 64 KiB %5.1f s%s" % (t.name, time.monotonic() - t0,
                                                    "" if share else "  FAILED"))
        if share:
            by[t.name] = share
            others[t.name] = top
    table = "\n".join("%-20s symbol /%s/%s" % (n, s, " or dso /%s/" % d if d else "")
                      for n, s, d in CATEGORIES) + "\nother                anything else"
    return {"categories": NAMES, "by_column": by, "table": table, "top_other": others,
            "workload": "bw_64k",
            "command": "perf record -e cpu-clock -F 1999 -g -k CLOCK_MONOTONIC (both ranks)"}
