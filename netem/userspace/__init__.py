"""The userspace WAN-emulation engine: packets queued by iptables NFQUEUE rules, held by a delay daemon.

For kernels without `sch_netem` (this CI machine, many containers and cloud VMs). Tagged iptables rules in the
mangle table send the packets of chosen address pairs (or marks) to an NFQUEUE; `netem.userspace.daemon` holds
each one for its link's one-way delay (with jitter and loss) and then accepts it. Bandwidth stays in the kernel
(htb classes, `netem.plan`). Modules:

- `table`: the daemon's link table (JSON) and how a packet is matched to a link (pure);
- `model`: when each packet is released (delay, jitter, loss, per-flow order) (pure);
- `nfq`: nfnetlink_queue's messages (pure) and the daemon's netlink socket (bind, receive, batched verdicts);
- `schedule`: the held packets in release order (pure);
- `daemon`: the program itself (`python -m netem.userspace --config FILE --tag gesscale-netem:TAG`);
- `launch`: the daemon's command line and state files, for whoever starts it;
- `rules`: the tagged iptables rules of one node (pure) and the tag-only cleanup;
- `agent`: what runs on a host (locally or over SSH): apply, clear, health, restart;
- `health`: whether a running emulation really delays packets (pure verdict over a snapshot).
"""
