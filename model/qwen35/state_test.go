package qwen35

import (
	"context"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestStateAcrossFeeds compares the recurrent state (conv history and
// delta-rule state, with the keys and values) a sequence ends with after
// one feed, token by token, after a prompt then token by token, and in
// the golden case's chunk sizes. With the delta rule token by token every
// feed gives the same bits, logits and state. With the chunked form the
// first layer's conv state (which sees only embeddings) is the same bits
// on every path, and everything else agrees to float32 rounding.
func TestStateAcrossFeeds(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				m, c := loadCaseWith(t, name, Options{ChunkedDeltaRule: chunked})
				L := len(c.InputIDs)
				lgFull, full := feed(t, m, c.InputIDs, []int{L})
				for _, p := range []struct {
					name  string
					feeds []int
				}{
					{"token by token", golden.DecodeFeeds(1, L)},
					{"prompt then tokens", golden.DecodeFeeds(c.Prompt, L)},
					{"chunked", c.Chunks},
				} {
					lg, st := feed(t, m, c.InputIDs, p.feeds)
					if st.n != L {
						t.Fatalf("%s: Len %d, want %d", p.name, st.n, L)
					}
					if !chunked {
						if !st.same(full) || !bitsEqual(lg, lgFull) {
							t.Errorf("recurrent form, %s: state or logits differ from one feed (state %v, logits %.3g)", p.name, full.diff(st), maxAbsDiff(lg, lgFull))
						}
						continue
					}
					if d := maxAbsDiff(st.kinds[KindConv][0], full.kinds[KindConv][0]); d != 0 {
						t.Errorf("chunked form, %s: layer 0 conv state differs by %g", p.name, d)
					}
					d := full.diff(st)
					t.Logf("chunked form, %s: relative state differences %v", p.name, d)
					for k, v := range d {
						if v > 1e-4 {
							t.Errorf("chunked form, %s: %s state differs from one feed by %g", p.name, k, v)
						}
					}
				}
			}
		})
	}
}

// TestStateRestoredFromSnapshot: a sequence forked mid-way (what a prefix
// snapshot and a prefix hit do: the keys and values shared, the recurrent
// state copied) and fed the rest gives the same bits, logits and state,
// as the original fed the same way, and feeding the fork does not touch
// the snapshot. With the chunked form this holds at multiples of 64 (the
// model's PrefixAlign).
func TestStateRestoredFromSnapshot(t *testing.T) {
	for _, name := range goldenCases {
		for _, chunked := range []bool{false, true} {
			m, c := loadCaseWith(t, name, Options{ChunkedDeltaRule: chunked})
			ids := c.InputIDs
			at := []int{1, 64, 70, 130}
			if chunked {
				at = []int{64, 128}
			}
			pool := testPool(t, m, len(ids), 4)
			for _, a := range at {
				orig := newSeq(t, m, pool)
				feedSeq(t, m, orig, ids, []int{a})
				snap, err := orig.Fork()
				if err != nil {
					t.Fatal(err)
				}
				before := stateOf(t, snap)
				rest := []int{1, 29, 1, 39}
				want := feedSeq(t, m, orig, ids[a:], rest)
				hit, err := snap.Fork()
				if err != nil {
					t.Fatal(err)
				}
				got := feedSeq(t, m, hit, ids[a:], rest)
				if !bitsEqual(got, want) {
					t.Errorf("%s chunked=%v at %d: restored logits differ by %g", name, chunked, a, maxAbsDiff(got, want))
				}
				if !stateOf(t, hit).same(stateOf(t, orig)) {
					t.Errorf("%s chunked=%v at %d: restored state ends different from the original", name, chunked, a)
				}
				if !stateOf(t, snap).same(before) {
					t.Errorf("%s chunked=%v at %d: feeding a fork changed the snapshot", name, chunked, a)
				}
				hit.Release()
				snap.Release()
				orig.Release()
			}
		}
	}
}

// TestChunkedAlignedFeeds: with the chunked form, feeds split at multiples
// of 64 give the logits and state of one feed bit for bit.
func TestChunkedAlignedFeeds(t *testing.T) {
	for _, name := range goldenCases {
		m, c := loadCaseWith(t, name, Options{ChunkedDeltaRule: true})
		L := len(c.InputIDs)
		want, wantSt := feed(t, m, c.InputIDs, []int{L})
		for _, feeds := range [][]int{{64, L - 64}, {128, L - 128}, {64, 64, L - 128}} {
			got, st := feed(t, m, c.InputIDs, feeds)
			if !bitsEqual(got, want) || !st.same(wantSt) {
				t.Errorf("%s feeds %v: logits (by %g) or state differ from one feed", name, feeds, maxAbsDiff(got, want))
			}
		}
	}
}

// TestBatchedBitIdentical: several sequences in one ragged batch (a
// prompt, a decode step, a mid-sequence chunk, a chunk without logits)
// give the same logits and states, bit for bit, as each run alone.
func TestBatchedBitIdentical(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c := loadCase(t, name)
			ids := c.InputIDs
			ctx := context.Background()
			type job struct {
				past, n int
				mode    model.Logits
			}
			jobs := []job{{0, 23, model.AllLogits}, {40, 1, model.LastLogits}, {64, 70, model.AllLogits}, {7, 5, model.NoLogits}}
			pool := testPool(t, m, 140, 2*len(jobs))
			prep := func(n int) *cache.Seq {
				s := newSeq(t, m, pool)
				if n > 0 {
					feedSeq(t, m, s, ids, []int{n})
				}
				return s
			}
			var want []float32
			var alone []seqState
			for _, j := range jobs {
				s := prep(j.past)
				lg, err := m.Forward(ctx, &model.Batch{Tokens: ids[j.past : j.past+j.n], Spans: []model.Span{{Seq: s, Len: j.n, Logits: j.mode}}})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, lg...)
				alone = append(alone, stateOf(t, s))
			}
			b := &model.Batch{}
			var seqs []*cache.Seq
			for _, j := range jobs {
				s := prep(j.past)
				seqs = append(seqs, s)
				b.Spans = append(b.Spans, model.Span{Seq: s, Start: len(b.Tokens), Len: j.n, Logits: j.mode})
				b.Tokens = append(b.Tokens, ids[j.past:j.past+j.n]...)
			}
			got, err := m.Forward(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if !bitsEqual(got, want) {
				t.Errorf("batched logits differ by %g", maxAbsDiff(got, want))
			}
			for i := range jobs {
				if !stateOf(t, seqs[i]).same(alone[i]) {
					t.Errorf("span %d: batched state differs", i)
				}
			}
		})
	}
}

// TestRollbackRefeed: a speculative feed rolled back to its first keep
// tokens (the cache restores the recurrent state to before the feed and
// says to feed the kept tokens again) ends in the bits of feeding only the
// kept tokens, logits of the refeed included.
func TestRollbackRefeed(t *testing.T) {
	for _, name := range goldenCases {
		m, c := loadCase(t, name)
		ids := c.InputIDs
		pool := testPool(t, m, len(ids), 2)
		const start, n = 70, 5
		for keep := range n + 1 {
			plain := newSeq(t, m, pool)
			feedSeq(t, m, plain, ids, []int{start})
			spec, err := plain.Fork()
			if err != nil {
				t.Fatal(err)
			}
			var want []float32
			if keep > 0 {
				want = feedSeq(t, m, plain, ids[start:], []int{keep})
			}
			u, err := spec.Mark(n)
			if err != nil {
				t.Fatal(err)
			}
			// The drafts: the true tokens up to keep, then wrong ones.
			drafts := slices.Clone(ids[start : start+n])
			for i := keep; i < n; i++ {
				drafts[i] = (drafts[i] + 1) % int32(m.VocabSize())
			}
			feedSeq(t, m, spec, drafts, []int{n})
			refeed := u.Rollback(keep)
			if refeed != keep || spec.Len() != start {
				t.Fatalf("%s keep %d: rollback says refeed %d at Len %d, want %d at %d", name, keep, refeed, spec.Len(), keep, start)
			}
			var got []float32
			if refeed > 0 {
				got = feedSeq(t, m, spec, ids[start:], []int{refeed})
			}
			if !bitsEqual(got, want) || !stateOf(t, spec).same(stateOf(t, plain)) {
				t.Errorf("%s keep %d: rolled back and refed, logits (by %g) or state differ from feeding the kept tokens", name, keep, maxAbsDiff(got, want))
			}
			spec.Release()
			plain.Release()
		}
	}
}

// TestForwardRejects: bad batches fail before any state changes.
func TestForwardRejects(t *testing.T) {
	m, _ := loadCase(t, "qwen3.5/tiny")
	ctx := context.Background()
	pool := testPool(t, m, 4, 2)
	s := newSeq(t, m, pool)
	before := stateOf(t, s)
	for name, b := range map[string]*model.Batch{
		"no sequence":    {Tokens: []int32{1}, Spans: []model.Span{{Len: 1}}},
		"twice":          {Tokens: []int32{1, 2}, Spans: []model.Span{{Seq: s, Len: 1}, {Seq: s, Start: 1, Len: 1}}},
		"gap":            {Tokens: []int32{1, 2}, Spans: []model.Span{{Seq: s, Start: 1, Len: 1}}},
		"uncovered":      {Tokens: []int32{1, 2}, Spans: []model.Span{{Seq: s, Len: 1}}},
		"out of vocab":   {Tokens: []int32{320}, Spans: []model.Span{{Seq: s, Len: 1}}},
		"negative token": {Tokens: []int32{-1}, Spans: []model.Span{{Seq: s, Len: 1}}},
		"no mtp":         {Tokens: []int32{1}, Spans: []model.Span{{Seq: s, Len: 1, Draft: s}}},
	} {
		if _, err := m.Forward(ctx, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if s.Len() != 0 || !stateOf(t, s).same(before) {
		t.Error("a rejected batch changed the state")
	}
}
