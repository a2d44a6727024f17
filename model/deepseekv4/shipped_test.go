package deepseekv4

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// shippedDir is the model that ships in the repository (tools/train).
var shippedDir = filepath.Join("..", "..", "models", "strata-kjv")

// TestShippedGolden checks the shipped model against the reference logits
// transformers computed for it, along every path.
func TestShippedGolden(t *testing.T) {
	checkGolden(t, shippedDir, cpu.New(0))
}

// TestShippedMTP checks the MTP layer against the training code's MTP module
// on held-out text: main forward with the final streams kept, then the MTP
// layer over tokens 1.. with the streams of positions 0...
func TestShippedMTP(t *testing.T) {
	m, err := Load(shippedDir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f, err := safetensors.Open(filepath.Join(shippedDir, "mtp_golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idsT, _ := f.Tensor("input_ids")
	want, _ := f.Tensor("mtp_logits")
	ids64, err := idsT.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	wantL, err := want.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, len(ids64))
	for i, v := range ids64 {
		ids[i] = int32(v)
	}
	S := len(ids)
	pool, err := cache.PoolFor(m.Backend(), append(m.CacheSpecs(), m.MTPCacheSpecs()...), S, 1)
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := m.NewSeq(pool)
	mseq, err := cache.NewSeq(pool, m.DraftSpecs())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The main pass records its final streams in the draft state, where
	// the MTP layer reads them.
	b := &model.Batch{Tokens: ids, Spans: []model.Span{{Seq: seq, Len: S, Logits: model.NoLogits, Draft: mseq}}}
	if _, err := m.Forward(ctx, b); err != nil {
		t.Fatal(err)
	}
	mb := &model.Batch{Tokens: ids[1:], Spans: []model.Span{{Seq: mseq, Len: S - 1, Logits: model.AllLogits}}}
	got, err := m.Draft(ctx, mb)
	if err != nil {
		t.Fatal(err)
	}
	if d := golden.MaxAbsDiff(got, wantL); d > golden.Tolerance {
		t.Fatalf("MTP logits differ from the training code's by %g", d)
	} else {
		t.Logf("MTP logits: max abs diff %.3g over %d positions", d, S-1)
	}
}
