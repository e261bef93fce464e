#!/usr/bin/python3
"""waitstates.py ANCHOR: MPI point-to-point wait states from an OTF2 archive.

Reads the archive (anchor file traces.otf2) with the otf2 module (Debian:
python3-otf2) and nothing else, matches every message's send record (MpiSend,
MpiIsend) with its receive record (MpiRecv, MpiIrecv) in order per sender,
receiver, communicator and tag (MPI's non-overtaking rule), finds the MPI
call region each record lies in, and computes the wait states as Scalasca
does:

  late sender:   the receiving call (MPI_Recv, MPI_Sendrecv, or the MPI_Wait*
                 that completed an MPI_Irecv) was entered before the sending
                 call: wait = min(send enter, receive leave) - receive enter.
  late receiver: a blocking send (MPI_Send, MPI_Ssend, MPI_Rsend,
                 MPI_Sendrecv) was entered before the receiving call:
                 wait = min(receive enter, send leave) - send enter.

Prints one JSON object: "messages", a list with per message its tag,
communicator, sender and receiver (world ranks), the two regions, their
enter and leave timestamps (ns: the archive's ticks at its timer resolution)
and, where the events carry it, their gclock::local_ns attribute, and the
two waits (ns, 0 when none); and "unmatched", the send and receive records
left without a partner.
"""
import json
import sys
from collections import defaultdict, deque

import otf2

RECV_CALLS = {"MPI_Recv", "MPI_Sendrecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"}
BLOCKING_SENDS = {"MPI_Send", "MPI_Ssend", "MPI_Rsend", "MPI_Sendrecv"}


def local_ns(ev):
    for a, v in ev.attributes.items():
        if a.name == "gclock::local_ns":
            return v
    return None


def main(anchor):
    with otf2.reader.open(anchor) as tr:
        res = tr.definitions.clock_properties.timer_resolution
        scale = lambda t: t * 1_000_000_000 // res
        # World rank of each location: its place in the MPI locations group.
        rank_of = {}
        for g in tr.definitions.groups:
            if g.group_type == otf2.GroupType.COMM_LOCATIONS:
                for i, loc in enumerate(g.members):
                    rank_of[loc] = i
        stack = defaultdict(list)  # location -> open regions (dicts), innermost last
        sends = defaultdict(deque)  # (sender, receiver, comm, tag) -> send records in order
        recvs = defaultdict(deque)
        for loc, ev in tr.events:
            name = type(ev).__name__
            if name == "Enter":
                stack[loc].append({"name": ev.region.name, "enter": scale(ev.time), "enter_local": local_ns(ev)})
            elif name == "Leave":
                if stack[loc]:
                    r = stack[loc].pop()
                    r["leave"], r["leave_local"] = scale(ev.time), local_ns(ev)
            elif name in ("MpiSend", "MpiIsend", "MpiRecv", "MpiIrecv"):
                me = rank_of.get(loc)
                comm = ev.communicator
                members = list(comm.group.members) if comm.group is not None else []
                peer_local = ev.receiver if name in ("MpiSend", "MpiIsend") else ev.sender
                if comm.group is not None and comm.group.group_type == otf2.GroupType.COMM_SELF:
                    peer = me
                elif peer_local < len(members):
                    peer = members[peer_local]  # python3-otf2 resolves a COMM_GROUP's ranks to locations
                    peer = rank_of.get(peer, peer)
                else:
                    continue
                region = stack[loc][-1] if stack[loc] else None
                rec = {"region": region, "time": scale(ev.time)}
                if name in ("MpiSend", "MpiIsend"):
                    sends[(me, peer, comm.name, ev.msg_tag)].append(rec)
                else:
                    recvs[(peer, me, comm.name, ev.msg_tag)].append(rec)
    messages = []
    unmatched = 0
    for key in set(sends) | set(recvs):
        s, r = sends.get(key, deque()), recvs.get(key, deque())
        unmatched += abs(len(s) - len(r))
        for a, b in zip(s, r):
            sr, rr = a["region"], b["region"]
            if sr is None or rr is None or "leave" not in sr or "leave" not in rr:
                messages.append({"tag": key[3], "comm": key[2], "sender": key[0], "receiver": key[1],
                                 "send_region": sr and sr["name"], "recv_region": rr and rr["name"],
                                 "late_sender": 0, "late_receiver": 0})
                continue
            ls = lr = 0
            if rr["name"] in RECV_CALLS and rr["enter"] < sr["enter"]:
                ls = min(sr["enter"], rr["leave"]) - rr["enter"]
            if sr["name"] in BLOCKING_SENDS and sr["enter"] < rr["enter"]:
                lr = min(rr["enter"], sr["leave"]) - sr["enter"]
            messages.append({
                "tag": key[3], "comm": key[2], "sender": key[0], "receiver": key[1],
                "send_region": sr["name"], "recv_region": rr["name"],
                "send_enter": sr["enter"], "send_leave": sr["leave"], "recv_enter": rr["enter"], "recv_leave": rr["leave"],
                "send_enter_local": sr["enter_local"], "send_leave_local": sr["leave_local"],
                "recv_enter_local": rr["enter_local"], "recv_leave_local": rr["leave_local"],
                "late_sender": ls, "late_receiver": lr,
            })
    messages.sort(key=lambda m: (m["tag"], m["sender"], m.get("send_enter") or 0))
    json.dump({"messages": messages, "unmatched": unmatched}, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: waitstates.py ARCHIVE/traces.otf2")
    main(sys.argv[1])
