"""Writes an OTF2 archive with libotf2 (through its Python binding, _otf2)
and prints, as JSON, every record it wrote: the ground truth for the Go
reader. Records use the field names of OTF2's record specification.

    /usr/bin/python3 libotf2_write.py DIR EVENTS_PER_LOCATION > expected.json
"""
import json
import struct
import sys

import _otf2

out_dir, n = sys.argv[1], int(sys.argv[2])
records = []


def dbl(x):
    return {"f": struct.unpack("<Q", struct.pack("<d", x))[0]}


def plain(v):
    if isinstance(v, dict):
        return v
    if isinstance(v, float):
        return dbl(v)
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, str):
        return {"s": v}
    return int(v)


def rec(cls, loc, name, t, fields, attrs=()):
    records.append({"c": cls, "loc": loc, "name": name, "t": t,
                    "f": {k: plain(v) for k, v in fields.items()},
                    "a": [[a, ty, v] for a, ty, v in attrs]})


def av(raw):
    v = _otf2.AttributeValue()
    v._arg_value = raw
    return v


a = _otf2.Archive_Open(out_dir, "traces", _otf2.FILEMODE_WRITE, 256 * 1024, 256 * 1024,
                       _otf2.SUBSTRATE_POSIX, _otf2.COMPRESSION_NONE)
flush = _otf2.FlushCallbacks(pre_flush=lambda *args: _otf2.FLUSH, post_flush=None)
_otf2.Archive_SetFlushCallbacks(a, flush, None)
_otf2.Archive_SetSerialCollectiveCallbacks(a)
_otf2.Archive_SetCreator(a, "libotf2 test ✓")
_otf2.Archive_SetDescription(a, "written by libotf2 for gclock's reader")
_otf2.Archive_SetProperty(a, "GCLOCK::ZETA", "zeit ✓ 時間", False)
_otf2.Archive_SetProperty(a, "GCLOCK::ALPHA", "1", False)
_otf2.Archive_OpenEvtFiles(a)

LOCS = [0, 1, 2**64 - 2]
T0 = 1_700_000_000_123_456_789
BIG = 2**64 - 2
al = _otf2.AttributeList_New()

# Attributes: 0 uint64, 1 int64, 2 double, 3 string ref, 4 uint8, 5 location.
ATTRS = [(0, 4), (1, 8), (2, 10), (3, 11), (4, 1), (5, 13)]


def with_attrs(i):
    out = []
    if i % 3 == 0:
        _otf2.AttributeList_AddUint64(al, 0, BIG - i)
        out.append((0, 4, BIG - i))
        _otf2.AttributeList_AddInt64(al, 1, -i - 1)
        out.append((1, 8, (-i - 1) % 2**64))
    if i % 5 == 0:
        _otf2.AttributeList_AddDouble(al, 2, 0.5 + i)
        out.append((2, 10, struct.unpack("<Q", struct.pack("<d", 0.5 + i))[0]))
        _otf2.AttributeList_AddStringRef(al, 3, 2)
        out.append((3, 11, 2))
        _otf2.AttributeList_AddUint8(al, 4, i % 256)
        out.append((4, 1, i % 256))
        _otf2.AttributeList_AddLocationRef(al, 5, BIG)
        out.append((5, 13, BIG))
    return out


for li, loc in enumerate(LOCS):
    w = _otf2.Archive_GetEvtWriter(a, loc)
    t = T0 + li

    def ev(name, fields, attrs=(), step=1):
        global t
        getattr(_otf2, "EvtWriter_" + name)(w, al, t, **fields)
        rec("e", loc, name, t, dict(fields), attrs)
        t += step

    def ev_arr(name, call, fields, attrs=()):
        global t
        call(t)
        rec("e", loc, name, t, fields, attrs)
        t += 1

    ev_arr("ProgramBegin", lambda t: _otf2.EvtWriter_ProgramBegin(w, al, t, 5, [6, 7]),
           {"programName": 5, "numberOfArguments": [[6], [7]]})
    ev("MeasurementOnOff", {"measurementMode": 1})
    ev("Enter", {"region": 0}, with_attrs(0))
    ev("MpiSend", {"receiver": 1, "communicator": 0, "msgTag": 42, "msgLength": BIG})
    ev("MpiRecv", {"sender": 2, "communicator": 0, "msgTag": 2**32 - 2, "msgLength": 0})
    ev("MpiIsend", {"receiver": 1, "communicator": 0, "msgTag": 7, "msgLength": 1024, "requestID": BIG})
    ev("MpiIsendComplete", {"requestID": BIG})
    ev("MpiIrecvRequest", {"requestID": 2**64 - 1})
    ev("MpiIrecv", {"sender": 0, "communicator": 0, "msgTag": 7, "msgLength": 1024, "requestID": 2**64 - 1})
    ev("MpiRequestTest", {"requestID": 3})
    ev("MpiRequestCancelled", {"requestID": 4})
    ev("MpiCollectiveBegin", {})
    ev("MpiCollectiveEnd", {"collectiveOp": 11, "communicator": 0, "root": 2**32 - 1, "sizeSent": 8, "sizeReceived": 16})
    ev("NonBlockingCollectiveRequest", {"requestID": 99})
    ev("NonBlockingCollectiveComplete", {"collectiveOp": 1, "communicator": 0, "root": 0, "sizeSent": 1, "sizeReceived": 2, "requestID": 99})
    ev_arr("Metric", lambda t: _otf2.EvtWriter_Metric(w, al, t, 0, [_otf2.TYPE_INT64, _otf2.TYPE_DOUBLE],
                                                     [_otf2.MetricValue(signed_int=-5), _otf2.MetricValue(floating_point=2.25)]),
           {"metric": 0, "numberOfMetrics": [[8, (-5) % 2**64], [10, dbl(2.25)]]})
    ev("ParameterString", {"parameter": 0, "string": 2})
    ev("ParameterInt", {"parameter": 0, "value": -(2**63)})
    ev("ParameterUnsignedInt", {"parameter": 0, "value": 2**64 - 1})
    ev("RmaWinCreate", {"win": 0})
    ev("RmaPut", {"win": 0, "remote": 1, "bytes": 64, "matchingId": 1})
    ev("RmaGet", {"win": 0, "remote": 1, "bytes": 64, "matchingId": 2})
    ev("RmaOpCompleteBlocking", {"win": 0, "matchingId": 1})
    ev("RmaWinDestroy", {"win": 0})
    ev("ThreadFork", {"model": 3, "numberOfRequestedThreads": 4})
    ev("ThreadJoin", {"model": 3})
    ev("ThreadTeamBegin", {"threadTeam": 0})
    ev("ThreadTeamEnd", {"threadTeam": 0})
    ev("CallingContextEnter", {"callingContext": 0, "unwindDistance": 1})
    ev("CallingContextSample", {"callingContext": 0, "unwindDistance": 2, "interruptGenerator": 0})
    ev("CallingContextLeave", {"callingContext": 0})
    ev("CommCreate", {"communicator": 0})
    ev("BufferFlush", {"stopTime": t + 5})
    # Many events, so that the file spans several chunks; some at equal times.
    for i in range(n):
        ev("Enter", {"region": 1}, with_attrs(i), step=i % 2)
        ev("MpiIsend", {"receiver": i % 3, "communicator": 0, "msgTag": i, "msgLength": i * 8, "requestID": BIG - i})
        ev("Leave", {"region": 1}, step=3)
    ev("Leave", {"region": 0})
    ev("ProgramEnd", {"exitStatus": -1})
    _otf2.Archive_CloseEvtWriter(a, w)
_otf2.Archive_CloseEvtFiles(a)

_otf2.Archive_OpenDefFiles(a)
for li, loc in enumerate(LOCS):
    dw = _otf2.Archive_GetDefWriter(a, loc)
    for k, (tt, off, sd) in enumerate([(T0, -1234, 0.5), (T0 + 10**9, 2**40, 1e-3)]):
        _otf2.DefWriter_WriteClockOffset(dw, tt + li, off, sd)
        rec("l", loc, "ClockOffset", 0, {"time": tt + li, "offset": off % 2**64, "standardDeviation": sd})
    m = _otf2.IdMap_Create(_otf2.ID_MAP_DENSE, 4)
    for i in range(3):
        _otf2.IdMap_AddIdPair(m, i, i)
    _otf2.DefWriter_WriteMappingTable(dw, _otf2.MAPPING_METRIC, m)
    rec("l", loc, "MappingTable", 0, {"mappingType": 5, "idMap": {"m": [0, [0, 1, 2]]}})
    _otf2.Archive_CloseDefWriter(a, dw)
_otf2.Archive_CloseDefFiles(a)

g = _otf2.Archive_GetGlobalDefWriter(a)


def gd(_rec, **fields):
    getattr(_otf2, "GlobalDefWriter_Write" + _rec)(g, **fields)
    rec("g", 0, _rec, 0, fields)


STRINGS = ["", "main", "héllo wörld ✓ 時間 🕐", "MPI", "node", "rank", "prog", "-v", "MPI_Isend", "x" * 300]
for i, s in enumerate(STRINGS):
    gd("String", self=i, string=s)
gd("ClockProperties", timerResolution=10**9, globalOffset=T0, traceLength=3 * n + 100, realtimeTimestamp=T0 - 5)
gd("Paradigm", paradigm=4, name=3, paradigmClass=0)
_otf2.GlobalDefWriter_WriteParadigmProperty(g, 4, 0, _otf2.TYPE_STRING, av(1))
rec("g", 0, "ParadigmProperty", 0, {"paradigm": 4, "property": 0, "type": 11, "value": 1})
gd("SystemTreeNode", self=0, name=4, className=4, parent=2**32 - 1)
gd("SystemTreeNode", self=1, name=2, className=4, parent=0)
for node, ty, raw in [(1, 11, 2), (1, 4, BIG), (0, 10, struct.unpack("<Q", struct.pack("<d", -1.5))[0])]:
    _otf2.GlobalDefWriter_WriteSystemTreeNodeProperty(g, node, 5, ty, av(raw))
    rec("g", 0, "SystemTreeNodeProperty", 0, {"systemTreeNode": node, "name": 5, "type": ty, "value": raw})
gd("SystemTreeNodeDomain", systemTreeNode=1, systemTreeDomain=2)
for li, loc in enumerate(LOCS):
    gd("LocationGroup", self=li, name=5, locationGroupType=1, systemTreeParent=1, creatingLocationGroup=2**32 - 1)
_otf2.GlobalDefWriter_WriteLocationGroupProperty(g, 0, 5, _otf2.TYPE_UINT8, av(3))
rec("g", 0, "LocationGroupProperty", 0, {"locationGroup": 0, "name": 5, "type": 1, "value": 3})
for li, loc in enumerate(LOCS):
    gd("Location", self=loc, name=2, locationType=1, numberOfEvents=3 * n + 36, locationGroup=li)
_otf2.GlobalDefWriter_WriteLocationProperty(g, BIG, 5, _otf2.TYPE_INT64, av(2**64 - 7))
rec("g", 0, "LocationProperty", 0, {"location": BIG, "name": 5, "type": 8, "value": 2**64 - 7})
gd("Region", self=0, name=1, canonicalName=1, description=0, regionRole=1, paradigm=1, regionFlags=0, sourceFile=6, beginLineNumber=1, endLineNumber=2**32 - 2)
gd("Region", self=1, name=8, canonicalName=8, description=2, regionRole=28, paradigm=4, regionFlags=0, sourceFile=2**32 - 1, beginLineNumber=0, endLineNumber=0)
gd("Region", self=2, name=8, canonicalName=8, description=0, regionRole=15, paradigm=4, regionFlags=0, sourceFile=0, beginLineNumber=0, endLineNumber=0)
for aid, ty in ATTRS:
    gd("Attribute", self=aid, name=2, description=9, type=ty)
gd("Group", self=0, name=5, groupType=4, paradigm=4, groupFlags=0, members=LOCS)
gd("Group", self=1, name=5, groupType=5, paradigm=4, groupFlags=0, members=[0, 1, 2])
gd("Group", self=2, name=5, groupType=2, paradigm=0, groupFlags=0, members=[0, 1])
gd("Comm", self=0, name=3, group=1, parent=2**32 - 1, flags=0)
gd("MetricMember", self=0, name=5, description=2, metricType=4, metricMode=5, valueType=8, base=1, exponent=-3, unit=0)
gd("MetricMember", self=1, name=2, description=0, metricType=4, metricMode=0, valueType=10, base=0, exponent=0, unit=0)
gd("MetricClass", self=0, metricMembers=[0, 1], metricOccurrence=0, recorderKind=0)
gd("MetricInstance", self=1, metricClass=0, recorder=0, metricScope=0, scope=1)
gd("MetricClassRecorder", metric=0, recorder=BIG)
gd("RmaWin", self=0, name=3, comm=0, flags=0)
gd("Parameter", self=0, name=5, parameterType=1)
gd("SourceCodeLocation", self=0, file=6, lineNumber=77)
gd("CallingContext", self=0, region=0, sourceCodeLocation=0, parent=2**32 - 1)
_otf2.GlobalDefWriter_WriteCallingContextProperty(g, 0, 5, _otf2.TYPE_UINT32, av(12))
rec("g", 0, "CallingContextProperty", 0, {"callingContext": 0, "name": 5, "type": 3, "value": 12})
gd("InterruptGenerator", self=0, name=5, interruptGeneratorMode=0, base=1, exponent=-9, period=1000)
gd("Callpath", self=0, parent=2**32 - 1, region=0)
gd("CartDimension", self=0, name=5, size=4, cartPeriodicity=1)
gd("CartTopology", self=0, name=5, communicator=0, cartDimensions=[0])
gd("CartCoordinate", cartTopology=0, rank=1, coordinates=[1])
gd("InterComm", self=1, name=3, groupA=1, groupB=1, commonCommunicator=0, flags=0)

# Array fields as the specification names them: count field -> rows.
ARRAYS = {"Group": ("numberOfMembers", ["members"]), "MetricClass": ("numberOfMetrics", ["metricMembers"]),
          "CartTopology": ("numberOfDimensions", ["cartDimensions"]), "CartCoordinate": ("numberOfDimensions", ["coordinates"])}
for r in records:
    if r["c"] == "g" and r["name"] in ARRAYS:
        count, members = ARRAYS[r["name"]]
        cols = [r["f"].pop(m) for m in members]
        r["f"][count] = [list(x) for x in zip(*cols)]
_otf2.Archive_CloseGlobalDefWriter(a, g)
_otf2.Archive_Close(a)
json.dump(records, sys.stdout)
