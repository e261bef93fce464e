package foreign

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gclock/gclock/trace/otf2/archive"
)

// OTF2 enumeration values this file reads.
const (
	groupCommLocations = 4 // OTF2_GROUP_TYPE_COMM_LOCATIONS
	groupCommGroup     = 5 // OTF2_GROUP_TYPE_COMM_GROUP
	groupCommSelf      = 6 // OTF2_GROUP_TYPE_COMM_SELF
	mappingComm        = 6 // OTF2_MAPPING_COMM
)

// Archive is a foreign OTF2 archive held in memory with its model.
type Archive struct {
	Path       string
	A          *archive.Archive
	Trace      *Trace
	LocIDs     []uint64 // the OTF2 location id of each model location
	Groups     []string // each location's location group's name ("MPI Rank 3")
	Nodes      []string // each location's system tree node's name (its host)
	Resolution uint64   // timer ticks per second (ClockProperties)
	Unmatched  int      // message ends without their other end
	events     [][]archive.Record
	localDefs  [][]archive.Record
}

// ErrArchive wraps what is wrong with an archive's content (as opposed to
// its encoding, which archive.FormatError reports).
var ErrArchive = errors.New("otf2 archive")

// ReadArchive reads the anchor file path (DIR/NAME.otf2), every location's
// local definitions and events, and builds the model: the local timestamps,
// the CLOCK_OFFSET records, and the messages matched per sender, receiver,
// communicator and tag in order (MPI's non-overtaking rule), MpiSend or
// MpiIsend to MpiRecv or MpiIrecv. It holds the whole trace in memory.
func ReadArchive(path string) (*Archive, error) {
	a, err := archive.Open(path)
	if err != nil {
		return nil, err
	}
	ar := &Archive{Path: path, A: a, Trace: &Trace{}}
	strs := map[uint64]string{}
	groupName := map[uint64]string{}
	groupNode := map[uint64]uint64{}
	nodeName := map[uint64]string{}
	type group struct {
		typ, paradigm uint64
		members       []uint64
	}
	groups := map[uint64]group{}
	commGroup := map[uint64]uint64{}
	locIdx := map[uint64]int{}
	var locGroup []uint64
	var locEvents []uint64
	haveProps := false
	for i := range a.Global {
		r := &a.Global[i]
		switch r.Name() {
		case "String":
			v, _ := r.Field("string")
			strs[r.Uint("self")] = v.S
		case "ClockProperties":
			ar.Resolution, haveProps = r.Uint("timerResolution"), true
		case "SystemTreeNode":
			nodeName[r.Uint("self")] = strs[r.Uint("name")]
		case "LocationGroup":
			groupName[r.Uint("self")] = strs[r.Uint("name")]
			groupNode[r.Uint("self")] = r.Uint("systemTreeParent")
		case "Location":
			locIdx[r.Uint("self")] = len(ar.LocIDs)
			ar.LocIDs = append(ar.LocIDs, r.Uint("self"))
			ar.Trace.Locs = append(ar.Trace.Locs, Location{Name: strs[r.Uint("name")]})
			locGroup = append(locGroup, r.Uint("locationGroup"))
			locEvents = append(locEvents, r.Uint("numberOfEvents"))
		case "Group":
			g := group{typ: r.Uint("groupType"), paradigm: r.Uint("paradigm")}
			v, _ := r.Field("numberOfMembers")
			for _, row := range v.Rows {
				if len(row) > 0 {
					g.members = append(g.members, row[0].U)
				}
			}
			groups[r.Uint("self")] = g
		case "Comm":
			commGroup[r.Uint("self")] = r.Uint("group")
		}
	}
	if !haveProps {
		return nil, fmt.Errorf("%s: %w: no ClockProperties in the global definitions", path, ErrArchive)
	}
	if ar.Resolution == 0 {
		return nil, fmt.Errorf("%s: %w: ClockProperties timerResolution 0", path, ErrArchive)
	}
	if len(ar.LocIDs) == 0 {
		return nil, fmt.Errorf("%s: %w: no Location definitions", path, ErrArchive)
	}
	for i := range ar.LocIDs {
		ar.Groups = append(ar.Groups, groupName[locGroup[i]])
		ar.Nodes = append(ar.Nodes, nodeName[groupNode[locGroup[i]]])
		ar.Trace.Locs[i].Name = ar.Groups[i] + "/" + ar.Trace.Locs[i].Name
	}
	// rank -> location index, per global communicator id
	commLocs := map[uint64][]int{}
	locsOf := func(g group) []int {
		var out []int
		for _, m := range g.members {
			if j, ok := locIdx[m]; ok {
				out = append(out, j)
			} else {
				out = append(out, -1)
			}
		}
		return out
	}
	for c, gid := range commGroup {
		g, ok := groups[gid]
		if !ok {
			continue
		}
		switch g.typ {
		case groupCommLocations:
			commLocs[c] = locsOf(g)
		case groupCommGroup:
			for _, h := range groups {
				if h.typ == groupCommLocations && h.paradigm == g.paradigm {
					all := locsOf(h)
					var ranks []int
					for _, m := range g.members {
						if m < uint64(len(all)) {
							ranks = append(ranks, all[m])
						} else {
							ranks = append(ranks, -1)
						}
					}
					commLocs[c] = ranks
					break
				}
			}
		case groupCommSelf:
			commLocs[c] = nil // rank 0 is the location itself
		}
	}
	type key struct {
		from, to  int
		comm, tag uint64
	}
	sends, recvs := map[key][]int{}, map[key][]int{}
	n := len(ar.LocIDs)
	ar.events = make([][]archive.Record, n)
	ar.localDefs = make([][]archive.Record, n)
	for i, id := range ar.LocIDs {
		loc := &ar.Trace.Locs[i]
		where := fmt.Sprintf("%s: location %d (%s)", path, id, loc.Name)
		defs, err := a.LocalDefs(id)
		if err != nil {
			return nil, fmt.Errorf("%s: local definitions: %w", where, err)
		}
		ar.localDefs[i] = defs
		commMap := map[uint64]uint64{}
		for j := range defs {
			r := &defs[j]
			switch r.Name() {
			case "ClockOffset":
				t := r.Uint("time")
				if t > math.MaxInt64 {
					return nil, fmt.Errorf("%s: %w: clock offset at %d beyond int64", where, ErrArchive, t)
				}
				v, _ := r.Field("standardDeviation")
				loc.Offsets = append(loc.Offsets, OffsetRecord{Local: int64(t), Offset: int64(r.Uint("offset")), StdDev: v.Float()})
			case "MappingTable":
				if r.Uint("mappingType") == mappingComm {
					v, _ := r.Field("idMap")
					if m := v.Map; m != nil {
						if m.Mode == 0 {
							for l, g := range m.Items {
								commMap[uint64(l)] = g
							}
						} else {
							for k := 0; k+1 < len(m.Items); k += 2 {
								commMap[m.Items[k]] = m.Items[k+1]
							}
						}
					}
				}
			}
		}
		if locEvents[i] > 0 {
			if _, err := os.Stat(a.EventsPath(id)); err != nil {
				return nil, fmt.Errorf("%s: %w: its Location definition counts %d events but its event file is missing: %v", where, ErrArchive, locEvents[i], err)
			}
		}
		var prev uint64
		err = a.EachEvent(id, func(r *archive.Record) error {
			e := len(loc.Times)
			if r.Time > math.MaxInt64 {
				return fmt.Errorf("%w: event %d (%s) at %d beyond int64", ErrArchive, e, r.Name(), r.Time)
			}
			if r.Time < prev {
				return fmt.Errorf("%w: event %d (%s) at %d before the one before it at %d", ErrArchive, e, r.Name(), r.Time, prev)
			}
			prev = r.Time
			loc.Times = append(loc.Times, int64(r.Time))
			ar.events[i] = append(ar.events[i], *r)
			var peerField string
			isSend := false
			switch r.Name() {
			case "MpiSend", "MpiIsend":
				peerField, isSend = "receiver", true
			case "MpiRecv", "MpiIrecv":
				peerField = "sender"
			default:
				return nil
			}
			comm := r.Uint("communicator")
			if g, ok := commMap[comm]; ok {
				comm = g
			}
			ranks, ok := commLocs[comm]
			if !ok {
				return fmt.Errorf("%w: event %d (%s): communicator %d is not defined", ErrArchive, e, r.Name(), comm)
			}
			rank := r.Uint(peerField)
			peer := i
			if ranks != nil {
				if rank >= uint64(len(ranks)) || ranks[rank] < 0 {
					return fmt.Errorf("%w: event %d (%s): rank %d not in communicator %d", ErrArchive, e, r.Name(), rank, comm)
				}
				peer = ranks[rank]
			}
			if isSend {
				k := key{i, peer, comm, r.Uint("msgTag")}
				sends[k] = append(sends[k], e)
			} else {
				k := key{peer, i, comm, r.Uint("msgTag")}
				recvs[k] = append(recvs[k], e)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: events: %w", where, err)
		}
		if uint64(len(loc.Times)) != locEvents[i] && locEvents[i] != 0 {
			return nil, fmt.Errorf("%s: %w: %d events read, its Location definition counts %d (truncated?)", where, ErrArchive, len(loc.Times), locEvents[i])
		}
	}
	for k, s := range sends {
		r := recvs[k]
		m := min(len(s), len(r))
		for j := range m {
			ar.Trace.Msgs = append(ar.Trace.Msgs, Message{From: k.from, To: k.to, Send: s[j], Recv: r[j]})
		}
		ar.Unmatched += len(s) - m
	}
	for k, r := range recvs {
		ar.Unmatched += max(len(r)-len(sends[k]), 0)
	}
	sortMessages(ar.Trace.Msgs)
	// The locations of one location group (a process's threads) read one
	// clock: those without messages share the refinement of the first
	// one with messages.
	hasMsg := make([]bool, n)
	for _, m := range ar.Trace.Msgs {
		hasMsg[m.From], hasMsg[m.To] = true, true
	}
	donor := map[uint64]int{}
	for i := range n {
		if _, ok := donor[locGroup[i]]; !ok && hasMsg[i] {
			donor[locGroup[i]] = i
		}
	}
	ar.Trace.ClockOf = make([]int, n)
	for i := range n {
		ar.Trace.ClockOf[i] = -1
		if j, ok := donor[locGroup[i]]; ok && !hasMsg[i] {
			ar.Trace.ClockOf[i] = j
		}
	}
	return ar, nil
}

// WriteReport says what Write wrote.
type WriteReport struct {
	Events       int
	ClockOffsets int
	Start, End   int64 // the corrected archive's first and last time
}

// Write writes the corrected archive as dir/name.otf2: every record as
// read, event times replaced by res.Global (and an event's other
// timestamps, such as BufferFlush's stopTime, mapped), each CLOCK_OFFSET
// moved to its corrected time with offset 0 (an OTF2 reader's
// interpolation is then the identity), ClockProperties' globalOffset and
// traceLength set to the corrected span (realtimeTimestamp moved with it).
func (ar *Archive) Write(dir, name string, res *Result) (WriteReport, error) {
	var rep WriteReport
	if len(res.Global) != len(ar.LocIDs) {
		return rep, fmt.Errorf("write %s: %d corrected locations for %d in the archive", dir, len(res.Global), len(ar.LocIDs))
	}
	if abs, err := filepath.Abs(dir); err == nil {
		if src, err := filepath.Abs(ar.A.Dir); err == nil && abs == src && name == ar.A.Name {
			return rep, fmt.Errorf("write %s: would overwrite the archive being corrected", filepath.Join(dir, name+".otf2"))
		}
	}
	rep.Start, rep.End = math.MaxInt64, math.MinInt64
	for _, g := range res.Global {
		if len(g) > 0 {
			rep.Start, rep.End = min(rep.Start, g[0]), max(rep.End, g[len(g)-1])
		}
	}
	if rep.Start > rep.End || rep.Start < 0 {
		return rep, fmt.Errorf("write %s: corrected times %d .. %d: none, or before the clock's zero", dir, rep.Start, rep.End)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rep, err
	}
	desc := ar.A.Description
	if desc != "" {
		desc += "; "
	}
	desc += "timestamps corrected to global time by gclock trace correct"
	w, err := archive.Create(dir, name, archive.Options{
		ChunkSizeEvents: ar.A.ChunkSizeEvents, ChunkSizeDefs: ar.A.ChunkSizeDefs,
		Machine: ar.A.Machine, Creator: ar.A.Creator, Description: desc, Version: ar.A.Version,
	})
	if err != nil {
		return rep, err
	}
	for _, p := range ar.A.Properties {
		w.SetProperty(p.Name, p.Value)
	}
	fail := func(err error) (WriteReport, error) {
		w.Abort()
		return rep, fmt.Errorf("write %s: %w", filepath.Join(dir, name+".otf2"), err)
	}
	for i := range ar.A.Global {
		r := ar.A.Global[i]
		if r.Name() == "ClockProperties" {
			r.Fields = append([]archive.Value(nil), r.Fields...)
			old := r.Uint("globalOffset")
			if err := r.Set("globalOffset", archive.U(uint64(rep.Start))); err != nil {
				return fail(err)
			}
			if err := r.Set("traceLength", archive.U(uint64(rep.End-rep.Start))); err != nil {
				return fail(err)
			}
			if v, ok := r.Field("realtimeTimestamp"); ok && v.U != math.MaxUint64 && v.U != 0 {
				// the realtime of the new globalOffset: shift by the
				// change of globalOffset, ticks to ns
				d := (float64(rep.Start) - float64(old)) * 1e9 / float64(ar.Resolution)
				_ = r.Set("realtimeTimestamp", archive.U(uint64(int64(v.U)+int64(math.Round(d)))))
			}
		}
		if err := w.Global(&r); err != nil {
			return fail(err)
		}
	}
	for i, id := range ar.LocIDs {
		w.TouchLocalDefs(id)
		for j := range ar.localDefs[i] {
			r := ar.localDefs[i][j]
			if r.Name() == "ClockOffset" {
				r.Fields = append([]archive.Value(nil), r.Fields...)
				t := res.Map(i, int64(r.Uint("time")))
				if t < 0 {
					return fail(fmt.Errorf("location %d: clock offset maps to %d, before the clock's zero", id, t))
				}
				if err := r.Set("time", archive.U(uint64(t))); err != nil {
					return fail(err)
				}
				if err := r.Set("offset", archive.I(0)); err != nil {
					return fail(err)
				}
				rep.ClockOffsets++
			}
			if err := w.LocalDef(id, &r); err != nil {
				return fail(err)
			}
		}
		for e := range ar.events[i] {
			r := ar.events[i][e]
			r.Time = uint64(res.Global[i][e])
			if r.Spec != nil {
				copied := false
				for f, spec := range r.Spec.Fields {
					if spec.Type == archive.Timestamp && f < len(r.Fields) {
						if !copied {
							r.Fields = append([]archive.Value(nil), r.Fields...)
							copied = true
						}
						r.Fields[f] = archive.U(uint64(max(res.Map(i, int64(r.Fields[f].U)), 0)))
					}
				}
			}
			if err := w.Event(id, &r); err != nil {
				return fail(err)
			}
			rep.Events++
		}
		if err := w.FinishEvents(id); err != nil {
			return fail(err)
		}
	}
	if err := w.Close(); err != nil {
		return rep, fmt.Errorf("write %s: %w", filepath.Join(dir, name+".otf2"), err)
	}
	return rep, nil
}

// LocationName names model location i for messages: its OTF2 id, name and
// location group.
func (ar *Archive) LocationName(i int) string {
	return strconv.FormatUint(ar.LocIDs[i], 10) + " " + strconv.Quote(ar.Trace.Locs[i].Name) + " (" + ar.Groups[i] + ")"
}
