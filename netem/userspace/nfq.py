"""nfnetlink_queue spoken directly over an AF_NETLINK socket: the messages (pure) and a small socket wrapper.

Why not a library: the daemon needs three things of NFQUEUE — bind a queue, read each packet's id, mark and first
bytes, and give verdicts — and the cost that matters is per packet. Here a verdict is 32 bytes appended to a
buffer, and one `sendto` carries every verdict that is due (the kernel's netfilter netlink code walks all the
messages of one buffer), instead of one system call per packet.

Message layout (facts from the kernel's uapi headers linux/netlink.h, linux/netfilter/nfnetlink.h and
linux/netfilter/nfnetlink_queue.h; native byte order where the header says __u16/__u32, network order where
it says __be16/__be32):

- every message: `struct nlmsghdr` {u32 len, u16 type, u16 flags, u32 seq, u32 pid}, then `struct nfgenmsg`
  {u8 family, u8 version, be16 res_id = queue number}; type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_*;
- then attributes `struct nlattr` {u16 len, u16 type} + payload, each padded to 4 bytes;
- a packet (NFQNL_MSG_PACKET): NFQA_PACKET_HDR {be32 packet_id, be16 hw_protocol, u8 hook}, NFQA_MARK (be32,
  only when the mark is not 0), NFQA_PAYLOAD (the first `copy_range` bytes: the IPv4 header and ports), others
  skipped;
- a verdict (NFQNL_MSG_VERDICT): NFQA_VERDICT_HDR {be32 verdict (NF_DROP 0, NF_ACCEPT 1), be32 id};
- configuration (NFQNL_MSG_CONFIG): NFQA_CFG_CMD {u8 command, u8 pad, be16 pf}, NFQA_CFG_PARAMS {be32
  copy_range, u8 copy_mode} (packed: 5 bytes), NFQA_CFG_QUEUE_MAXLEN be32, NFQA_CFG_MASK and NFQA_CFG_FLAGS be32;
- an error or acknowledgement (NLMSG_ERROR): {s32 error (0: ack, else -errno), the request's nlmsghdr...}.

No NFQA_CFG_F_FAIL_OPEN: a full queue drops packets, it never passes them undelayed. NFQA_CFG_F_GSO is set: a
GSO packet is queued whole instead of being segmented first (the daemon only reads its headers and never
rewrites it, so unfinished checksums do not matter). NFQNL_MSG_VERDICT_BATCH (accept every queued packet up to
an id) is not used: it is only right when releases follow the queue's id order, which jitter, several links
with different delays and per-flow order all break, and one buffer of single verdicts already costs one
system call per release round.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import time
from collections.abc import Iterable
from typing import NamedTuple

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
SO_RCVBUFFORCE = 33  # asm-generic/socket.h: a receive buffer beyond rmem_max (root)
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 0x2
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_MARK, NFQA_PAYLOAD = 1, 2, 3, 10
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1 << 0, 1 << 2
NF_DROP, NF_ACCEPT = 0, 1
NLA_TYPE_MASK = 0x3FFF  # without NLA_F_NESTED and NLA_F_NET_BYTEORDER

NLMSGHDR = struct.Struct("=IHHII")
NFGENMSG = struct.Struct("!BBH")
NLATTR = struct.Struct("=HH")
BE32 = struct.Struct("!I")
PACKET_TYPE = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET
VERDICT_LEN = NLMSGHDR.size + NFGENMSG.size + NLATTR.size + 8  # 32 bytes
MAX_VERDICTS_PER_SEND = 2048  # 64 KiB a buffer, well inside the socket's send buffer
SEND_RETRIES = 1000


class Packet(NamedTuple):
    """One queued packet as the daemon sees it: its id (for the verdict), its mark, its first bytes."""

    packet_id: int
    mark: int
    payload: bytes


def attribute(kind: int, payload: bytes) -> bytes:
    """One netlink attribute: header, payload, padding to 4 bytes."""
    length = NLATTR.size + len(payload)
    return NLATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def message(msg_type: int, queue: int, attrs: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    """One nfnetlink_queue message of type NFQNL_MSG_`msg_type` for `queue` carrying `attrs`."""
    length = NLMSGHDR.size + NFGENMSG.size + len(attrs)
    header = NLMSGHDR.pack(length, (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, seq, 0)
    return header + NFGENMSG.pack(socket.AF_UNSPEC, 0, queue) + attrs


def bind_request(queue: int, seq: int) -> bytes:
    """Bind this socket to `queue` (acknowledged)."""
    cmd = struct.pack("!BBH", NFQNL_CFG_CMD_BIND, 0, socket.AF_INET)
    return message(NFQNL_MSG_CONFIG, queue, attribute(NFQA_CFG_CMD, cmd), NLM_F_REQUEST | NLM_F_ACK, seq)


def config_request(queue: int, copy_range: int, maxlen: int, flags: int, seq: int) -> bytes:
    """Copy the first `copy_range` bytes of each packet, hold at most `maxlen` packets, set `flags` (acknowledged).

    The flag mask covers FAIL_OPEN too, so the queue is fail-closed whatever a previous owner set."""
    mask = flags | NFQA_CFG_F_FAIL_OPEN
    attrs = (attribute(NFQA_CFG_PARAMS, struct.pack("!IB", copy_range, NFQNL_COPY_PACKET))
             + attribute(NFQA_CFG_QUEUE_MAXLEN, BE32.pack(maxlen))
             + attribute(NFQA_CFG_MASK, BE32.pack(mask)) + attribute(NFQA_CFG_FLAGS, BE32.pack(flags)))  # fmt: skip
    return message(NFQNL_MSG_CONFIG, queue, attrs, NLM_F_REQUEST | NLM_F_ACK, seq)


def verdict_prefix(queue: int, verdict: int) -> bytes:
    """The first 28 bytes of every verdict message of `queue` (all but the packet id)."""
    msg = message(NFQNL_MSG_VERDICT, queue, attribute(NFQA_VERDICT_HDR, BE32.pack(verdict) + BE32.pack(0)))
    return msg[:-4]


def verdicts(prefix: bytes, ids: Iterable[int]) -> bytes:
    """One buffer of verdict messages, one per packet id (`prefix` from `verdict_prefix`)."""
    return b"".join([prefix + i.to_bytes(4, "big") for i in ids])


def parse(buf: bytes) -> tuple[list[Packet], list[tuple[int, int]]]:
    """The packets and the (seq, errno) of the NLMSG_ERROR messages (errno 0: an acknowledgement) in a buffer
    received from the queue's socket; other messages and unknown attributes are skipped."""
    packets: list[Packet] = []
    errors: list[tuple[int, int]] = []
    end, at = len(buf), 0
    unpack_msg, unpack_attr = NLMSGHDR.unpack_from, NLATTR.unpack_from
    while at + NLMSGHDR.size <= end:
        length, kind, _, seq, _ = unpack_msg(buf, at)
        if length < NLMSGHDR.size or at + length > end:
            break  # truncated: nothing more can be trusted
        if kind == PACKET_TYPE:
            packet_id, mark, payload = -1, 0, b""
            pos, stop = at + NLMSGHDR.size + NFGENMSG.size, at + length
            while pos + NLATTR.size <= stop:
                alen, atype = unpack_attr(buf, pos)
                if alen < NLATTR.size:
                    break
                atype &= NLA_TYPE_MASK
                if atype == NFQA_PACKET_HDR:
                    packet_id = BE32.unpack_from(buf, pos + 4)[0]
                elif atype == NFQA_MARK:
                    mark = BE32.unpack_from(buf, pos + 4)[0]
                elif atype == NFQA_PAYLOAD:
                    payload = buf[pos + 4 : pos + alen]
                pos += (alen + 3) & ~3
            if packet_id >= 0:
                packets.append(Packet(packet_id, mark, payload))
        elif kind == NLMSG_ERROR and length >= NLMSGHDR.size + 4:
            code = struct.unpack_from("=i", buf, at + NLMSGHDR.size)[0]
            errors.append((seq, -code))
        at += (length + 3) & ~3
    return packets, errors


class NfQueue:
    """A bound queue: non-blocking receive of packets, verdicts in batches. Closing the socket unbinds the queue;
    the kernel then drops what it still holds for it (no bypass: a dead daemon stalls its links)."""

    def __init__(self, queue: int, copy_range: int, maxlen: int, rcvbuf: int, flags: int = NFQA_CFG_F_GSO) -> None:
        self.queue = queue
        self.overruns = 0  # ENOBUFS: the kernel could not hand packets over (socket buffer full); they were dropped
        self.verdict_errors = 0
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self._sock.bind((0, 0))
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
            except OSError:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self._request(bind_request(queue, 1), 1)
            self._request(config_request(queue, copy_range, maxlen, flags, 2), 2)
        except BaseException:
            self._sock.close()
            raise
        self._sock.setblocking(False)
        self._accept = verdict_prefix(queue, NF_ACCEPT)
        self._drop = verdict_prefix(queue, NF_DROP)

    def _request(self, msg: bytes, seq: int, timeout_s: float = 5.0) -> None:
        self._sock.settimeout(timeout_s)
        self._sock.send(msg)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            _, answers = parse(self._sock.recv(65536))
            for got, code in answers:
                if got == seq:
                    if code:
                        raise OSError(code, os.strerror(code))
                    return
        raise TimeoutError(f"NFQUEUE {self.queue}: no answer from the kernel")

    def fileno(self) -> int:
        """The socket's descriptor, for select."""
        return self._sock.fileno()

    def receive(self, limit: int) -> list[tuple[Packet, float]]:
        """Up to `limit` queued packets that are waiting now, each with the monotonic time it was read."""
        out: list[tuple[Packet, float]] = []
        recv, clock = self._sock.recv, time.monotonic
        for _ in range(limit):
            try:
                buf = recv(65536)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno != errno.ENOBUFS:
                    raise
                self.overruns += 1
                continue
            now = clock()
            packets, errors = parse(buf)
            self.verdict_errors += sum(1 for _, code in errors if code)
            out.extend((p, now) for p in packets)
        return out

    def _send(self, prefix: bytes, ids: list[int]) -> None:
        for start in range(0, len(ids), MAX_VERDICTS_PER_SEND):
            buf = verdicts(prefix, ids[start : start + MAX_VERDICTS_PER_SEND])
            for _ in range(SEND_RETRIES):
                try:
                    self._sock.send(buf)
                    break
                except OSError as err:  # the kernel is short of memory for the buffer: wait and retry
                    if err.errno not in (errno.ENOBUFS, errno.EAGAIN):
                        raise
                    time.sleep(0.001)
            else:
                raise OSError(errno.ENOBUFS, f"NFQUEUE {self.queue}: verdicts not accepted by the kernel")

    def accept(self, ids: list[int]) -> None:
        """Release these packets (one system call per 2048)."""
        self._send(self._accept, ids)

    def drop(self, ids: list[int]) -> None:
        """Drop these packets."""
        self._send(self._drop, ids)

    def close(self) -> None:
        """Close the socket: the kernel unbinds the queue."""
        self._sock.close()
