package deepseekv4

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/moe"
)

// epRank is one rank's part of expert parallelism: every MoE layer's
// placement, the rank's communicator end, and the state of the pass in
// flight. It runs on the rank's goroutine only.
//
// An MoE layer on a rank (moe) routes the rank's tokens (Route), assigns
// each (token, k) pair to a replica of its expert (moe.Assigner), tells
// every rank how many rows it will get (a count exchange, which also
// carries each rank's vote to stop the pass), sends the rows and their
// expert ids (two all-to-alls), runs the experts on the rows it received
// (RunExperts), sends the results back (a third all-to-all) and adds them
// up per token in MoE's order (Combine). A rank with no tokens in the pass
// still takes part in every exchange and serves the rows sent to it.
//
// The hash layers' routing depends on token ids alone: their dispatch
// plans (pairs, replicas, rows per rank) are made on the host from the
// pass's tokens by a goroutine started with the pass, while the rank runs
// the embedding and the layers before them, and one count exchange at the
// first hash layer serves them all.
type epRank struct {
	rank, size int
	comm       comm.Comm
	be         compute.Backend
	split      compute.RoutedExperts
	hidden     int
	layers     map[*compute.MoEArgs]*epLayer
	main       []*epLayer   // the main pass's MoE layers, in order
	mtp        [][]*epLayer // MTP layer k's pass: its one MoE layer

	// The pass in flight.
	pass      []*epLayer
	next      int // pass index of the next MoE layer
	toks      []int32
	ctx       context.Context    // the caller's: its end is voted on
	cancel    context.CancelFunc // ends the rank's own pass context
	hashPlans chan []dispatch    // the pass's hash layers' plans, in pass order
	hashPlan  []dispatch
	hashRecv  [][]int // rows each rank sends this rank, per hash layer
	err       error

	stats EPStats
	load  [][]int64 // per MoE layer (main, then MTP): pairs routed to each expert
	freq  []int64   // per token id: tokens of the main passes
}

// epLayer is one MoE layer as expert parallelism sees it.
type epLayer struct {
	index  int              // among the MoE layers: main layers, then MTP layers
	args   *compute.MoEArgs // as this rank holds them (its experts only)
	place  *moe.Placement
	k      int
	tid    []int32 // the host copy of Tid2Eid (hash layers); nil: learned
	hashAt int     // position among the pass's hash layers
}

// EPStats are a rank's expert-parallel counters.
type EPStats struct {
	Passes, Layers int64
	// RowsSent and RowsReceived count dispatched (token, expert) rows
	// (RowsKept of the sent ones went to this rank itself).
	RowsSent, RowsReceived, RowsKept int64
	// CommSeconds is the time spent in exchanges (counts, dispatch,
	// combine), waiting for the other ranks included; ExpertSeconds in
	// RunExperts on the received rows.
	CommSeconds, ExpertSeconds float64
}

// dispatch is one rank's plan for one MoE layer: which row goes to which
// rank, in the order they are sent.
type dispatch struct {
	idx        []int32 // [T·K] every pair's expert (hash layers: from the table)
	sendCounts []int   // rows to each rank
	rows       []int32 // the token of each sent row, grouped by rank
	eids       []int32 // the expert of each sent row
	slot       []int32 // [T·K] the sent position of pair (t, k)
}

// plan assigns the pairs of T tokens (their experts idx, K per token) of
// rank home to replicas and lays out the rows to send.
func (L *epLayer) plan(home int, idx []int32, T int) dispatch {
	K, N := L.k, L.place.Ranks
	d := dispatch{idx: idx, sendCounts: make([]int, N), rows: make([]int32, T*K), eids: make([]int32, T*K), slot: make([]int32, T*K)}
	dest := make([]int, T*K)
	a := L.place.NewAssigner(home)
	for p := range T * K {
		dest[p] = a.Assign(int(idx[p]))
		d.sendCounts[dest[p]]++
	}
	at := make([]int, N)
	for j := 1; j < N; j++ {
		at[j] = at[j-1] + d.sendCounts[j-1]
	}
	for p := range T * K {
		j := dest[p]
		d.rows[at[j]] = int32(p / K)
		d.eids[at[j]] = idx[p]
		d.slot[p] = int32(at[j])
		at[j]++
	}
	return d
}

// errStopped is what a pass ends with when a rank voted to stop it.
var errStopped = errors.New("deepseekv4: the pass was stopped")

// begin starts a pass over the given MoE layers with this rank's host
// tokens, and returns the context the rank's forward pass runs under: it
// ends when the ranks vote to stop (the caller's ctx ended somewhere).
func (e *epRank) begin(ctx context.Context, pass []*epLayer, toks []int32) context.Context {
	e.pass, e.next, e.toks, e.ctx, e.err = pass, 0, toks, ctx, nil
	e.hashPlan, e.hashRecv = nil, nil
	e.stats.Passes++
	if len(pass) > 0 && len(e.main) > 0 && pass[0] == e.main[0] {
		for _, t := range toks {
			e.freq[t]++
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	var hash []*epLayer
	for _, L := range pass {
		if L.tid != nil {
			hash = append(hash, L)
		}
	}
	e.hashPlans = nil
	if len(hash) > 0 {
		// The hash layers' dispatch is known from the token ids: plan it
		// now, beside the compute that comes before the first of them.
		ch := make(chan []dispatch, 1)
		e.hashPlans = ch
		go func() {
			T := len(toks)
			plans := make([]dispatch, len(hash))
			for i, L := range hash {
				K := L.k
				idx := make([]int32, T*K)
				for t, tok := range toks {
					copy(idx[t*K:(t+1)*K], L.tid[int(tok)*K:(int(tok)+1)*K])
				}
				plans[i] = L.plan(e.rank, idx, T)
			}
			ch <- plans
		}()
	}
	return rctx
}

// end runs the pass's remaining MoE layers with no tokens (when the
// rank's forward pass stopped early, so that the other ranks are not left
// waiting), releases the pass context and returns the pass's error.
func (e *epRank) end() error {
	for e.next < len(e.pass) {
		mark := e.be.ScratchMark()
		e.moe(compute.Tensor{}, compute.Tensor{}, compute.Tensor{}, nil)
		e.be.ResetScratch(mark)
	}
	e.cancel()
	if e.hashPlans != nil && e.hashPlan == nil {
		<-e.hashPlans // never leave the planner blocked
	}
	return e.err
}

// fail records the pass's first error and ends the rank's pass context.
func (e *epRank) fail(err error) {
	if e.err == nil {
		e.err = err
	}
	e.cancel()
}

// exchange sends rows[j] (w values) to every rank j, headed by this
// rank's vote to stop, and returns what each rank sent this one; it fails
// the pass when any rank voted to stop.
func (e *epRank) exchange(rows [][]int, w int) ([][]int, bool) {
	N := e.size
	vals := make([]int32, 0, N*(w+1))
	vote := int32(0)
	if e.ctx.Err() != nil {
		vote = 1
	}
	for j := range N {
		vals = append(vals, vote)
		for _, v := range rows[j] {
			vals = append(vals, int32(v))
		}
	}
	be := e.be
	mark := be.ScratchMark()
	defer be.ResetScratch(mark)
	out := be.Scratch(compute.I32, N, w+1)
	in := be.Scratch(compute.I32, N, w+1)
	be.Write(out, vals)
	ones := make([]int, N)
	for j := range ones {
		ones[j] = 1
	}
	t0 := time.Now()
	err := e.comm.AllToAll(in, ones, out, ones)
	if err == nil {
		err = be.Read(vals, in)
	}
	e.stats.CommSeconds += time.Since(t0).Seconds()
	if err != nil {
		e.fail(fmt.Errorf("deepseekv4: rank %d: count exchange: %w", e.rank, err))
		return nil, false
	}
	recv := make([][]int, N)
	stop := false
	for j := range N {
		row := vals[j*(w+1) : (j+1)*(w+1)]
		stop = stop || row[0] != 0
		recv[j] = make([]int, w)
		for i, v := range row[1:] {
			recv[j][i] = int(v)
		}
	}
	if stop {
		err := errStopped
		if c := e.ctx.Err(); c != nil {
			err = fmt.Errorf("%w: %w", errStopped, c)
		}
		e.fail(err)
		return nil, false
	}
	return recv, true
}

// moe runs one MoE layer expert-parallel: y [T, D] gets what MoE would
// write for x [T, D] (the zero Tensors for a rank without tokens, and a
// nil a when end drains the pass).
func (e *epRank) moe(y, x, tokens compute.Tensor, a *compute.MoEArgs) {
	if e.next >= len(e.pass) {
		e.fail(fmt.Errorf("deepseekv4: rank %d: an MoE layer beyond the pass's %d", e.rank, len(e.pass)))
		return
	}
	L := e.pass[e.next]
	e.next++
	if a != nil && a != L.args {
		err := fmt.Errorf("deepseekv4: rank %d: an MoE layer other than the pass's next (%d)", e.rank, L.index)
		e.comm.Abort(err)
		e.fail(err)
		return
	}
	if e.err != nil {
		return
	}
	e.stats.Layers++
	be, D, K := e.be, e.hidden, L.k
	T := 0
	if x.Valid() {
		T = x.Rows
	}
	var idxT, wtT compute.Tensor
	var d dispatch
	if T > 0 {
		idxT = be.Scratch(compute.I32, T, K)
		wtT = be.Scratch(compute.F32, T, K)
		e.split.Route(idxT, wtT, x, tokens, a)
	}
	var recvCounts []int
	if L.tid != nil {
		if e.hashPlan == nil {
			e.hashPlan = <-e.hashPlans
			rows := make([][]int, e.size)
			for j := range rows {
				for _, p := range e.hashPlan {
					rows[j] = append(rows[j], p.sendCounts[j])
				}
			}
			recv, ok := e.exchange(rows, len(e.hashPlan))
			if !ok {
				return
			}
			e.hashRecv = recv
		}
		d = e.hashPlan[L.hashAt]
		if len(d.idx) != T*K {
			err := fmt.Errorf("deepseekv4: rank %d: MoE layer %d has %d tokens, the pass %d", e.rank, L.index, T, len(e.toks))
			e.comm.Abort(err)
			e.fail(err)
			return
		}
		recvCounts = make([]int, e.size)
		for j := range recvCounts {
			recvCounts[j] = e.hashRecv[j][L.hashAt]
		}
	} else {
		idx := make([]int32, T*K)
		if T > 0 {
			if err := be.Read(idx, idxT); err != nil {
				e.comm.Abort(err)
				e.fail(fmt.Errorf("deepseekv4: rank %d: reading the routing: %w", e.rank, err))
				return
			}
		}
		d = L.plan(e.rank, idx, T)
		rows := make([][]int, e.size)
		for j := range rows {
			rows[j] = []int{d.sendCounts[j]}
		}
		recv, ok := e.exchange(rows, 1)
		if !ok {
			return
		}
		recvCounts = make([]int, e.size)
		for j := range recvCounts {
			recvCounts[j] = recv[j][0]
		}
	}
	for _, ex := range d.idx {
		e.load[L.index][ex]++
	}
	S, R := len(d.rows), 0
	for _, n := range recvCounts {
		R += n
	}
	e.stats.RowsSent += int64(S)
	e.stats.RowsReceived += int64(R)
	e.stats.RowsKept += int64(d.sendCounts[e.rank])

	sendX := be.Scratch(compute.F32, S, D)
	sendE := be.Scratch(compute.I32, S, 1)
	if S > 0 {
		rowsT := be.Scratch(compute.I32, 1, S)
		be.Write(rowsT, d.rows)
		be.GatherRows(sendX, x, rowsT)
		be.Write(sendE, d.eids)
	}
	recvX := be.Scratch(compute.F32, R, D)
	recvE := be.Scratch(compute.I32, R, 1)
	t0 := time.Now()
	err := e.comm.AllToAll(recvX, recvCounts, sendX, d.sendCounts)
	if err == nil {
		err = e.comm.AllToAll(recvE, recvCounts, sendE, d.sendCounts)
	}
	t1 := time.Now()
	e.stats.CommSeconds += t1.Sub(t0).Seconds()
	if err != nil {
		e.fail(fmt.Errorf("deepseekv4: rank %d: dispatch of MoE layer %d: %w", e.rank, L.index, err))
		return
	}
	recvY := be.Scratch(compute.F32, R, D)
	if R > 0 {
		e.split.RunExperts(recvY, recvX, recvE, L.args)
	}
	t2 := time.Now()
	e.stats.ExpertSeconds += t2.Sub(t1).Seconds()
	backY := be.Scratch(compute.F32, S, D)
	err = e.comm.AllToAll(backY, d.sendCounts, recvY, recvCounts)
	e.stats.CommSeconds += time.Since(t2).Seconds()
	if err != nil {
		e.fail(fmt.Errorf("deepseekv4: rank %d: combine of MoE layer %d: %w", e.rank, L.index, err))
		return
	}
	if T > 0 {
		slotT := be.Scratch(compute.I32, T, K)
		be.Write(slotT, d.slot)
		e.split.Combine(y, x, backY, idxT, wtT, slotT, a)
	}
}
