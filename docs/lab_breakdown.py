#!/usr/bin/env python3
"""Per-exchange breakdown of a `gclock lab --clocks raw --measurements --frame-log F` run:
every logged exchange's stamps against the switch's record of the frames that carried it
(docs/lab.md, "Where the error under load came from").
usage: lab_breakdown.py FRAMELOG MEASDIR [hosts]   (MEASDIR holds measurements-h<i>.csv)"""
import sys, bisect, csv, statistics as st
fl, md = sys.argv[1], sys.argv[2]
hosts = int(sys.argv[3]) if len(sys.argv) > 3 else 4
with open(fl) as f:
    head = f.readline().split()
    # "# wall_minus_raw_ns start N (+-E) end N (+-E)"; older logs named it realtime_minus_raw_ns
    if len(head) < 7 or head[1] not in ('wall_minus_raw_ns', 'realtime_minus_raw_ns'):
        sys.exit(f"{fl}: not a frame log (first line {' '.join(head)!r})")
    off = (int(head[3]) + int(head[6])) // 2
    rd = csv.DictReader(f)
    frames = {}
    for r in rd:
        op = int(r['op']) & 0x7f
        if op not in (1, 2): continue
        k = (int(r['in']), int(r['out']), op)
        frames.setdefault(k, []).append(tuple(int(r[c]) - off for c in ('rx_ns', 'at_ns', 'start_ns', 'end_ns')) + (int(r['seq']),))
for v in frames.values(): v.sort()
bysq = {}
for k, v in frames.items():
    for x in v: bysq.setdefault(k + (x[4],), []).append(x)
def near(k, t):
    v = frames.get(k, [])
    i = bisect.bisect_left(v, (t,))
    best = None
    for j in (i - 1, i):
        if 0 <= j < len(v) and (best is None or abs(v[j][0] - t) < abs(best[0] - t)):
            best = v[j]
    return best
FLOOR = 71100
rows = []
for h in range(1, hosts):
    try:
        rd = csv.DictReader(open(f"{md}/measurements-h{h}.csv"))
    except OSError: continue
    for r in rd:
        t1, t2, t3, t4 = (int(r[c]) for c in ('src_send_ns', 'loc_recv_ns', 'loc_send_ns', 'src_recv_ns'))
        q = near((h, 0, 2), t3)
        if q is None: continue
        reps = bysq.get((h, 0, 2, q[4]), [])
        probes = bysq.get((0, h, 1, q[4]), [])
        if not probes: continue
        p = min(probes, key=lambda x: abs(x[2] - t2))  # the copy whose delivery is nearest T2
        nprobe = len(probes)
        rows.append(dict(h=h, t1=t1, t2=t2, t3=t3, t4=t4,
            fwd=t2 - t1, rev=t4 - t3, dwell=t3 - t2, rtt=(t4 - t1) - (t3 - t2),
            # stamp errors against the switch's truth
            e1=t1 - p[0],          # T1 - switch arrival of the probe (should be <= 0, ~ -1us)
            e2=t2 - p[2],          # T2 - switch write start of the probe (>= 0)
            e3=t3 - q[0],          # T3 - switch arrival of the reply (<= 0)
            e4=t4 - q[2],          # T4 - switch write start of the reply (>= 0)
            mp=abs(p[0] - t1), mq=abs(q[0] - t3), n=nprobe, nr=len(reps),
            dp=p[1] - p[0], dq=q[1] - q[0], lp=p[2] - p[1], lq=q[2] - q[1]))
def q(v, f): v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))] if v else float('nan')
print(f"{len(rows)} exchanges; wall-raw offset {off}")
for k in ('fwd', 'rev', 'rtt', 'dwell', 'e1', 'e2', 'e3', 'e4', 'lp', 'lq'):
    v = [r[k] / 1000 for r in rows]
    print(f"{k:6s} min {min(v):9.1f} p1 {q(v,.01):9.1f} p50 {q(v,.5):9.1f} p99 {q(v,.99):9.1f} max {max(v):9.1f} us")
bad = [r for r in rows if r['fwd'] < FLOOR or r['rev'] < FLOOR or r['e1'] > 5000 or r['e3'] > 5000 or r['e2'] < -5000 or r['e4'] < -5000]
print(f"{len(bad)} suspicious exchanges (one-way below {FLOOR/1000} us or a stamp > 5 us outside the switch's truth):")
for r in bad:
    print(" h%d t1=%d fwd %.1f rev %.1f dwell %.1f rtt %.1f | e1 %.1f e2 %.1f e3 %.1f e4 %.1f | copies %d %d | model %.1f %.1f late %.1f %.1f" % (
        r['h'], r['t1'], r['fwd']/1e3, r['rev']/1e3, r['dwell']/1e3, r['rtt']/1e3, r['e1']/1e3, r['e2']/1e3, r['e3']/1e3, r['e4']/1e3, r['n'], r['nr'],
        r['dp']/1e3, r['dq']/1e3, r['lp']/1e3, r['lq']/1e3))
