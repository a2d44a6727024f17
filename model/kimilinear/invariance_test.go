package kimilinear

import (
	"context"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestPathsBitIdentical: one full pass, one-token decode, uneven chunks
// (crossing 64-token boundaries and not) and a batch that interleaves two
// sequences' chunks give the same logits bit for bit, with f32 and bf16
// caches: every op is batch-invariant, the delta rule runs token by token
// on every path, and this step's latents and conv inputs go through the
// cache's format before they are read.
func TestPathsBitIdentical(t *testing.T) {
	dir := caseDir("kimi-linear/tiny")
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := c.InputIDs[:90]
	other := c.InputIDs[110:170]
	for _, dt := range []cache.DType{cache.F32, cache.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			m, err := Load(dir, cpu.New(0), model.Options{CacheDType: dt})
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
	m, err := Load(caseDir("kimi-linear/tiny"), cpu.New(1), model.Options{})
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
		"token outside the vocabulary": {Tokens: []int32{1, 192}, Spans: []model.Span{{Seq: seq, Len: 2}}},
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

// TestCounts: the decode read and prefill arithmetic counts grow with the
// context as their definitions say: the MLA latents per token, the KDA
// state and conv history twice (read and written back), attention
// quadratic in the prompt.
func TestCounts(t *testing.T) {
	m, err := Load(caseDir("kimi-linear/tiny"), cpu.New(1), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w1, kv1 := m.DecodeReadBytes(1)
	w2, kv2 := m.DecodeReadBytes(101)
	// 2 MLA layers of 40 f32 values per token.
	if w1 != w2 || kv2-kv1 != 100*2*40*4 {
		t.Errorf("decode reads: weights %d then %d, cache %d then %d", w1, w2, kv1, kv2)
	}
	if fixed := int64(2 * (6*4*16*16*4 + 6*3*192*4)); kv1 != fixed+2*40*4 {
		t.Errorf("decode reads %d cache bytes at one token, want %d", kv1, fixed+2*40*4)
	}
	if f1, f2 := m.PrefillFLOPs(10), m.PrefillFLOPs(20); !(f2 > 2*f1-2*float64(m.W.Output.Rows*m.W.Output.Cols)) {
		t.Errorf("prefill FLOPs %g at 10, %g at 20", f1, f2)
	}
}
