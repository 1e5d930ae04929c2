"""nfnetlink_queue messages (netem.userspace.nfq) against bytes written out from the kernel's uapi structs, and
the daemon's release queue (netem.userspace.schedule)."""

from __future__ import annotations

import sys

import pytest

from netem.userspace import nfq
from netem.userspace.schedule import ReleaseQueue

pytestmark = pytest.mark.skipif(sys.byteorder != "little", reason="expected bytes written for little-endian hosts")

# struct nlmsghdr {u32 len, u16 type, u16 flags, u32 seq, u32 pid} in host order; struct nfgenmsg {u8 family,
# u8 version, be16 res_id}; struct nlattr {u16 len, u16 type}; payloads as the header types them.
ACCEPT_7_Q4000 = bytes.fromhex(
    "20000000" "0103" "0100" "00000000" "00000000"  # len 32, type (3 << 8) | NFQNL_MSG_VERDICT, NLM_F_REQUEST
    "00" "00" "0fa0"  # AF_UNSPEC, NFNETLINK_V0, queue 4000
    "0c00" "0200"  # NFQA_VERDICT_HDR, 12 bytes
    "00000001" "00000007"  # NF_ACCEPT, packet id 7
)


def _packet_msg(packet_id: int, mark: bytes | None, payload: bytes, extra: bytes = b"") -> bytes:
    attrs = bytes.fromhex("0b00" "0100") + packet_id.to_bytes(4, "big") + bytes.fromhex("0800" "03") + b"\0"
    if mark is not None:
        attrs += bytes.fromhex("0800" "0300") + mark
    attrs += bytes.fromhex("0800" "0600" "00000001")  # NFQA_IFINDEX_OUTDEV: skipped
    attrs += extra
    plen = 4 + len(payload)
    attrs += plen.to_bytes(2, "little") + bytes.fromhex("0a00") + payload + b"\0" * (-plen % 4)
    length = 20 + len(attrs)
    return length.to_bytes(4, "little") + bytes.fromhex("0003" "0000" "00000000" "00000000" "02000fa0") + attrs


IPV4_UDP = bytes.fromhex("45000020000000004011" "0000" "7f00003d" "7f00003e" "b8f7bb27")


def test_verdict_bytes_match_the_kernel_structs() -> None:
    prefix = nfq.verdict_prefix(4000, nfq.NF_ACCEPT)
    assert nfq.verdicts(prefix, [7]) == ACCEPT_7_Q4000
    two = nfq.verdicts(nfq.verdict_prefix(4000, nfq.NF_DROP), [1, 0xFFFFFFFF])
    assert len(two) == 2 * nfq.VERDICT_LEN
    assert two[24:32] == bytes.fromhex("00000000" "00000001") and two[56:64] == bytes.fromhex("00000000" "ffffffff")


def test_bind_and_config_requests() -> None:
    assert nfq.bind_request(4000, 1) == bytes.fromhex(
        "1c000000" "0203" "0500" "01000000" "00000000"  # 28 bytes, NFQNL_MSG_CONFIG, REQUEST|ACK, seq 1
        "00000fa0" "0800" "0100" "01" "00" "0002"  # NFQA_CFG_CMD {NFQNL_CFG_CMD_BIND, pad, be16 AF_INET}
    )
    got = nfq.config_request(4000, 128, 20000, nfq.NFQA_CFG_F_GSO, 2)
    assert got == bytes.fromhex(
        "38000000" "0203" "0500" "02000000" "00000000" "00000fa0"
        "0900" "0200" "00000080" "02" "000000"  # NFQA_CFG_PARAMS {be32 128, NFQNL_COPY_PACKET}, 5 bytes + pad
        "0800" "0300" "00004e20"  # NFQA_CFG_QUEUE_MAXLEN 20000
        "0800" "0400" "00000005"  # NFQA_CFG_MASK: GSO and FAIL_OPEN (so fail-open is cleared)
        "0800" "0500" "00000004"  # NFQA_CFG_FLAGS: GSO only
    )


def test_parse_packets_marks_payload_and_unknown_attributes() -> None:
    nested_ct = bytes.fromhex("0800" "0b80" "01020304")  # NFQA_CT with NLA_F_NESTED: skipped
    unknown = bytes.fromhex("0500" "3f00" "aa000000")  # a type this code does not know, 1 byte + padding
    buf = _packet_msg(0x01020304, bytes.fromhex("00050000"), IPV4_UDP, nested_ct + unknown)
    buf += _packet_msg(5, None, IPV4_UDP[:21])  # odd payload length: padded
    packets, errors = nfq.parse(buf)
    assert errors == []
    assert packets == [nfq.Packet(0x01020304, 0x50000, IPV4_UDP), nfq.Packet(5, 0, IPV4_UDP[:21])]


def test_parse_errors_acks_and_truncation() -> None:
    ack = bytes.fromhex("24000000" "0200" "0000" "01000000" "00000000" "00000000") + bytes(16)
    busy = bytes.fromhex("24000000" "0200" "0000" "02000000" "00000000" "f0ffffff") + bytes(16)  # -EBUSY (16)
    packets, errors = nfq.parse(ack + busy)
    assert packets == [] and errors == [(1, 0), (2, 16)]
    whole = _packet_msg(9, None, IPV4_UDP)
    assert nfq.parse(whole[:-3]) == ([], [])
    assert nfq.parse(whole + whole[:10])[0] == [nfq.Packet(9, 0, IPV4_UDP)]


def test_release_queue_orders_by_time_then_arrival() -> None:
    q = ReleaseQueue()
    assert q.next_due() is None and q.pop_due(1e9) == []
    for at, pid in [(2.0, 10), (1.0, 11), (2.0, 12), (1.5, 13), (2.0, 9)]:
        q.push(at, pid)
    assert len(q) == 5 and q.next_due() == 1.0
    assert q.pop_due(0.999) == []
    assert q.pop_due(1.5) == [11, 13]
    assert q.pop_due(2.0) == [10, 12, 9]  # equal times leave in arrival order, whatever the ids
    q.push(3.0, 1)
    q.push(2.5, 2)
    assert q.drain() == [2, 1] and len(q) == 0
