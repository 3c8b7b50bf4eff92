#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target (tests/fuzz/corpus/<target>/): a few valid inputs
and edge cases, built from the wire formats (drivers/*/..._wire.h, tcp_store_proto.h,
coll_impl.h, ps_impl.h). Run from the repository root after changing a format."""
import os
import shutil
import struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def u16(v): return struct.pack("<H", v)


def addr(driver, version, payload):
    return driver.encode().ljust(8, b"\0") + bytes([version]) + payload


# Address::from_bytes + decode_addr
put("fuzz_address", "tcp4", addr("tcp", 1, b"\x04\x75\x30\x7f\x00\x00\x01"))
put("fuzz_address", "tcp6", addr("tcp", 1, b"\x06\x75\x30" + bytes(15) + b"\x01"))
put("fuzz_address", "dpdk", addr("dpdk", 1, bytes(range(13))))
put("fuzz_address", "short", b"tcp\0\0\0\0\0")
put("fuzz_address", "max", addr("rdma", 4, bytes(119)))

# TOML configuration
os.makedirs(os.path.join(root, "fuzz_config"), exist_ok=True)
shutil.copy(os.path.join(root, "..", "..", "..", "conf", "gradwire.toml"),
            os.path.join(root, "fuzz_config", "gradwire.toml"))
put("fuzz_config", "small", "[tcp]\nstreams = 4\niface = \"lo\"\n[coll]\ncheck_args = false\n")
put("fuzz_config", "types", "[dpdk]\nrx_drop = 0.01\nmtu = 9000\n[log]\nlevel = \"off\"\n")
put("fuzz_config", "unknown", "[tcp]\nstreems = 4\n")
put("fuzz_config", "nested", "[tcp.x]\ny = 1\n")
# dump() must write these so that they load again (found by fuzz_config: an integer given as a
# string with leading zeroes; strings were never escaped, numbers strtod reads but TOML does not)
put("fuzz_config", "leading_zeroes", '[tcp]\nstreams = "000000000000000008161366602732904857"')
put("fuzz_config", "escapes", '[dpdk]\neal_args = "a\\"b\\\\c\\u0001"\nrx_drop = "0x1p-3"\n')
put("fuzz_config", "float_2_63", '[dpdk]\nrx_drop = "0x1p63"\n')  # dumped as an integer once

# specs: section byte, then device arguments (also opened as a spec)
put("fuzz_spec", "tcp_args", b"\x00streams=2,family=inet")
put("fuzz_spec", "tcp_spec", b"\x00tcp:iface=lo,streams=2")
put("fuzz_spec", "dpdk_args", b"\x01ring=x,mtu=9000,rx_drop=0.5")
put("fuzz_spec", "bad", b"\x02=,,=x,dev")
put("fuzz_spec", "unknown", b"\x03nosuch:foo=bar")


# store protocol: frames of "GWS1" + u32 length + payload
def frame(payload): return b"GWS1" + struct.pack("<I", len(payload)) + payload


def s(b): return struct.pack("<I", len(b)) + b


def i64(v): return struct.pack("<q", v)


SET, GET, ADD, WAIT, CHECK, HELLO, BYE = 1, 2, 3, 4, 5, 6, 7
put("fuzz_store_server", "set_get", frame(bytes([SET]) + s(b"k") + s(b"v")) +
    frame(bytes([GET]) + s(b"k") + i64(0)))
put("fuzz_store_server", "add", frame(bytes([ADD]) + s(b"ctr") + i64(5)))
put("fuzz_store_server", "wait_check", frame(bytes([WAIT]) + i64(1) + struct.pack("<I", 2) +
                                             s(b"a") + s(b"k")) +
    frame(bytes([CHECK]) + struct.pack("<I", 1) + s(b"k")))
put("fuzz_store_server", "huge_len", b"GWS1\xff\xff\xff\xff")
# a rank's session: HELLO, then the connection closes without BYE (the rank left) while a wait
# from the same input is parked; and an orderly session (BYE before the close)
put("fuzz_store_server", "hello_left", frame(bytes([HELLO]) + struct.pack("<I", 1)) +
    frame(bytes([WAIT]) + i64(50) + struct.pack("<I", 1) + s(b"gw/addr/1")))
put("fuzz_store_server", "hello_bye", frame(bytes([HELLO]) + struct.pack("<I", 3)) +
    frame(bytes([BYE])))
put("fuzz_store_server", "bad_magic", b"XXXX\x01\x00\x00\x00\x01")


# store core: segments of ctl:u8 len:u16 bytes (ctl bit 0 the client, 1 time passes, 2 hang
# up, 3 no keyless hello first, 4 on the first: the server has a key); each server seed whole
# as client 0's one segment, then two clients that meet
def seg(ctl, b): return bytes([ctl]) + u16(len(b)) + b


store_dir = os.path.join(root, "fuzz_store_server")
for name in sorted(os.listdir(store_dir)):
    with open(os.path.join(store_dir, name), "rb") as f:
        put("fuzz_store_core", name, seg(0, f.read()))
put("fuzz_store_core", "set_wakes_get", seg(1, frame(bytes([GET]) + s(b"k") + i64(60000))) +
    seg(0, frame(bytes([SET]) + s(b"k") + s(b"v"))))
put("fuzz_store_core", "rank_left_fails_wait",
    seg(1, frame(bytes([WAIT]) + i64(60000) + struct.pack("<I", 1) + s(b"gw/addr/2"))) +
    seg(4, frame(bytes([HELLO]) + struct.pack("<I", 2))))
put("fuzz_store_core", "wait_times_out", seg(2, frame(bytes([GET]) + s(b"x") + i64(1 << 40)) +
                                           frame(bytes([CHECK]) + struct.pack("<I", 1) + s(b"x"))))
put("fuzz_store_core", "keyed_refused", seg(16, frame(bytes([SET]) + s(b"k") + s(b"v"))))
put("fuzz_store_core", "raw_auth", seg(8, b"GWA1" + bytes(36)))

# store client: op byte (2 bits per request; bit 7 = set first), then the server's replies;
# fuzz_store_client_core reads the same format without sockets
OK, TIMEOUT, ERROR, LEFT = 0, 1, 2, 3
store_client = {
    "get_ok": b"\x00" + frame(bytes([OK]) + s(b"value")),
    "add_ok": b"\x01" + frame(bytes([OK]) + i64(42)),
    "add_err": b"\x01" + frame(bytes([ERROR]) + s(b"not a counter")),
    "wait_timeout": b"\x02" + frame(bytes([TIMEOUT]) + struct.pack("<I", 1) + s(b"rank/1/addr")),
    "check_set": b"\x83" + frame(bytes([OK])) + frame(bytes([OK, 1])),
    # bit 6: a ranked client, whose HELLO is answered first; then a wait answered LEFT (rank 2)
    "ranked_left": b"\x42" + frame(bytes([OK])) +
    frame(bytes([LEFT]) + struct.pack("<II", 2, 2) + s(b"k") + s(b"rank/1/addr")),
    "get_left": b"\x00" + frame(bytes([LEFT]) + struct.pack("<II", 1, 1) + s(b"k")),
}
for target in ("fuzz_store_client", "fuzz_store_client_core"):
    for name, data in store_client.items():
        put(target, name, data)


# tcp frames: mode, receives (u16 size, tag), then the peer's bytes
def tcp_hdr(typ, chunk, tag, msg_len, seq, off):
    return struct.pack("<IBBHIIQQQQ16x", 0x31575747, 3, typ, 0, chunk, 0, tag, msg_len, seq, off)


put("fuzz_tcp_frames", "one_msg", b"\x01" + u16(100) + b"\x05" + tcp_hdr(1, 10, 5, 10, 0, 0) +
    b"0123456789")
put("fuzz_tcp_frames", "two_chunks", b"\x02" + u16(100) + b"\x05" + u16(8) + b"\x06" +
    tcp_hdr(1, 4, 5, 8, 0, 0) + b"abcd" + tcp_hdr(1, 4, 5, 8, 0, 4) + b"efgh" +
    tcp_hdr(1, 0, 6, 0, 1, 0))
put("fuzz_tcp_frames", "unexpected", b"\x00" + tcp_hdr(1, 3, 9, 3, 0, 0) + b"xyz")
put("fuzz_tcp_frames", "any_source", b"\x41" + u16(64) + b"\xff" + tcp_hdr(1, 2, 77, 2, 0, 0) + b"hi")
put("fuzz_tcp_frames", "hello", b"\x80" + tcp_hdr(2, 0, 7, 1, 0, 0))
put("fuzz_tcp_frames", "heartbeat", b"\x00" + tcp_hdr(3, 0, 0, 0, 0, 0) + tcp_hdr(1, 2, 9, 2, 0, 0) + b"ok")
put("fuzz_tcp_frames", "too_long", b"\x01" + u16(4) + b"\x05" + tcp_hdr(1, 10, 5, 10, 0, 0) +
    b"0123456789")

# fuzz_tcp_frames_core: mode (bits 2-3: streams - 1; bit 4: receives posted last), receives,
# then segments: stream byte, u16 length, bytes
def tcp_seg(stream, b): return bytes([stream]) + u16(len(b)) + b


tcp_core = {
    "one_msg": b"\x01" + u16(100) + b"\x05" + tcp_seg(0, tcp_hdr(1, 10, 5, 10, 0, 0) + b"0123456789"),
    # a header cut across two segments, then its payload
    "split_header": b"\x01" + u16(100) + b"\x05" + tcp_seg(0, tcp_hdr(1, 4, 5, 4, 0, 0)[:20]) +
    tcp_seg(0, tcp_hdr(1, 4, 5, 4, 0, 0)[20:] + b"abcd"),
    # two streams: message 1's chunk comes first on stream 1 and stalls until message 0 is in
    "stall": b"\x06" + u16(100) + b"\x05" + u16(100) + b"\x06" +
    tcp_seg(1, tcp_hdr(1, 3, 6, 3, 1, 0) + b"xyz") + tcp_seg(0, tcp_hdr(1, 2, 5, 2, 0, 0) + b"ab"),
    # a message striped over two streams
    "striped": b"\x05" + u16(100) + b"\x05" + tcp_seg(0, tcp_hdr(1, 4, 5, 8, 0, 0) + b"abcd") +
    tcp_seg(1, tcp_hdr(1, 4, 5, 8, 0, 4) + b"efgh"),
    # buffered as unexpected, then matched by a receive posted after it
    "unexpected": b"\x11" + u16(100) + b"\x09" + tcp_seg(0, tcp_hdr(1, 3, 9, 3, 0, 0) + b"xyz"),
    "any_source": b"\x41" + u16(64) + b"\xff" + tcp_seg(0, tcp_hdr(1, 2, 77, 2, 0, 0) + b"hi"),
    "too_long": b"\x01" + u16(4) + b"\x05" + tcp_seg(0, tcp_hdr(1, 10, 5, 10, 0, 0) + b"0123456789"),
    "hello_on_stream": b"\x00" + tcp_seg(0, tcp_hdr(2, 0, 7, 1, 0, 0)),
    "outside": b"\x01" + u16(100) + b"\x05" + tcp_seg(0, tcp_hdr(1, 10, 5, 4, 0, 0) + bytes(10)),
}
for name, data in tcp_core.items():
    put("fuzz_tcp_frames_core", name, data)


# dpdk frames: flags, [recv size, tag], frames (u16 length + gradwire header + payload)
def wire(typ, seg, seq=0, ack=0, sack=0, msg_id=0, wnd=64, tag=0, msg_len=0, off=0):
    return struct.pack("<IBBHIIIIQIIQQQ", 0x31445747, 4, typ, seg, 0, 0, seq, ack, sack, msg_id,
                       wnd, tag, msg_len, off)


def batch_rec(tag, data): return struct.pack("<QII", tag, len(data), 0) + data


def pkt(b): return u16(len(b)) + b


put("fuzz_dpdk_frames", "data", b"\x01" + u16(64) + b"\x05" +
    pkt(wire(1, 10, tag=5, msg_len=10) + b"0123456789"))
put("fuzz_dpdk_frames", "two_segs", b"\x01" + u16(64) + b"\x05" +
    pkt(wire(1, 4, seq=1, tag=5, msg_len=8, off=4) + b"efgh") +
    pkt(wire(1, 4, seq=0, tag=5, msg_len=8) + b"abcd"))
batch = batch_rec(5, b"abc") + batch_rec(6, b"")
put("fuzz_dpdk_frames", "batch", b"\x01" + u16(64) + b"\x06" +
    pkt(wire(6, len(batch), tag=0, msg_len=2) + batch))
put("fuzz_dpdk_frames", "ack_sack", b"\x00" + pkt(wire(2, 16, ack=3, sack=0b1010) + bytes(16)))
put("fuzz_dpdk_frames", "fin", b"\x00" + pkt(wire(5, 0)))
# A SYN carries a ClientHello (gw_auth.h): magic "GWA1", version 1, no key, no nonce.
client_hello = struct.pack("<IBBH", 0x31415747, 1, 0, 0) + bytes(32)
put("fuzz_dpdk_frames", "syn", b"\x02" + pkt(wire(3, 40, tag=99) + client_hello))
put("fuzz_dpdk_frames", "raw", b"\x10" + pkt(bytes(60)))


# fuzz_dpdk_frames_core: flags (bit 0 passive endpoint, 1 keep connection ids, 2 force magic,
# version and seg_len, 3 any-source, 4 receives last, 5-6 their number, 7 sends), [window byte],
# [sends: 1 + n % 4, each u16 length and tag], receives, then frames: u16 word (length; bit 14
# whole frame, bit 15 poll after it) and the bytes.
def core_pkt(b, poll=False, raw=False):
    return u16(len(b) | (0x8000 if poll else 0) | (0x4000 if raw else 0)) + b


def sends(*lens): return bytes([len(lens) - 1]) + b"".join(u16(n) + b"\x07" for n in lens)


core_key = 0x6b6579  # the target's connection key
server_hello = struct.pack("<IBBBB", 0x31415747, 1, 0, 1, 0) + bytes(64)  # keyless, taken
data10 = wire(1, 10, tag=5, msg_len=10) + b"0123456789"
recv64 = u16(64) + b"\x05"
dpdk_core = {
    "data_active": b"\x20" + recv64 + core_pkt(data10),
    "data_passive": b"\x21\x40" + recv64 + core_pkt(data10),
    "two_segs": b"\x21\x40" + recv64 +
    core_pkt(wire(1, 4, seq=1, tag=5, msg_len=8, off=4) + b"efgh", poll=True) +
    core_pkt(wire(1, 4, seq=0, tag=5, msg_len=8) + b"abcd"),
    "batch": b"\x41\x40" + recv64 + u16(64) + b"\x06" +
    core_pkt(wire(6, len(batch), msg_len=2) + batch),
    # eight packets in flight; 4-6 held past the holes at 1-3: fast retransmit, then all acked
    "sack_fast": b"\x81\x40" + sends(10000) +
    core_pkt(wire(2, 0, ack=1, sack=0b111000), poll=True) + core_pkt(wire(2, 0, ack=8)),
    "sack_ext": b"\x81\x40" + sends(65535) +
    core_pkt(wire(2, 16, ack=2, sack=0xfff0) + struct.pack("<QQ", 0, 0), poll=True),
    "batch_sends": b"\x81\x40" + sends(10, 20, 0, 30) + core_pkt(wire(2, 0, ack=1)),
    "synack": b"\x20" + recv64 + core_pkt(wire(4, 72, tag=core_key) + server_hello, poll=True) +
    core_pkt(data10),
    "syn_again": b"\x01\x40" + core_pkt(wire(3, 40, tag=core_key) + client_hello) +
    core_pkt(wire(3, 32, tag=core_key) + bytes(32)),
    "syn_parked": b"\x00" + core_pkt(wire(3, 40, tag=99) + client_hello),
    "fin_after_data": b"\x31\x40" + recv64 + core_pkt(data10, poll=True) + core_pkt(wire(5, 0)),
    "unexpected_late": b"\x31\x40" + recv64 + core_pkt(data10),
    "any_source": b"\x29\x40" + u16(64) + b"\xff" + core_pkt(data10),
    "window_1": b"\x21\x01" + recv64 + core_pkt(wire(1, 10, seq=2, tag=5, msg_len=10) + bytes(10)),
    "truncated": b"\x21\x40" + u16(4) + b"\x05" + core_pkt(data10),
    "raw": b"\x00" + core_pkt(bytes(60), raw=True),
    # a message's end twice, the later packet first (placed at once): its receive completes once
    "end_twice": b"\x21\x40" + recv64 +
    core_pkt(wire(1, 10, seq=1, tag=5, msg_len=10) + b"9876543210") + core_pkt(data10),
    # 20 packets past a hole, none matchable yet: held until the limit (16), then dropped
    "held_max": b"\x01\x40" +
    b"".join(core_pkt(wire(1, 1, seq=i, msg_id=i, tag=5, msg_len=1) + b"x") for i in range(1, 21)),
}
for name, data in dpdk_core.items():
    put("fuzz_dpdk_frames_core", name, data)


# collectives: call, count, dtype, op, then messages (selector, u16 length, bytes)
desc = struct.pack("<IBBBBBB6xQiI", 0x67776331, 0, 0, 0, 1, 0, 0, 4, 0, 1)  # coll::Desc
put("fuzz_coll_desc", "allreduce_ring", bytes([0, 3, 0, 0]) + b"\x80" + u16(len(desc)) + desc +
    b"\x00" + u16(8) + bytes(8) + b"\x01" + u16(8) + bytes(8))
put("fuzz_coll_desc", "bad_desc", bytes([0, 3, 0, 0]) + b"\x80" + u16(8) + bytes(8))
desc_b = struct.pack("<IBBBBBB6xQiI", 0x67776331, 3, 0, 0, 0, 0, 0, 4, 1, 1)
put("fuzz_coll_desc", "broadcast", bytes([0x23, 3, 0, 0]) + b"\x80" + u16(len(desc_b)) + desc_b +
    b"\x00" + u16(16) + bytes(16))
put("fuzz_coll_desc", "barrier", bytes([4, 0, 0, 0]) + b"\x80" + u16(len(desc)) + desc)

# parameter server: mode, then messages (kind: 0 control, 1 table, 2 push, 3 pull; u16, bytes)
table = struct.pack("<IBB2xiiQQ", 0x47575053, 0, 1, 1, 1, 16384, 2)  # on_loss continue + struct.pack("<QQQQ", 1, 8, 2, 100)
bye = struct.pack("<IBBHIIIIQQ", 0x47575053, 4, 0, 0, 0, 0xffffffff, 0, 0, 0, 0) + bytes(216)
put("fuzz_ps_msgs", "table_bye", b"\x00" + b"\x01" + u16(len(table)) + table +
    b"\x00" + u16(len(bye)) + bye)
put("fuzz_ps_msgs", "table_push", b"\x01" + b"\x01" + u16(len(table)) + table +
    b"\x02" + u16(32) + bytes(32))
put("fuzz_ps_msgs", "short_table", b"\x00" + b"\x01" + u16(8) + table[:8])
put("fuzz_ps_msgs", "many_keys", b"\x00" + b"\x01" + u16(len(table)) +
    table[:24] + struct.pack("<Q", (1 << 60) + 2) + table[32:])



# ps key table alone: mode, servers - 1, staleness, min_part - 1, declared keys - 1, table
def ps_table(mode, servers, stal, min_part, keys, nkeys=None):
    n = len(keys) if nkeys is None else nkeys
    return (struct.pack("<IBB2xiiQQ", 0x47575053, mode, 1, servers, stal, min_part, n) +
            b"".join(struct.pack("<QQ", k, c) for k, c in keys))


two = [(1, 8), (2, 100)]
put("fuzz_ps_table", "ok", bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, two))
put("fuzz_ps_table", "ssp_four", bytes([2, 1, 1, 0, 3]) +
    ps_table(2, 2, 1, 1, two + [(7, 1), (1 << 40, 3)]))
put("fuzz_ps_table", "wraps", bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, two, (1 << 60) + 2))
put("fuzz_ps_table", "wrong_count",
    bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, [(1, 8), (2, 99)]))
put("fuzz_ps_table", "missing", bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, [(1, 8)]))
put("fuzz_ps_table", "twice", bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, two + [(1, 8)]))
put("fuzz_ps_table", "short", bytes([0, 0, 0, 3, 1]) + ps_table(0, 1, 0, 4, two)[:20])


# coll::check_desc alone: kind, dtype, op, algo, flags (1 device, 2 overlay), count (u16), seq,
# root, ranks - 1, rank, peer, then the received bytes (XORed over this rank's Desc if overlay)
def coll_desc(kind=0, dtype=0, op=0, algo=1, device=0, relayed=0, origin=0, count=4, root=0,
              seq=1, magic=0x67776331):  # coll::Desc, 32 bytes (count at offset 16)
    return struct.pack("<IBBBBBBH4xQiI", magic, kind, dtype, op, algo, device, relayed, origin,
                       count, root, seq)


def coll_core(flags, data, kind=0, dtype=0, op=0, algo=1, count=4, seq=1, root=0, n=2, rank=0,
              peer=1):
    return bytes([kind, dtype, op, algo, flags]) + u16(count) + bytes([seq, root, n - 1, rank,
                                                                       peer]) + data


def xor(a, b): return bytes(x ^ y for x, y in zip(a, b))


mine = coll_desc()
put("fuzz_coll_desc_core", "same", coll_core(0, mine))
put("fuzz_coll_desc_core", "same_overlay", coll_core(2, bytes(32)))
put("fuzz_coll_desc_core", "other_count", coll_core(0, coll_desc(count=5)))
put("fuzz_coll_desc_core", "other_dtype_device", coll_core(2, xor(mine, coll_desc(dtype=1,
                                                                                 device=1))))
put("fuzz_coll_desc_core", "short", coll_core(0, mine[:8]))
put("fuzz_coll_desc_core", "bad_magic", coll_core(0, coll_desc(magic=0x12345678)))
put("fuzz_coll_desc_core", "unknown_names", coll_core(0, coll_desc(kind=200, dtype=99, op=77,
                                                                   algo=55)))
put("fuzz_coll_desc_core", "relayed", coll_core(0, coll_desc(relayed=1, origin=3) +
                                                coll_desc(count=9, origin=5), n=8, rank=2, peer=1))
put("fuzz_coll_desc_core", "relayed_short", coll_core(0, coll_desc(relayed=1) + bytes(8)))
put("fuzz_coll_desc_core", "broadcast", coll_core(0, coll_desc(kind=3, root=2, count=16), kind=3,
                                                  root=2, count=16, n=4))
put("fuzz_coll_desc_core", "barrier", coll_core(2, xor(mine, coll_desc(kind=4)), kind=4))


# ps server data-path checks alone: mode, servers - 1, staleness, min_part - 1, declared keys
# - 1, this server's rank, workers - 1, then messages: selector (bit 0 push; control: 2 whole,
# 4 magic, 8 pull; push: 2 OK), sender rank, then control [u16 length] + CtrlMsg, or push part
# byte + u32 length
def ps_ctrl(typ, part=0, slot=0, gen=0, clock=0, nbytes=0, magic=0x47575053):
    return struct.pack("<IBBHIIIIQQ", magic, typ, 0, 0, part, slot, gen, 0, clock, nbytes) + \
        bytes(216)


def ps_core(msgs, mode=0, servers=1, stal=0, min_part=4, nkeys=2, me=0, workers=1):
    return bytes([mode, servers - 1, stal, min_part - 1, nkeys - 1, me, workers - 1]) + msgs


def ps_push(rank, part, n, ok=True): return bytes([3 if ok else 1, rank, part]) + \
    struct.pack("<I", n)


put("fuzz_ps_msgs_core", "pull", ps_core(b"\x02\x01" + ps_ctrl(3, nbytes=32)))
put("fuzz_ps_msgs_core", "pull_forced", ps_core(b"\x0e\x01" + ps_ctrl(0, part=1, nbytes=400)))
put("fuzz_ps_msgs_core", "push", ps_core(ps_push(1, 0, 32) + ps_push(1, 1, 400)))
put("fuzz_ps_msgs_core", "push_bad", ps_core(ps_push(1, 0, 31) + ps_push(0, 0, 32) +
                                             ps_push(1, 0, 64, ok=False)))
put("fuzz_ps_msgs_core", "pull_from_server", ps_core(b"\x02\x00" + ps_ctrl(3, nbytes=32)))
put("fuzz_ps_msgs_core", "pull_no_part", ps_core(b"\x02\x01" + ps_ctrl(3, part=99, nbytes=32)))
put("fuzz_ps_msgs_core", "pull_other_server",
    ps_core(b"\x02\x02" + ps_ctrl(3, part=1, nbytes=400), servers=2, nkeys=4, me=1))
put("fuzz_ps_msgs_core", "pull_wrong_bytes", ps_core(b"\x02\x01" + ps_ctrl(3, nbytes=33)))
# clock 2^63 overflowed the server's int64 clock sums; refused now (the target aborts without)
put("fuzz_ps_msgs_core", "pull_clock_2_63",
    ps_core(b"\x02\x03" + ps_ctrl(3, clock=1 << 63, nbytes=32), mode=2, stal=3, workers=3))
put("fuzz_ps_msgs_core", "bye_short_bad", ps_core(b"\x02\x01" + ps_ctrl(4) + b"\x00\x01" +
                                                  u16(100) + ps_ctrl(3)[:100] + b"\x02\x01" +
                                                  ps_ctrl(3, magic=0)))


# rdma header messages (rdma_wire.h check_msg): lanes, eager_bytes, payload, send flags
# (present|used|awaiting|windowed), win_next, send length, then MsgHdr (48 bytes, version 5).
def rdma_case(lanes, eager, payload, flags, win_next, slen, typ, stripes, tag, ln, rkey):
    hdr = struct.pack("<BBHIIIQQQII", typ, 5, stripes, 0, 0, 0, tag, ln, 0x1000, rkey, 0)
    return (bytes([lanes]) + u16(eager) + u16(payload) + bytes([flags]) +
            struct.pack("<QQ", win_next, slen) + hdr)


put("fuzz_rdma_msgs", "eager", rdma_case(0, 8192, 100, 0, 0, 0, 1, 0, 7, 100, 0))
put("fuzz_rdma_msgs", "rts", rdma_case(0, 8192, 0, 0, 0, 0, 2, 0, 7, 1 << 20, 0))
put("fuzz_rdma_msgs", "cts", rdma_case(1, 8192, 0, 7, 0, 1 << 20, 3, 2, 0, 1 << 20, 9))
put("fuzz_rdma_msgs", "reject", rdma_case(0, 8192, 0, 7, 0, 1 << 20, 4, 0, 0, 0, 0))
put("fuzz_rdma_msgs", "adv", rdma_case(3, 8192, 0, 0, 0, 0, 5, 4, 7, 1 << 16, 9))
put("fuzz_rdma_msgs", "window", rdma_case(0, 8192, 0, 15, 4096, 1 << 16, 6, 1, 4096, 4096, 9))
