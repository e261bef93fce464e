package transport

import (
	"net/netip"
	"time"
)

// msgKey names one message of one sender: the address it came from, the id
// it claims and its sequence number.
type msgKey struct {
	from   netip.AddrPort
	sender uint32
	seq    uint32
}

// recentEntry is what the responder remembers of one message.
type recentEntry struct {
	at    time.Time
	reply []byte // encoded reply of a request; nil for a one-way message
}

// recent remembers the messages seen in the last ttl, at most size of them,
// oldest evicted first. It holds both the reply cache of requests (a
// repeated request is answered with the same bytes, without calling the
// handler again) and the set of delivered one-way messages (a repeated
// message is not delivered twice). Not safe for concurrent use.
type recent struct {
	ttl     time.Duration
	size    int
	m       map[msgKey]recentEntry
	order   []msgKey // FIFO ring of insertions
	head, n int
	evicted uint64 // entries dropped for size before their ttl ran out
}

func newRecent(ttl time.Duration, size int) *recent {
	return &recent{ttl: ttl, size: size, m: make(map[msgKey]recentEntry, size), order: make([]msgKey, size)}
}

// expire drops the entries older than ttl at now.
func (r *recent) expire(now time.Time) {
	for r.n > 0 {
		k := r.order[r.head]
		e, ok := r.m[k]
		if ok && now.Sub(e.at) < r.ttl {
			return
		}
		if ok {
			delete(r.m, k)
		}
		r.head = (r.head + 1) % r.size
		r.n--
	}
}

// get returns the entry of k if it is remembered.
func (r *recent) get(k msgKey, now time.Time) (recentEntry, bool) {
	r.expire(now)
	e, ok := r.m[k]
	return e, ok
}

// put remembers k (replacing any older entry), evicting the oldest entry
// when full.
func (r *recent) put(k msgKey, reply []byte, now time.Time) {
	r.expire(now)
	if _, ok := r.m[k]; ok {
		r.m[k] = recentEntry{at: now, reply: reply}
		return
	}
	if r.n == r.size {
		old := r.order[r.head]
		delete(r.m, old)
		r.head = (r.head + 1) % r.size
		r.n--
		r.evicted++
	}
	r.order[(r.head+r.n)%r.size] = k
	r.n++
	r.m[k] = recentEntry{at: now, reply: reply}
}

// len returns the number of remembered messages.
func (r *recent) len() int { return len(r.m) }
