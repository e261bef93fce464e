#!/usr/bin/python3
"""Write a Score-P-like OTF2 archive with known clock truth (not gclock's writer).

Layout as Score-P writes it: one location group (MPI rank) per process with one
CPU-thread location, MPI_COMM_WORLD, regions with Enter/Leave, MpiSend/MpiRecv
records, every timestamp on the location's own local clock, and two CLOCK_OFFSET
local definitions per location (at init and at finalize: local time, offset to
the master clock = rank 0, standard deviation), as Score-P measures them with a
ping-pong against rank 0. An OTF2 reader interpolates linearly between them.

Truth: rank 0's clock is global time. Every other clock has an offset, a drift,
drift steps (the rate changes at random times) and wander (a random walk of the
rate). The truth file (JSON, for the evaluator only) holds the true global time
of every event of every location, the one-way latency of every message, and the
clock parameters; beside them, for tests of the correction on its abstract
model before an archive reader exists, what the archive holds (local times,
the offset records, the event index of each message's send and receive).

usage: scorep_like.py -out DIR [-procs N] [-seconds S] [-interval-ms M] [-seed K]
writes DIR/traces.otf2 (+ DIR/traces/, DIR/traces.def) and DIR/truth.json.
"""
import argparse
import heapq
import json
import math
import os
import random
import sys

import otf2
import _otf2
from otf2.enums import GroupType, Paradigm, LocationGroupType, LocationType, RegionRole

BASE = 1_732_000_000_000_000_000  # an absolute ns origin: exercises int64 arithmetic


class Clock:
    """Local clock of one process as a function of true global time (ns, int)."""

    def __init__(self, rng, reference, seconds, steps, wander_ppm):
        self.reference = reference
        if reference:
            self.o0, self.d0, self.steps = 0.0, 0.0, []
            self.grid = None
            return
        self.o0 = rng.uniform(-5e-3, 5e-3)            # s
        self.d0 = rng.uniform(-20e-6, 20e-6)          # s/s
        self.steps = sorted((rng.uniform(0.15, 0.85) * seconds,
                             rng.choice([-1, 1]) * rng.uniform(2e-6, 6e-6))
                            for _ in range(steps))
        # wander: the rate does a random walk (sigma wander_ppm per sqrt(s)),
        # integrated on a 10 ms grid into an offset
        dt = 0.01
        n = int(seconds / dt) + 3
        f, off = 0.0, 0.0
        self.grid = [0.0]
        for _ in range(n):
            f += rng.gauss(0, wander_ppm * 1e-6 * math.sqrt(dt))
            off += f * dt
            self.grid.append(off)
        self.dt = dt

    def offset(self, t):
        """local - global at true time t (seconds since start), seconds."""
        if self.reference:
            return 0.0
        o = self.o0 + self.d0 * t
        for ts, dd in self.steps:
            if t > ts:
                o += dd * (t - ts)
        i = min(int(t / self.dt), len(self.grid) - 2)
        fr = t / self.dt - i
        o += self.grid[i] * (1 - fr) + self.grid[i + 1] * fr
        return o

    def local(self, g):
        """local clock (int ns) at true global time g (int ns, absolute)."""
        return g + round(self.offset((g - BASE) / 1e9) * 1e9)


def simulate(rng, procs, seconds, interval):
    """Events per process in true time: lists of (g_ns, kind, arg)."""
    end = BASE + int(seconds * 1e9)
    start = BASE + 1_000_000
    ev = [[] for _ in range(procs)]
    busy = [start + 1000] * procs
    heap = []  # (time, seq, type, proc, payload)
    seq = 0
    for p in range(procs):
        heapq.heappush(heap, (start + int(rng.expovariate(1 / interval) * 1e9), seq, "send", p, None))
        seq += 1
    msgs = []
    gap = 400
    while heap:
        t, _, typ, p, pay = heapq.heappop(heap)
        if typ == "send" and t >= end - 2_000_000:
            continue  # no new sends at the end; every message sent is received
        if t < busy[p]:
            heapq.heappush(heap, (busy[p], seq, typ, p, pay))
            seq += 1
            continue
        if typ == "send":
            q = rng.randrange(procs - 1)
            q += q >= p
            tag = rng.randrange(4)
            s = t + 200
            lat = int(5000 + 45000 * rng.random() ** 2)  # 5-50 us, most near the low end
            ev[p] += [(t, "enter", "MPI_Send"), (s, "send", (q, tag, len(msgs))), (t + 1000, "leave", "MPI_Send")]
            busy[p] = t + 1000 + gap
            msgs.append({"from": p, "to": q, "tag": tag, "send_g": s, "lat_ns": lat})
            heapq.heappush(heap, (s + lat - 300, seq, "recv", q, len(msgs) - 1))
            seq += 1
            nxt = t + max(20_000, int(rng.expovariate(1 / interval) * 1e9))
            heapq.heappush(heap, (nxt, seq, "send", p, None))
            seq += 1
        else:
            m = msgs[pay]
            r = max(t + 300, m["send_g"] + m["lat_ns"])
            m["recv_g"] = r
            ev[p] += [(t, "enter", "MPI_Recv"), (r, "recv", (m["from"], m["tag"], pay)), (r + 300, "leave", "MPI_Recv")]
            busy[p] = r + 300 + gap
    # compute regions between the MPI calls, a main region around all
    out = []
    for p in range(procs):
        e = [(start, "enter", "main")]
        last = start
        for x in ev[p]:
            if x[1] == "enter":
                if x[0] - last > 400:
                    e += [(last + 100, "enter", "compute"), (x[0] - 100, "leave", "compute")]
            e.append(x)
            last = x[0]
        e.append((end, "leave", "main"))
        for a, b in zip(e, e[1:]):
            assert b[0] > a[0], (p, a, b)
        out.append(e)
    return out, msgs, start, end



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-out", required=True)
    ap.add_argument("-procs", type=int, default=4)
    ap.add_argument("-seconds", type=float, default=20)
    ap.add_argument("-interval-ms", type=float, default=5)
    ap.add_argument("-steps", type=int, default=2, help="drift steps per clock")
    ap.add_argument("-wander-ppm", type=float, default=0.05, help="rate random walk, ppm per sqrt(s)")
    ap.add_argument("-sync-stddev-ns", type=float, default=1000, help="error of Score-P's offset measurements")
    ap.add_argument("-threads", type=int, default=0, help="extra thread locations per process (same clock, no messages)")
    ap.add_argument("-seed", type=int, default=1)
    a = ap.parse_args()
    if a.procs < 2:
        sys.exit("need at least 2 procs")
    rng = random.Random(a.seed)
    clocks = [Clock(rng, p == 0, a.seconds, a.steps, a.wander_ppm) for p in range(a.procs)]
    events, msgs, start, end = simulate(rng, a.procs, a.seconds, a.interval_ms / 1e3)

    os.makedirs(a.out, exist_ok=True)
    for x in ("traces.otf2", "traces"):
        if os.path.exists(os.path.join(a.out, x)):
            sys.exit("%s already exists: OTF2 does not overwrite archives" % os.path.join(a.out, x))
    truth = {"procs": a.procs, "seed": a.seed, "reference": 0, "locations": [], "messages": msgs}
    with otf2.writer.open(a.out, timer_resolution=1_000_000_000) as w:
        root = w.definitions.system_tree_node("cluster")
        regions = {}
        for name in ("main", "compute", "MPI_Send", "MPI_Recv"):
            mpi = name.startswith("MPI_")
            regions[name] = w.definitions.region(name, region_role=RegionRole.POINT2POINT if mpi else RegionRole.FUNCTION,
                                                 paradigm=Paradigm.MPI if mpi else Paradigm.USER)
        locs, lgs = [], []
        for p in range(a.procs):
            node = w.definitions.system_tree_node("node %d" % p, parent=root)
            lg = w.definitions.location_group("MPI Rank %d" % p, location_group_type=LocationGroupType.PROCESS,
                                              system_tree_parent=node)
            lgs.append(lg)
            locs.append(w.definitions.location("Master thread", type=LocationType.CPU_THREAD, group=lg))
        w.definitions.group("MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS,
                            paradigm=Paradigm.MPI, members=locs)
        wg = w.definitions.group("MPI_COMM_WORLD group", group_type=GroupType.COMM_GROUP,
                                 paradigm=Paradigm.MPI, members=list(range(a.procs)))
        world = w.definitions.comm("MPI_COMM_WORLD", group=wg)
        if a.threads:
            regions["omp_work"] = w.definitions.region("omp_work", paradigm=Paradigm.OPENMP)
        thread_locs = [[w.definitions.location("OpenMP thread %d" % (k + 1), type=LocationType.CPU_THREAD, group=lgs[p])
                        for k in range(a.threads)] for p in range(a.procs)]
        offsets_of = []
        for p in range(a.procs):
            ck = clocks[p]
            ew = w.event_writer_from_location(locs[p])
            glob, local = [], []
            for idx, (g, kind, arg) in enumerate(events[p]):
                t = ck.local(g)
                glob.append(g)
                local.append(t)
                if kind == "enter":
                    ew.enter(t, regions[arg])
                elif kind == "leave":
                    ew.leave(t, regions[arg])
                elif kind == "send":
                    q, tag, mi = arg
                    msgs[mi]["send_idx"] = idx
                    ew.mpi_send(t, q, world, tag, 64)
                else:
                    s, tag, mi = arg
                    msgs[mi]["recv_idx"] = idx
                    ew.mpi_recv(t, s, world, tag, 64)
            # CLOCK_OFFSET as Score-P writes it: at init (before the first
            # event) and at finalize (after the last), local time, offset
            # master - local measured with an error, its stddev
            meas = []
            for g in (start - 500_000, end + 500_000):
                t = ck.local(g)
                err = 0 if p == 0 else round(rng.gauss(0, a.sync_stddev_ns))
                off = g - t + err
                _otf2.DefWriter_WriteClockOffset(ew._def_handle, t, off, 0.0 if p == 0 else a.sync_stddev_ns)
                meas.append({"local": t, "offset": off, "true_offset": g - t})
            offsets_of.append(meas)
            truth["locations"].append({
                "rank": p, "global_ns": glob, "local_ns": local,
                "clock": {"offset0_s": ck.o0, "drift0": ck.d0, "steps": ck.steps},
                "clock_offsets": meas,
            })
        # threads (no messages): the process's clock and clock offsets,
        # work regions at irregular intervals; after all the ranks' master
        # threads, so that a rank is its master thread's location index
        for p in range(a.procs):
            ck = clocks[p]
            for k in range(a.threads):
                ew = w.event_writer_from_location(thread_locs[p][k])
                glob, local = [], []
                g = start + 10_000
                while g < end - 1_000_000:
                    d = int(rng.uniform(50_000, 2_000_000))
                    for x, kind in ((g, "enter"), (g + d, "leave")):
                        t = ck.local(x)
                        glob.append(x)
                        local.append(t)
                        (ew.enter if kind == "enter" else ew.leave)(t, regions["omp_work"])
                    g += d + int(rng.uniform(10_000, 1_000_000))
                for m in offsets_of[p]:
                    _otf2.DefWriter_WriteClockOffset(ew._def_handle, m["local"], m["offset"], 0.0 if p == 0 else a.sync_stddev_ns)
                truth["locations"].append({
                    "rank": p, "thread": k + 1, "global_ns": glob, "local_ns": local,
                    "clock_offsets": offsets_of[p],
                })
    missing = [i for i, m in enumerate(msgs) if "recv_idx" not in m or "send_idx" not in m]
    assert not missing, "messages without both ends: %s" % missing[:5]
    with open(os.path.join(a.out, "truth.json"), "w") as f:
        json.dump(truth, f)
    n = sum(len(e) for e in events)
    print("wrote %s/traces.otf2: %d locations, %d events, %d messages" % (a.out, a.procs, n, len(msgs)))


if __name__ == "__main__":
    main()
