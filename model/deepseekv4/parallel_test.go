package deepseekv4

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/moe"
)

// loadParallel loads dir on n in-process CPU ranks.
func loadParallel(t testing.TB, dir string, n int, place []*moe.Placement) *Parallel {
	t.Helper()
	bes := make([]compute.Backend, n)
	for r := range bes {
		bes[r] = cpu.New(1)
	}
	ends, err := comm.NewLocal(bes)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]comm.Comm, n)
	for r, c := range ends {
		cs[r] = c
	}
	p, err := LoadParallel(dir, bes, cs, ParallelOptions{Placements: place})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// homedOn is p with rank r's backend for its Backend, so that pools made
// for it (golden.Feed's) hold sequences homed on rank r.
type homedOn struct {
	*Parallel
	r int
}

func (h homedOn) Backend() compute.Backend { return h.RankBackends()[h.r] }

func sameBits(t *testing.T, what string, got, want []float32, V int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: logit %d (position %d) is %g, one device %g", what, i, i/V, got[i], want[i])
		}
	}
}

// parallelCases are every DeepSeek-V4 golden case and the shipped model.
var parallelCases = append(append([]string(nil), goldenCases...), "shipped")

func parallelDir(name string) string {
	if name == "shipped" {
		return shippedDir
	}
	return caseDir(name)
}

// TestParallelBitIdentical: on 2 and 3 in-process CPU ranks, every
// DeepSeek-V4 golden case and the shipped model give the single-device
// logits bit for bit along the full, decode and chunked paths (the
// sequence homed on each rank in turn, the other ranks serving experts),
// and the same greedy continuation; the single-device logits are checked
// against the reference here too.
func TestParallelBitIdentical(t *testing.T) {
	ctx := context.Background()
	for _, name := range parallelCases {
		t.Run(name, func(t *testing.T) {
			dir := parallelDir(name)
			one, err := Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			c, err := golden.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			L := len(c.InputIDs)
			paths := []struct {
				name  string
				feeds []int
				ref   []float32
			}{
				{"full", []int{L}, c.LogitsFull},
				{"decode", golden.DecodeFeeds(c.Prompt, L), c.LogitsDecode},
				{"chunked", c.Chunks, c.LogitsChunked},
			}
			want := make([][]float32, len(paths))
			for i, pa := range paths {
				if want[i], err = golden.Feed(ctx, one, c.InputIDs, pa.feeds); err != nil {
					t.Fatal(err)
				}
				if d := golden.MaxAbsDiff(want[i], pa.ref); d > c.Tolerance {
					t.Fatalf("one device, %s path: %g from the reference", pa.name, d)
				}
			}
			wantGreedy, err := golden.Greedy(ctx, one, c.InputIDs[:c.Prompt], len(c.Greedy))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{2, 3} {
				p := loadParallel(t, dir, n, nil)
				for i, pa := range paths {
					for r := range n {
						got, err := golden.Feed(ctx, homedOn{p, r}, c.InputIDs, pa.feeds)
						if err != nil {
							t.Fatal(err)
						}
						sameBits(t, fmt.Sprintf("%d ranks, %s path, home rank %d", n, pa.name, r), got, want[i], c.Vocab)
					}
				}
				g, err := golden.Greedy(ctx, homedOn{p, n - 1}, c.InputIDs[:c.Prompt], len(c.Greedy))
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(g) != fmt.Sprint(wantGreedy) {
					t.Errorf("%d ranks: greedy %v, one device %v", n, g, wantGreedy)
				}
				st := p.Stats()
				if st[n-1].RowsReceived == 0 || st[0].RowsSent == st[0].RowsKept {
					t.Errorf("%d ranks: no rows crossed ranks (%+v)", n, st)
				}
			}
		})
	}
}

// feedBatched runs several sequences, homed on the given ranks, through
// one batch per step: each sequence's tokens in the given step sizes
// (sequences joining and finishing at different steps), and returns every
// sequence's logits of every position.
func feedBatched(t *testing.T, m model.Model, pools []*cache.Pool, ids [][]int32, feeds [][]int, home []int) [][]float32 {
	t.Helper()
	seqs := make([]*cache.Seq, len(ids))
	for i := range ids {
		s, err := m.NewSeq(pools[home[i]])
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		seqs[i] = s
	}
	out := make([][]float32, len(ids))
	pos := make([]int, len(ids))
	for step := 0; ; step++ {
		b := &model.Batch{}
		var who []int
		for i := range ids {
			if step >= len(feeds[i]) || feeds[i][step] == 0 {
				continue
			}
			n := feeds[i][step]
			b.Spans = append(b.Spans, model.Span{Seq: seqs[i], Start: len(b.Tokens), Len: n, Logits: model.AllLogits})
			b.Tokens = append(b.Tokens, ids[i][pos[i]:pos[i]+n]...)
			who = append(who, i)
		}
		if len(who) == 0 {
			return out
		}
		lg, err := m.Forward(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		V := m.VocabSize()
		at := 0
		for j, i := range who {
			n := b.Spans[j].Len
			out[i] = append(out[i], lg[at:at+n*V]...)
			at += n * V
			pos[i] += n
		}
	}
}

// TestParallelBatched: sequences homed on different ranks share batches
// (prefill chunks beside decodes, a rank without tokens in some steps) and
// each gets the logits it gets alone on one device, bit for bit.
func TestParallelBatched(t *testing.T) {
	for _, name := range []string{"deepseek-v4/flash-ratios", "shipped"} {
		t.Run(name, func(t *testing.T) {
			dir := parallelDir(name)
			one, err := Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			c, err := golden.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			L := len(c.InputIDs)
			ids := [][]int32{c.InputIDs, c.InputIDs[:L-5], c.InputIDs[3:], c.InputIDs[:L/2]}
			// Step sizes; a 0 is a step the sequence sits out.
			feeds := [][]int{
				golden.DecodeFeeds(c.Prompt, L),
				append([]int{0, 0, 7, 9}, golden.DecodeFeeds(L-5-16, L-5-16)[1:]...),
				{L - 3},
				append([]int{1, 0, 5}, golden.DecodeFeeds(L/2-6, L/2-6)[1:]...),
			}
			for i := range feeds {
				n := 0
				for j, f := range feeds[i] {
					n += f
					if n > len(ids[i]) {
						feeds[i][j] -= n - len(ids[i])
						feeds[i] = feeds[i][:j+1]
						n = len(ids[i])
						break
					}
				}
				for n < len(ids[i]) {
					feeds[i] = append(feeds[i], 1)
					n++
				}
			}
			want := make([][]float32, len(ids))
			for i := range ids {
				if want[i], err = golden.Feed(context.Background(), one, ids[i], []int{len(ids[i])}); err != nil {
					t.Fatal(err)
				}
			}
			for _, n := range []int{2, 3} {
				p := loadParallel(t, dir, n, nil)
				pools := make([]*cache.Pool, n)
				for r, be := range p.RankBackends() {
					if pools[r], err = cache.PoolFor(be, p.CacheSpecs(), L, len(ids)); err != nil {
						t.Fatal(err)
					}
				}
				home := []int{0, 1, n - 1, 1}
				got := feedBatched(t, p, pools, ids, feeds, home)
				for i := range ids {
					sameBits(t, fmt.Sprintf("%d ranks, sequence %d on rank %d", n, i, home[i]), got[i], want[i], c.Vocab)
				}
			}
		})
	}
}

// TestParallelReplicated: with EPLB placements (hot experts replicated on
// several ranks, the busiest-first packing, each rank holding more
// experts than its block), the logits stay the single-device ones, and the
// replicas do share the work.
func TestParallelReplicated(t *testing.T) {
	dir := parallelDir("shipped")
	ctx := context.Background()
	one, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := golden.Feed(ctx, one, c.InputIDs, []int{len(c.InputIDs)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	// Measure the traffic on blocks, then balance by it.
	p := loadParallel(t, dir, n, nil)
	if _, err := golden.Feed(ctx, p, c.InputIDs, []int{len(c.InputIDs)}); err != nil {
		t.Fatal(err)
	}
	loads, freq := p.Loads()
	cfg := p.Cfg
	var tokens int64
	for _, f := range freq {
		tokens += f
	}
	if tokens != int64(len(c.InputIDs)) {
		t.Fatalf("%d tokens counted, %d fed", tokens, len(c.InputIDs))
	}
	place := make([]*moe.Placement, len(loads))
	for i, l := range loads {
		lf := make([]float64, len(l))
		for e, v := range l {
			lf[e] = float64(v)
		}
		if i < len(cfg.Layers) && cfg.Layers[i].Hash {
			// A hash layer's load follows from token frequencies alone.
			ff := make([]float64, len(freq))
			for t, f := range freq {
				ff[t] = float64(f)
			}
			hl, err := moe.HashLoad(p.W.Layers[i].FFN.Tid2Eid, cfg.ExpertsPerTok, ff, cfg.Experts)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(hl) != fmt.Sprint(lf) {
				t.Fatalf("hash layer %d: load from token counts %v, measured %v", i, hl, lf)
			}
		}
		if place[i], err = moe.Balance(lf, n, (cfg.Experts+n-1)/n+1); err != nil {
			t.Fatal(err)
		}
	}
	replicated := 0
	for _, pl := range place {
		for _, rs := range pl.Replicas {
			if len(rs) > 1 {
				replicated++
			}
		}
	}
	if replicated == 0 {
		t.Fatal("no expert replicated")
	}
	for r := range n {
		q := loadParallel(t, dir, n, place)
		got, err := golden.Feed(ctx, homedOn{q, r}, c.InputIDs, []int{len(c.InputIDs)})
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("replicated experts, home rank %d", r), got, want, c.Vocab)
	}
}

// TestParallelMTP: the draft head on 2 ranks gives the single-device
// draft logits bit for bit (its MoE layer expert-parallel), with the
// hidden states recorded by the main pass in draft states on rank 1.
func TestParallelMTP(t *testing.T) {
	ctx := context.Background()
	c, err := golden.Load(shippedDir)
	if err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs
	S := len(ids)
	draft := func(m model.Model, d model.Drafter) []float32 {
		pool, err := cache.PoolFor(m.Backend(), append(m.CacheSpecs(), d.DraftSpecs()...), S, 1)
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := m.NewSeq(pool)
		mseq, err := cache.NewSeq(pool, d.DraftSpecs())
		if err != nil {
			t.Fatal(err)
		}
		b := &model.Batch{Tokens: ids, Spans: []model.Span{{Seq: seq, Len: S, Logits: model.NoLogits, Draft: mseq}}}
		if _, err := m.Forward(ctx, b); err != nil {
			t.Fatal(err)
		}
		got, err := d.Draft(ctx, &model.Batch{Tokens: ids[1:], Spans: []model.Span{{Seq: mseq, Len: S - 1, Logits: model.AllLogits}}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	one, err := Load(shippedDir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	want := draft(one, one)
	p := loadParallel(t, shippedDir, 2, nil)
	got := draft(homedOn{p, 1}, p)
	sameBits(t, "MTP draft on 2 ranks", got, want, c.Vocab)
}

// countdown is a context whose Err turns to Canceled after n calls (the
// ranks' votes call it), to cancel a pass part-way without a clock.
type countdown struct {
	context.Context
	n atomic.Int64
}

func (c *countdown) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestParallelCancel: a pass cancelled part-way stops on every rank (none
// waits for the others forever), returns the context's error, and leaves
// the model usable: a fresh sequence then gets the single-device logits.
func TestParallelCancel(t *testing.T) {
	dir := caseDir("deepseek-v4/tiny")
	one, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := golden.Feed(context.Background(), one, c.InputIDs, []int{len(c.InputIDs)})
	if err != nil {
		t.Fatal(err)
	}
	p := loadParallel(t, dir, 3, nil)
	for _, after := range []int64{0, 1, 4, 7} {
		ctx := &countdown{Context: context.Background()}
		ctx.n.Store(after)
		_, err := golden.Feed(ctx, homedOn{p, 1}, c.InputIDs, []int{len(c.InputIDs)})
		if err == nil {
			t.Fatalf("cancelled after %d votes: no error", after)
		}
		got, err := golden.Feed(context.Background(), homedOn{p, 2}, c.InputIDs, []int{len(c.InputIDs)})
		if err != nil {
			t.Fatalf("after a cancelled pass: %v", err)
		}
		sameBits(t, "after a cancelled pass", got, want, c.Vocab)
	}
}
