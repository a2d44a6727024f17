package qwen35

import (
	"context"
	"testing"

	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// stateDiff compares two states kind by kind: the largest difference of
// the keys and values, of the conv states and of the delta-rule states,
// relative to the largest value of the first.
func stateDiff(a, b *State) (kv, conv, delta float64) {
	rel := func(x, y []float32) float64 {
		if len(x) != len(y) {
			return 1
		}
		return maxAbsDiff(x, y) / max(maxAbs(x), 1e-30)
	}
	for i := range a.Layers {
		la, lb := &a.Layers[i], &b.Layers[i]
		kv = max(kv, rel(la.K, lb.K), rel(la.V, lb.V))
		conv = max(conv, rel(la.Conv, lb.Conv))
		delta = max(delta, rel(la.S, lb.S))
	}
	return
}

func sameState(a, b *State) bool {
	if a.Len != b.Len || len(a.Layers) != len(b.Layers) {
		return false
	}
	kv, conv, delta := stateDiff(a, b)
	return kv == 0 && conv == 0 && delta == 0
}

// TestStateAcrossFeeds compares the state a sequence ends with after one
// feed, token by token (after a prompt), and in the golden case's chunk
// sizes. The first layer's conv state sees only embeddings, so it is the
// same bits on every path; everything else agrees to float32 rounding of
// the delta rule's two forms.
func TestStateAcrossFeeds(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c, _ := loadCase(t, name)
			L := len(c.InputIDs)
			_, full := feed(t, m, c.InputIDs, []int{L})
			for _, p := range []struct {
				name  string
				feeds []int
			}{
				{"token by token", golden.DecodeFeeds(1, L)},
				{"prompt then tokens", golden.DecodeFeeds(c.Prompt, L)},
				{"chunked", c.Chunks},
			} {
				_, st := feed(t, m, c.InputIDs, p.feeds)
				if st.Len != L {
					t.Fatalf("%s: Len %d, want %d", p.name, st.Len, L)
				}
				if d := maxAbsDiff(st.Layers[0].Conv, full.Layers[0].Conv); d != 0 {
					t.Errorf("%s: layer 0 conv state differs by %g", p.name, d)
				}
				kv, conv, delta := stateDiff(full, st)
				t.Logf("%s: relative state differences: kv %.2g, conv %.2g, delta %.2g", p.name, kv, conv, delta)
				if kv > 1e-4 || conv > 1e-4 || delta > 1e-4 {
					t.Errorf("%s: state differs from one feed: kv %g, conv %g, delta %g", p.name, kv, conv, delta)
				}
			}
		})
	}
}

// TestStateRestoredFromCopy: a state copied mid-sequence and fed the rest
// gives the same bits, logits and state, as the original fed the same way;
// feeding the copy does not touch the original.
func TestStateRestoredFromCopy(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c, _ := loadCase(t, name)
			ids := c.InputIDs
			ctx := context.Background()
			for _, at := range []int{1, 64, 70, 130} {
				st := m.NewState()
				if _, err := m.Feed(ctx, st, ids[:at], model.NoLogits); err != nil {
					t.Fatal(err)
				}
				snap := st.Clone()
				before := snap.Clone()
				rest := []int{1, 29, 1, 39}
				var want, got []float32
				for _, run := range []struct {
					st  *State
					out *[]float32
				}{{st, &want}, {snap.Clone(), &got}} {
					pos := at
					for _, n := range rest {
						lg, err := m.Feed(ctx, run.st, ids[pos:pos+n], model.AllLogits)
						if err != nil {
							t.Fatal(err)
						}
						*run.out = append(*run.out, lg...)
						pos += n
					}
					if run.st != st && !sameState(run.st, st) {
						t.Errorf("at %d: restored state ends different from the original", at)
					}
				}
				if d := maxAbsDiff(got, want); d != 0 {
					t.Errorf("at %d: restored copy's logits differ by %g", at, d)
				}
				if !sameState(snap, before) {
					t.Errorf("at %d: feeding a clone changed the snapshot", at)
				}
			}
		})
	}
}

// TestAlignedFeedsBitIdentical: feeds split at multiples of the delta
// rule's chunk (what prefix snapshots at chunk-aligned positions and
// chunked prefill in multiples of 64 do) give the logits and state of one
// feed bit for bit.
func TestAlignedFeedsBitIdentical(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c, _ := loadCase(t, name)
			L := len(c.InputIDs)
			want, wantSt := feed(t, m, c.InputIDs, []int{L})
			for _, feeds := range [][]int{{64, L - 64}, {128, L - 128}, {64, 64, L - 128}} {
				got, st := feed(t, m, c.InputIDs, feeds)
				if d := maxAbsDiff(got, want); d != 0 {
					t.Errorf("feeds %v: logits differ from one feed by %g", feeds, d)
				}
				if !sameState(st, wantSt) {
					t.Errorf("feeds %v: state differs from one feed", feeds)
				}
			}
		})
	}
}

// TestBatchedBitIdentical: several sequences in one ragged batch (a
// prompt, a decode step and a mid-sequence chunk) give the same logits and
// states, bit for bit, as each run alone.
func TestBatchedBitIdentical(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c, _ := loadCase(t, name)
			ids := c.InputIDs
			ctx := context.Background()
			prep := func(n int) *State {
				st := m.NewState()
				if n > 0 {
					if _, err := m.Feed(ctx, st, ids[:n], model.NoLogits); err != nil {
						t.Fatal(err)
					}
				}
				return st
			}
			type job struct {
				past, n int
				mode    model.Logits
			}
			jobs := []job{{0, 23, model.AllLogits}, {40, 1, model.LastLogits}, {64, 70, model.AllLogits}, {7, 5, model.NoLogits}}
			var want []float32
			var alone []*State
			for _, j := range jobs {
				st := prep(j.past)
				lg, err := m.Feed(ctx, st, ids[j.past:j.past+j.n], j.mode)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, lg...)
				alone = append(alone, st)
			}
			b := &Batch{}
			var states []*State
			for _, j := range jobs {
				st := prep(j.past)
				states = append(states, st)
				b.Spans = append(b.Spans, Span{State: st, Start: len(b.Tokens), Len: j.n, Logits: j.mode})
				b.Tokens = append(b.Tokens, ids[j.past:j.past+j.n]...)
			}
			got, err := m.Forward(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(got, want); d != 0 {
				t.Errorf("batched logits differ by %g", d)
			}
			for i := range jobs {
				if !sameState(states[i], alone[i]) {
					t.Errorf("span %d: batched state differs", i)
				}
			}
		})
	}
}

// TestForwardRejects: bad batches fail before any state changes.
func TestForwardRejects(t *testing.T) {
	m, _, _ := loadCase(t, "qwen3.5/tiny")
	ctx := context.Background()
	st := m.NewState()
	other, _ := LoadConfig(caseDir("qwen3.5-moe/tiny") + "/config.json")
	otherSt := other.NewState()
	otherSt.Layers = otherSt.Layers[:3]
	for name, b := range map[string]*Batch{
		"no state":        {Tokens: []int32{1}, Spans: []Span{{Len: 1}}},
		"twice":           {Tokens: []int32{1, 2}, Spans: []Span{{State: st, Len: 1}, {State: st, Start: 1, Len: 1}}},
		"gap":             {Tokens: []int32{1, 2}, Spans: []Span{{State: st, Start: 1, Len: 1}}},
		"uncovered":       {Tokens: []int32{1, 2}, Spans: []Span{{State: st, Len: 1}}},
		"out of vocab":    {Tokens: []int32{320}, Spans: []Span{{State: st, Len: 1}}},
		"negative token":  {Tokens: []int32{-1}, Spans: []Span{{State: st, Len: 1}}},
		"foreign state":   {Tokens: []int32{1}, Spans: []Span{{State: otherSt, Len: 1}}},
		"beyond position": {Tokens: []int32{1}, Spans: []Span{{State: &State{Len: m.Cfg.MaxPosition, Layers: st.Layers}, Len: 1}}},
	} {
		if _, err := m.Forward(ctx, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if st.Len != 0 || !sameState(st, m.NewState()) {
		t.Error("a rejected batch changed the state")
	}
}
