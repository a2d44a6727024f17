package gemma4

import (
	"context"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestPathsBitIdentical: one full pass, one-token decode, uneven chunks
// (longer than the window and not) and a batch that interleaves two
// sequences' chunks give the same logits bit for bit, with f32 and bf16
// caches: every op is batch-invariant and this step's keys and values go
// through the cache's format before attention reads them.
func TestPathsBitIdentical(t *testing.T) {
	dir := caseDir("gemma4/tiny")
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs[:90]
	other := c.InputIDs[110:170]
	for _, dt := range []cache.DType{cache.F32, cache.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			m, err := LoadWith(dir, cpu.New(0), model.Options{CacheDType: dt})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ctx := context.Background()
			full, err := golden.Feed(ctx, m, ids, []int{len(ids)})
			if err != nil {
				t.Fatal(err)
			}
			if dt == cache.BF16 {
				t.Logf("bf16 cache against the reference: max abs diff %.3g", golden.MaxAbsDiff(full, c.LogitsFull[:len(full)]))
			}
			for _, feeds := range [][]int{golden.DecodeFeeds(1, len(ids)), {30, 1, 2, 40, 17}, {23, 24, 25, 18}} {
				got, err := golden.Feed(ctx, m, ids, feeds)
				if err != nil {
					t.Fatal(err)
				}
				if d := golden.MaxAbsDiff(got, full); d != 0 {
					t.Fatalf("feeds %v: logits differ from one pass by %g", feeds, d)
				}
			}
			// Two sequences in one batch, chunks of different lengths.
			pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), len(ids), 2)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := m.NewSeq(pool)
			b, _ := m.NewSeq(pool)
			defer a.Release()
			defer b.Release()
			var gotA, gotB []float32
			steps := [][2]int{{7, 30}, {40, 1}, {1, 29}, {42, 0}}
			pa, pb := 0, 0
			for _, s := range steps {
				batch := &model.Batch{}
				if s[0] > 0 {
					batch.Tokens = append(batch.Tokens, ids[pa:pa+s[0]]...)
					batch.Spans = append(batch.Spans, model.Span{Seq: a, Start: 0, Len: s[0], Logits: model.AllLogits})
				}
				if s[1] > 0 {
					batch.Spans = append(batch.Spans, model.Span{Seq: b, Start: len(batch.Tokens), Len: s[1], Logits: model.AllLogits})
					batch.Tokens = append(batch.Tokens, other[pb:pb+s[1]]...)
				}
				lg, err := m.Forward(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				V := m.VocabSize()
				gotA = append(gotA, lg[:s[0]*V]...)
				gotB = append(gotB, lg[s[0]*V:]...)
				pa, pb = pa+s[0], pb+s[1]
			}
			if d := golden.MaxAbsDiff(gotA, full); d != 0 {
				t.Fatalf("batched: logits differ from one pass by %g", d)
			}
			alone, err := golden.Feed(ctx, m, other, []int{len(other)})
			if err != nil {
				t.Fatal(err)
			}
			if d := golden.MaxAbsDiff(gotB, alone); d != 0 {
				t.Fatalf("batched second sequence: logits differ from it alone by %g", d)
			}
		})
	}
}

// TestForwardRejects: batches the model cannot run fail before any state
// changes, with errors that say why.
func TestForwardRejects(t *testing.T) {
	m, err := Load(caseDir("gemma4/tiny"), cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := m.NewSeq(pool)
	defer seq.Release()
	ctx := context.Background()
	for name, b := range map[string]*model.Batch{
		"token outside the vocabulary": {Tokens: []int32{1, 500}, Spans: []model.Span{{Seq: seq, Len: 2}}},
		"spans not tiling":             {Tokens: []int32{1, 2}, Spans: []model.Span{{Seq: seq, Len: 1}}},
		"no sequence":                  {Tokens: []int32{1}, Spans: []model.Span{{Len: 1}}},
		"draft state":                  {Tokens: []int32{1}, Spans: []model.Span{{Seq: seq, Len: 1, Draft: seq}}},
	} {
		if _, err := m.Forward(ctx, b); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if seq.Len() != 0 {
			t.Fatalf("%s: the sequence advanced to %d", name, seq.Len())
		}
	}
}
