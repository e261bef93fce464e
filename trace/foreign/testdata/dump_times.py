#!/usr/bin/python3
"""Print, as JSON, what python3-otf2's reader (libotf2) sees in an archive:
per location id its event timestamps (clock offsets applied, as every
OTF2 reader applies them), the ClockProperties and the count of events
per record type. usage: dump_times.py ARCHIVE.otf2"""
import json
import sys

import otf2

with otf2.reader.open(sys.argv[1]) as r:
    times, kinds = {}, {}
    for loc, ev in r.events:
        times.setdefault(str(loc._ref), []).append(ev.time)
        k = type(ev).__name__
        kinds[k] = kinds.get(k, 0) + 1
    cp = r.definitions.clock_properties
    json.dump({"times": times, "kinds": kinds,
               "clock": {"resolution": cp.timer_resolution, "offset": cp.global_offset, "length": cp.trace_length}},
              sys.stdout)
