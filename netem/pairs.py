"""Ping every ordered pair of a map's hosts, from the hosts themselves (for `netem.validate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from netem.hosts import Host
from netem.remote import Remote, on_each
from netem.validate import parse_ping_times, ping_times_command


def ping_pairs(hosts: Mapping[str, Host], names: Sequence[str], remote: Remote, count: int = 10,
               interval_s: float = 0.2) -> dict[tuple[str, str], tuple[int, list[float]]]:  # fmt: skip
    """{(src, dst): (sent, RTTs)}: sources in parallel, each one's peers one after another.

    Local hosts share this machine, so their pings are bound to the source's address (`ping -I`), which is
    what the source's rules match.
    """
    def one(host: Host) -> dict[tuple[str, str], tuple[int, list[float]]]:
        out = {}
        for peer in names:
            if peer == host.name:
                continue
            cmd = ping_times_command(hosts[peer].address or "", count, interval_s,
                                     host.address if host.local else None)  # fmt: skip
            res = remote.run(host, cmd)
            sent, times = parse_ping_times(res.stdout)
            out[(host.name, peer)] = (sent or count, times)
        return out

    merged: dict[tuple[str, str], tuple[int, list[float]]] = {}
    for part in on_each([hosts[n] for n in names], one).values():
        merged.update(part)
    return merged
