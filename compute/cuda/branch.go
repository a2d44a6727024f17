package cuda

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// Branches (compute.Branches) are streams of the backend's own beside the
// device thread's: a Branch(i) records a fork (stream i waits for an event
// recorded on the main stream), the launches after it carry lane i, and a
// Join records a join (the main stream waits for an event recorded on
// stream i) for every lane forked since the last one. Direct launches and
// captured graphs replay the same records, so a graph holds the branches
// as parallel paths. Every flush ends joined: it joins the lanes left open
// and forks the current lane again for the launches after it.
//
// While a lane is open, a scratch region an op releases is not handed out
// again (ResetScratch to a mark does not lower the offset): an op on one
// stream may still be reading its temporaries while the next op, on
// another, would take them.
type branches struct {
	forked [lanes]bool   // lanes forked since the last join
	side   [lanes]Stream // created at the first flush that forks them
	joinEv [lanes]Event
	forkEv Event
	// busy: lanes with launches other than l2_prefetch since their last
	// join (prefetch-only lanes read no scratch), from the recording's
	// records up to scanned.
	busy    [lanes]bool
	scanned int
	// serial: Branch and Join do nothing, every op runs on the main stream
	// (BenchmarkFlash's branches-off A/B; the same values).
	serial bool
}

// The backend's own lanes, after the model's: an op whose launches do
// not all depend on each other runs some of them on one (opBranch).
const (
	// laneShared: the MoE's shared expert, beside its routing and routed
	// experts (moe_combine joins it).
	laneShared = compute.MaxBranches + 1 + iota
	lanes      // the lanes, the main stream's 0 included
)

// Branch implements compute.Branches.
func (b *Backend) Branch(i int) {
	if i < 0 || i > compute.MaxBranches {
		panic(fmt.Sprintf("cuda: Branch(%d) outside 0..%d", i, compute.MaxBranches))
	}
	if b.br.serial {
		return
	}
	b.fork(i)
}

// fork makes the launches recorded next run on lane i, after a fork record
// for i > 0.
func (b *Backend) fork(i int) {
	b.rt.lane = uint8(i) // the lane the recorder's launches run on
	if i > 0 {
		b.rec.launches = append(b.rec.launches, launchRec{op: opFork, lane: uint8(i)})
		b.br.forked[i] = true
		b.stats.Forks++
	}
}

// opBranch forks the backend's own lane i (laneShared...) for an op's
// launches that follow, when the op runs on the main branch with the
// branches on, and reports whether it did (else they stay where they
// are). The op returns with opMain and joins i before a launch that reads
// what the lane wrote.
func (b *Backend) opBranch(i int) bool {
	if b.br.serial || b.rt.lane != 0 {
		return false
	}
	b.fork(i)
	return true
}

// opMain returns an op's launches to the main stream after opBranch.
func (b *Backend) opMain() { b.rt.lane = 0 }

// opJoin makes the launches recorded next wait for lane i's, after
// opBranch (nothing if i is not forked): the main stream joins i, and a
// side lane the op runs on forks again after that.
func (b *Backend) opJoin(i int) {
	if !b.br.forked[i] {
		return
	}
	cur := int(b.rt.lane)
	b.joinLane(i)
	if cur == i {
		cur = 0
	}
	b.fork(cur)
}

// Join implements compute.Branches.
func (b *Backend) Join(i int) {
	if i < 0 || i > compute.MaxBranches {
		panic(fmt.Sprintf("cuda: Join(%d) outside 0..%d", i, compute.MaxBranches))
	}
	if b.br.serial {
		return
	}
	if i == 0 {
		b.joinLanes()
	} else {
		b.joinLane(i)
	}
	b.rt.lane = 0
}

// SetBranches turns the branches on (the default) or off: off, Branch and
// Join do nothing and every op runs on the main stream, with the same
// values. It takes effect at the next Branch.
func (b *Backend) SetBranches(on bool) {
	b.Join(0)
	b.br.serial = !on
}

// joinLanes records a join of every forked lane.
func (b *Backend) joinLanes() {
	for i := 1; i < len(b.br.forked); i++ {
		b.joinLane(i)
	}
}

// joinLane records a join of lane i if it is forked.
func (b *Backend) joinLane(i int) {
	if !b.br.forked[i] {
		return
	}
	b.scanLanes()
	b.rec.launches = append(b.rec.launches, launchRec{op: opJoin, lane: uint8(i)})
	b.br.forked[i], b.br.busy[i] = false, false
	b.br.scanned = len(b.rec.launches)
}

// scanLanes marks the lanes of the launches recorded since the last scan
// busy unless they are prefetches.
func (b *Backend) scanLanes() {
	pf := b.k.fns["l2_prefetch"]
	for _, r := range b.rec.launches[min(b.br.scanned, len(b.rec.launches)):] {
		if r.op == opLaunch && r.lane > 0 && r.f != pf {
			b.br.busy[r.lane] = true
		}
	}
	b.br.scanned = len(b.rec.launches)
}

// branchesOpen reports whether a lane that may use scratch is forked and
// not joined yet.
func (b *Backend) branchesOpen() bool {
	b.scanLanes()
	for i, f := range b.br.forked {
		if f && b.br.busy[i] {
			return true
		}
	}
	return false
}

// lanesOn creates, on the device thread, the streams and events the
// recording's forks need (before a capture, which must not create them).
func (b *Backend) lanesOn(t *Thread) error {
	for i := range b.rec.launches {
		r := &b.rec.launches[i]
		if r.op != opFork || b.br.side[r.lane] != 0 {
			continue
		}
		if b.br.forkEv == 0 {
			e, err := t.NewEvent(false)
			if err != nil {
				return err
			}
			b.br.forkEv = e
		}
		s, err := t.NewStream()
		if err != nil {
			return err
		}
		e, err := t.NewEvent(false)
		if err != nil {
			t.DestroyStream(s)
			return err
		}
		b.br.side[r.lane], b.br.joinEv[r.lane] = s, e
	}
	return nil
}

// replayRec queues one record with main as the main stream.
func (b *Backend) replayRec(t *Thread, r *launchRec, main Stream) error {
	switch r.op {
	case opFork:
		if err := t.Record(b.br.forkEv, main); err != nil {
			return err
		}
		return t.Wait(b.br.side[r.lane], b.br.forkEv)
	case opJoin:
		if err := t.Record(b.br.joinEv[r.lane], b.br.side[r.lane]); err != nil {
			return err
		}
		return t.Wait(main, b.br.joinEv[r.lane])
	}
	s := main
	if r.lane > 0 {
		s = b.br.side[r.lane]
	}
	return t.replay(r, s)
}

// closeBranches waits for the branches' streams and destroys them and
// their events.
func (b *Backend) closeBranches(t *Thread) []error {
	var errs []error
	for i, s := range b.br.side {
		if s != 0 {
			errs = append(errs, t.Sync(s), t.DestroyStream(s), t.DestroyEvent(b.br.joinEv[i]))
		}
	}
	if b.br.forkEv != 0 {
		errs = append(errs, t.DestroyEvent(b.br.forkEv))
	}
	b.br = branches{serial: b.br.serial}
	return errs
}

// Prefetch implements compute.Prefetcher: one l2_prefetch launch over the
// data and the scales of ws, at most bytes of them (when bytes > 0) and at
// most three quarters of the L2 in all (what it holds beside the other
// kernels' traffic), queued like any op (on the current branch). With the
// branches off (SetBranches) it does nothing: on the main stream it would
// only delay the ops after it.
func (b *Backend) Prefetch(ws []*compute.Matrix, bytes int64) {
	if b.noPrefetch || b.br.serial {
		return
	}
	budget := int64(b.dev.Props().L2Bytes) * 3 / 4
	if bytes > 0 {
		budget = min(budget, bytes)
	}
	var regions [2 * pfRegions]uint64 // pointers, then int32 sizes in 16-byte chunks, two a word
	nr := 0
	add := func(p Ptr, n int64) {
		n = min(n, budget) / 16
		if n <= 0 || nr == pfRegions {
			return
		}
		regions[nr] = uint64(p)
		regions[pfRegions+nr/2] |= uint64(uint32(n)) << (32 * (nr % 2))
		budget -= 16 * n
		nr++
	}
	var pieces int64
	for _, w := range ws {
		m := b.mustMat(w)
		data := m.rowBytes() * int64(m.Rows)
		add(m.Data, data)
		if sc := m.bytes - data; m.Scale != 0 && sc > 0 {
			add(m.Scale, sc)
		}
		pieces = max(pieces, (data+pfPiece-1)/pfPiece)
	}
	if nr == 0 {
		return
	}
	// One thread a piece of the largest region, blocks of 128 threads.
	b.launch("l2_prefetch", Dim3{X: int((pieces + 127) / 128)}, Dim3{X: 128}, 0,
		b.args().Struct(regions[:pfRegions+pfRegions/2]...).Int(nr))
}

// pfRegions and pfPiece are prefetch.cu's PF_REGIONS and PF_PIECE.
const (
	pfRegions = 12
	pfPiece   = 16384
)
