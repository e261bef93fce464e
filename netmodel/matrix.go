package netmodel

// LinkClass is one row of the link matrix (issue 28): a delay shape that
// users' networks have, in the lab's link syntax (ParseLink), run by
// `gclock lab bench --profile links` on the lab and by `gclock sim matrix`
// in the simulator.
type LinkClass struct {
	Name string
	Link string // ParseLink syntax; the simulator's links.model
	// Floor: the delays have a sharp lower edge (a path that is sometimes
	// empty), where the fastest exchanges are the best information.
	Floor bool
	// What the class stands for.
	About string
}

// matrix is the link matrix, in the order the bench runs it. Every class's
// mean one-way delay is about 100 us, as on the lab's default link.
var matrix = []LinkClass{
	{"pareto", "pareto:100us:50us", true, "the lab's default: a floor and a heavy tail (a switch's queue)"},
	{"exponential", "exponential:100us:20us", true, "a floor and a light tail (a queue that is often empty)"},
	{"uniform", "uniform:100us:40us", true, "flat jitter with hard edges (a polling loop, a timer tick)"},
	{"normal3", "normal:100us:3us", false, "narrow bell-shaped jitter (a virtual NIC)"},
	{"normal10", "normal:100us:10us", false, "wide bell-shaped jitter (a busy hypervisor, interrupt moderation)"},
	{"bimodal", "bimodal:100us:20us", false, "two modes 40 us apart, each a bell (two paths, interrupt coalescing)"},
	// The same 100-us floor each way, one direction queueing more: an
	// exponential tail of 10 us out, a pareto tail of 17 us back.
	{"asym", "exponential:110us:10us/pareto:117.32us:30us", true, "the same floor, different shapes each way (one direction queues more)"},
}

// Matrix returns the link matrix's classes (a copy).
func Matrix() []LinkClass { return append([]LinkClass(nil), matrix...) }

// MatrixClass returns the class named name.
func MatrixClass(name string) (LinkClass, bool) {
	for _, c := range matrix {
		if c.Name == name {
			return c, true
		}
	}
	return LinkClass{}, false
}

// MatrixNames lists the classes' names in order.
func MatrixNames() []string {
	out := make([]string, len(matrix))
	for i, c := range matrix {
		out[i] = c.Name
	}
	return out
}
