package cuda

import (
	"encoding/binary"
	"slices"
	"time"
)

// launchRec is one recorded kernel launch: everything cuLaunchKernel needs
// but the stream.
type launchRec struct {
	f           Func
	grid, block Dim3
	shared      int
	vals        []uint64
	offs        []uint8
	pdl         bool // programmatic dependent launch (Thread.pdl)
	// lane is the branch the launch runs on (0: the main stream; see
	// Backend.Branch), and op what the record is: a launch, or a fork or
	// join of its lane (f, grid and the parameters unused).
	lane uint8
	op   recOp
}

// recOp is what a launchRec records.
type recOp uint8

const (
	opLaunch recOp = iota
	// opFork: the lane's stream waits for the main stream's work so far.
	opFork
	// opJoin: the main stream waits for the lane's work so far.
	opJoin
)

// recording is the launches a Backend has queued since its last flush.
// Ops record on a Thread without a driver (no CUDA call happens on the
// caller's goroutine); the flush replays them on the device thread, as
// direct launches or through a captured graph of the same launches.
type recording struct {
	launches []launchRec
	t0       time.Time // when the first launch was recorded (Stats.Record)
}

// newRecorder returns a Thread whose Launch records into rec.
func newRecorder(rec *recording) *Thread {
	t := &Thread{live: true, rec: rec}
	t.args.vals = make([]uint64, maxArgs)
	t.args.ptrs = make([]uintptr, maxArgs)
	return t
}

// key is the recording's identity: two recordings with the same key launch
// the same kernels with the same parameters, so a graph captured from one
// replays the other.
func (r *recording) key() []byte {
	n := 0
	for i := range r.launches {
		n += 76 + 8*len(r.launches[i].vals) + len(r.launches[i].offs)
	}
	b := make([]byte, 0, n)
	for i := range r.launches {
		l := &r.launches[i]
		b = binary.LittleEndian.AppendUint64(b, uint64(l.f))
		pdl := 0
		if l.pdl {
			pdl = 1
		}
		for _, v := range []int{l.grid.X, l.grid.Y, l.grid.Z, l.block.X, l.block.Y, l.block.Z, l.shared, len(l.vals), len(l.offs), pdl, int(l.lane), int(l.op)} {
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		}
		for _, v := range l.vals {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = append(b, l.offs...)
	}
	return b
}

// graphCache keeps the executable graphs of recordings seen more than once
// (a decode step with the same batch shape recurs every step), and the keys
// of the last recordings seen once.
type graphCache struct {
	graphs []cachedGraph // most recently used last
	seen   [][]byte      // keys seen once, most recent last
	limit  int
}

type cachedGraph struct {
	key  []byte
	exec GraphExec
}

// lookup returns the graph of key, if captured, and whether key was seen
// before (then the caller should capture it); it records key as seen.
func (c *graphCache) lookup(key []byte) (GraphExec, bool) {
	for i, g := range c.graphs {
		if slices.Equal(g.key, key) {
			c.graphs = append(append(c.graphs[:i:i], c.graphs[i+1:]...), g)
			return g.exec, true
		}
	}
	for i, k := range c.seen {
		if slices.Equal(k, key) {
			c.seen = append(c.seen[:i], c.seen[i+1:]...)
			return 0, true
		}
	}
	c.seen = append(c.seen, key)
	if len(c.seen) > 2*c.limit {
		c.seen = c.seen[1:]
	}
	return 0, false
}

// add stores a new graph and returns the one it evicts (0 if none).
func (c *graphCache) add(key []byte, g GraphExec) GraphExec {
	c.graphs = append(c.graphs, cachedGraph{key: key, exec: g})
	if len(c.graphs) > c.limit {
		old := c.graphs[0].exec
		c.graphs = c.graphs[1:]
		return old
	}
	return 0
}
