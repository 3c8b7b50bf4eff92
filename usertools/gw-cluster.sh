#!/usr/bin/env bash
# A cluster on one machine: N "hosts" (network namespaces) joined by veth pairs to bridges in
# a switch namespace, every link shaped with tc tbf in both directions (a switch port of the
# given rate). A host may have up to 4 links (NICs): link L (0..3) of every host joins bridge L,
# its own subnet 10.77.L.0/24 (a rail); host H's address on it is 10.77.L.H (H = 1..N).
# Addresses exist only inside those namespaces. Incast: the switch port toward a host drops
# past its --queue (a switch's bounded port buffer); a host's own NIC queue is deep.
# netem is not available in this kernel: links have a rate and a queue, no added delay or loss
# (loss for the dpdk driver comes from its own fault injection, dpdk.tx_drop etc.).
#
#   gw-cluster.sh [options] -- COMMAND ARGS...   # make the bed, run COMMAND as every rank, tear down
#   gw-cluster.sh [options] up                   # make the bed and leave it (prints its id)
#   gw-cluster.sh --id ID down                   # tear down (idempotent)
#   gw-cluster.sh --id ID check-clean            # exit 1 if any namespace/link of ID is left
#   gw-cluster.sh --id ID link H L down|up|rate R  # host H's link L stops / carries again /
#                                                  # is reshaped (both directions; R: tc rate)
# Options:
#   --hosts N (2..8, default 4)  --ranks-per-host K (default 1)  --rate R (tc rate, default 1gbit)
#   --burst B (tbf burst, default 1 ms at the rate, at least 128 KiB: two GSO segments)
#   --queue Q (switch port queue: a time, tbf latency, default 5ms; or bytes, e.g. 262144)
#   --links K (1..4 links per host, default 1; or one count per host: --links 2,2,1,1)
#   --id ID (default: pid)
#   --timeout S (kill the ranks after S seconds, default 120)  --logs DIR (default: temp dir)
# Each rank runs inside its host's namespace with GW_RANK, GW_WORLD_SIZE, GW_MASTER_ADDR
# (10.77.0.1), GW_MASTER_PORT (29500: namespaces do not share ports), GW_LOCAL_RANK,
# GW_LOCAL_WORLD_SIZE and GW_HOST (host1..hostN: the Group's host of each rank). In COMMAND,
# {iface} {ip} {rank} {host} {local_rank} are replaced per rank (link 0's interface and
# address), {ifaces} {ips} by the host's links, comma-separated, {iface1} by link 1's; e.g.:
#   gw-cluster.sh --hosts 4 -- build/apps/gw-coll-perf/gw-coll-perf \
#       -t 'dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}' -b 1M -e 16M
# (qdisc_bypass=0: af_packet frames then pass the host's tbf like TCP's do; one rank per host
# with dpdk: a second af_packet port on the same veth would see the first one's frames).
# Rank 0's output goes to stdout; every rank's to DIR/rank<R>.log. Exit: 0 when every rank
# exited 0, else 1 (the failing ranks' logs are printed). Needs root and iproute2 (ip, tc).
set -uo pipefail

hosts=4 per=1 rate=1gbit burst= queue=5ms id=$$ timeout=120 logs= cmd= links=1
usage() { sed -n '2,32p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) per=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --queue) queue=$2; shift 2 ;;
    --id) id=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    up|down|check-clean) cmd=$1; shift ;;
    link) cmd=link; shift; break ;;
    --) shift; cmd=run; break ;;
    *) usage ;;
  esac
done
[ -n "$cmd" ] || usage
[[ "$id" =~ ^[a-z0-9]{1,6}$ ]] || { echo "gw-cluster: --id must be 1-6 of [a-z0-9]" >&2; exit 2; }
[[ "$hosts" =~ ^[2-8]$ ]] || { echo "gw-cluster: --hosts must be 2..8" >&2; exit 2; }
[[ "$per" =~ ^[1-8]$ ]] || { echo "gw-cluster: --ranks-per-host must be 1..8" >&2; exit 2; }
# nlinks[H]: host H's link count (--links K for all, or K1,K2,... one per host).
IFS=, read -r -a nl <<<"$links"
[ "${#nl[@]}" -eq 1 ] || [ "${#nl[@]}" -eq "$hosts" ] ||
  { echo "gw-cluster: --links takes one count or one per host ($hosts)" >&2; exit 2; }
nlinks=() maxl=0
for i in $(seq 1 "$hosts"); do
  k=${nl[$(( ${#nl[@]} == 1 ? 0 : i - 1 ))]}
  [[ "$k" =~ ^[1-4]$ ]] || { echo "gw-cluster: --links counts must be 1..4" >&2; exit 2; }
  nlinks[$i]=$k
  maxl=$(( k > maxl ? k : maxl ))
done

p=gwk$id           # prefix of every name: namespaces $p-sw, $p-h1.., links ${p}h1 / ${p}p1
sw=$p-sw
# Host H's link L: its interface (link 0 keeps the one-link names), the switch's port, address.
hif() { if [ "$2" -eq 0 ]; then echo "${p}h$1"; else echo "${p}h$1l$2"; fi; }
swif() { if [ "$2" -eq 0 ]; then echo "${p}p$1"; else echo "${p}p$1l$2"; fi; }
bridge() { if [ "$1" -eq 0 ]; then echo "${p}br"; else echo "${p}br$1"; fi; }
# tbf's queue bound: --queue as a time (latency) or in bytes (limit).
tbf_queue() { if [[ "$queue" =~ ^[0-9]+$ ]]; then echo "limit $queue"; else echo "latency $queue"; fi; }

# Bits per second of a tc rate (100mbit, 1gbit, 2gbit, 500kbit, or a plain number).
rate_bps() {
  local r=${1,,} n u
  n=${r%%[a-z]*}; u=${r#"$n"}
  case "$u" in
    ""|bit) echo "$n" ;; kbit) echo $((n * 1000)) ;; mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;; *) echo "gw-cluster: rate unit '$u' unknown" >&2; return 1 ;;
  esac
}

down() {
  local i
  for i in $(seq 1 8); do ip netns del "$p-h$i" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  return 0
}

check_clean() {
  local left
  left=$( { ip netns list; ip -o link show; } 2>/dev/null | grep -E "(^| )$p(-|h|p|br)" )
  if [ -n "$left" ]; then echo "gw-cluster: left over from $id:"; echo "$left"; return 1; fi
  return 0
}

up() {
  [ "$(id -u)" -eq 0 ] || { echo "gw-cluster: needs root (network namespaces, tc)" >&2; return 1; }
  command -v tc >/dev/null || { echo "gw-cluster: tc (iproute2) not found" >&2; return 1; }
  ip netns list >/dev/null 2>&1 || { echo "gw-cluster: 'ip netns' does not work here" >&2; return 1; }
  local i h l
  down
  ip netns add "$sw" || return 1
  ip -n "$sw" link set lo up
  for l in $(seq 0 $((maxl - 1))); do
    ip -n "$sw" link add "$(bridge "$l")" type bridge || return 1
    ip -n "$sw" link set "$(bridge "$l")" up
  done
  for i in $(seq 1 "$hosts"); do
    h=$p-h$i
    ip netns add "$h" || return 1
    ip -n "$h" link set lo up
    for l in $(seq 0 $((nlinks[i] - 1))); do
      # Create the pair inside the host namespace: names never meet the caller's namespace.
      ip -n "$h" link add "$(hif "$i" "$l")" type veth peer name "$(swif "$i" "$l")" \
        netns "$sw" || return 1
      ip -n "$h" addr add "10.77.$l.$i/24" dev "$(hif "$i" "$l")"
      ip -n "$h" link set "$(hif "$i" "$l")" up
      ip -n "$sw" link set "$(swif "$i" "$l")" master "$(bridge "$l")"
      ip -n "$sw" link set "$(swif "$i" "$l")" up
      shape "$i" "$l" "$rate" add || return 1
    done
  done
  echo "gw-cluster: $id up: $hosts hosts, links per host ${nlinks[*]}, $rate each (queue" \
    "$queue), 10.77.L.1-$hosts on link L"
}

# Both directions of host H's link L at rate R: the host's NIC (egress of its veth) and the
# switch port toward it. The NIC's queue is deep (32 MiB): a real NIC holds its own host's
# senders back instead of dropping (TCP small queues let a socket park up to
# tcp_limit_output_bytes, 4 MiB, in it). The switch port's queue is --queue long: it drops when
# several hosts send to one (incast). Usage: shape H L R add|change
shape() {
  local bps b
  bps=$(rate_bps "$3") || return 1
  # At least two GSO segments: with one (64 KiB + a frame) tbf throttled 7x as often, and below
  # 1 Gbit/s its softirq took both cores of a 4-host ring (2026-12-02).
  b=${burst:-$(( bps / 8 / 1000 > 131072 ? bps / 8 / 1000 : 131072 ))}
  # shellcheck disable=SC2046
  tc -n "$p-h$1" qdisc "$4" dev "$(hif "$1" "$2")" root tbf rate "$3" burst "$b" \
    limit 33554432 &&
    tc -n "$sw" qdisc "$4" dev "$(swif "$1" "$2")" root tbf rate "$3" burst "$b" $(tbf_queue)
}

# gw-cluster.sh --id ID link H L down|up|rate R: what a rail failure or a slow link does.
link_cmd() {
  local h=${1:-} l=${2:-} what=${3:-}
  [[ "$h" =~ ^[1-8]$ && "$l" =~ ^[0-3]$ ]] || usage
  ip -n "$p-h$h" link show "$(hif "$h" "$l")" >/dev/null 2>&1 ||
    { echo "gw-cluster: $id has no link $l on host $h" >&2; return 1; }
  case "$what" in
    down|up) ip -n "$p-h$h" link set "$(hif "$h" "$l")" "$what" &&
               ip -n "$sw" link set "$(swif "$h" "$l")" "$what" ;;
    rate) [ -n "${4:-}" ] || usage; shape "$h" "$l" "$4" change ;;
    *) usage ;;
  esac
}

pids=()
# Ranks still running when the script exits (failure, Ctrl-C): timeout passes TERM on to them.
stop() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  return 0
}

run() {
  local dir=${logs:-$(mktemp -d /tmp/gw-cluster.XXXXXX)} world=$((hosts * per)) r h l
  mkdir -p "$dir"
  for h in $(seq 1 "$hosts"); do
    for l in $(seq 0 $((per - 1))); do
      r=$(( (h - 1) * per + l ))
      local args=() a
      local ifs="" ips="" k
      for k in $(seq 0 $((nlinks[h] - 1))); do
        ifs+=${ifs:+,}$(hif "$h" "$k"); ips+=${ips:+,}10.77.$k.$h
      done
      for a in "$@"; do
        a=${a//\{iface\}/${p}h$h}; a=${a//\{ip\}/10.77.0.$h}; a=${a//\{rank\}/$r}
        a=${a//\{host\}/host$h}; a=${a//\{local_rank\}/$l}
        a=${a//\{ifaces\}/$ifs}; a=${a//\{ips\}/$ips}
        for k in 1 2 3; do a=${a//\{iface$k\}/$(hif "$h" "$k")}; done
        args+=("$a")
      done
      ip netns exec "$p-h$h" env GW_RANK=$r GW_WORLD_SIZE=$world GW_MASTER_ADDR=10.77.0.1 \
        GW_MASTER_PORT=29500 GW_LOCAL_RANK=$l GW_LOCAL_WORLD_SIZE=$per GW_HOST=host$h \
        timeout -k 5 "$timeout" "${args[@]}" >"$dir/rank$r.log" 2>&1 &
      pids+=($!)
    done
  done
  local rc=0 failed=()
  for r in "${!pids[@]}"; do
    if ! wait "${pids[$r]}"; then rc=1; failed+=("$r"); fi
  done
  cat "$dir/rank0.log"
  for r in "${failed[@]}"; do
    echo "gw-cluster: rank $r failed; its log ($dir/rank$r.log):" >&2
    tail -n 20 "$dir/rank$r.log" >&2
  done
  [ -n "$logs" ] || [ "$rc" -ne 0 ] || rm -rf "$dir"
  return $rc
}

case "$cmd" in
  down) down ;;
  check-clean) check_clean ;;
  link) link_cmd "$@" ;;
  up) up || { down; exit 1; } ;;
  run)
    [ $# -gt 0 ] || usage
    trap 'stop; down' EXIT
    trap 'exit 130' INT TERM
    up || exit 1
    run "$@"
    ;;
esac
