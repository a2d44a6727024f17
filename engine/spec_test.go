package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/tokenizer"
)

// TestSpeculativeGreedyIdentical: greedy output with speculative decoding
// (MTP and n-gram drafters) equals plain decoding token for token, and every
// logit the target computed for a kept position matches plain decoding's,
// alone and in a batch; drafts are both accepted and rejected, across
// compression-window boundaries of every layer kind.
func TestSpeculativeGreedyIdentical(t *testing.T) {
	m := loadModel(t, "../../models/strata-kjv")
	tok, err := tokenizer.LoadDir(caseDir("../../models/strata-kjv"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{
		append([]int32{0}, tok.Encode("And God said, Let there be light: and there was light. And God saw the light", false)...),
		append([]int32{0}, tok.Encode("In the beginning was the Word, and the Word was with God,", false)...),
	}
	const n = 150 // passes HCA windows (128) and many CSA windows (4)
	run := func(method string, batch bool) ([][]int32, []map[int][]float32, Stats) {
		e, err := New(m, Config{MaxBatchTokens: 256, Pages: 600, EOS: -1, NoPrefixCache: true,
			Speculation: Speculation{Method: method, MaxDraft: 4, Fixed: true}})
		if err != nil {
			t.Fatal(err)
		}
		outs := make([][]int32, len(prompts))
		lgs := make([]map[int][]float32, len(prompts))
		var streams []*Stream
		for i, p := range prompts {
			lgs[i] = map[int][]float32{}
			s, err := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: n, OnLogits: capture(lgs[i])})
			if err != nil {
				t.Fatal(err)
			}
			if !batch {
				drain(t, e)
			}
			streams = append(streams, s)
		}
		drain(t, e)
		for i, s := range streams {
			outs[i], _ = collect(t, s)
		}
		return outs, lgs, e.Stats()
	}
	want, wantL, _ := run("", false)
	for _, method := range []string{SpecMTP, SpecNgram} {
		for _, batch := range []bool{false, true} {
			if raceDetector && !batch {
				continue // the batched run covers the same paths, and races
			}
			got, gotL, st := run(method, batch)
			for i := range prompts {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("%s batch=%v prompt %d: %v\nplain: %v", method, batch, i, got[i], want[i])
				}
				for p, w := range wantL[i] {
					if d := golden.MaxAbsDiff(gotL[i][p], w); d != 0 { // batch-invariant kernels: bit for bit
						t.Fatalf("%s batch=%v prompt %d position %d: logits differ by %g", method, batch, i, p, d)
					}
				}
			}
			rate := float64(st.SpecAccepted) / float64(max(1, st.SpecDrafted))
			t.Logf("%s batch=%v: %d verify steps, %d drafted, %d accepted (%.0f%%), %d steps in all", method, batch, st.SpecSteps, st.SpecDrafted, st.SpecAccepted, 100*rate, st.Steps)
			if st.SpecAccepted == 0 || st.SpecAccepted == st.SpecDrafted {
				t.Fatalf("%s: want both accepted and rejected drafts, got %d of %d", method, st.SpecAccepted, st.SpecDrafted)
			}
		}
	}
}

// TestSpeculativeOnTiny: n-gram speculation on a model whose windows and
// rates are small (window 16, rates 4 and 16), so that rejected drafts often
// cross compression-window and ring boundaries.
func TestSpeculativeOnTiny(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	p := append(prompt(20, 1, m.VocabSize()), prompt(20, 1, m.VocabSize())...) // repeats: n-gram drafts
	run := func(method string) []int32 {
		e, _ := New(m, Config{MaxBatchTokens: 64, Pages: 2000, PageBytes: 512, EOS: -1, Speculation: Speculation{Method: method, MaxDraft: 8, Fixed: true}})
		s, _ := e.Submit(context.Background(), Request{Prompt: p, MaxTokens: 80})
		drain(t, e)
		out, _ := collect(t, s)
		if method != "" && e.Stats().SpecDrafted == 0 {
			t.Fatal("nothing was drafted")
		}
		return out
	}
	if a, b := run(""), run(SpecNgram); !slices.Equal(a, b) {
		t.Fatalf("n-gram speculation %v, plain %v", b, a)
	}
}

// TestSpeculationNeedsMTP: asking for MTP drafts on a model without an MTP
// layer is an error at submission.
func TestSpeculationNeedsMTP(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	e := smallEngine(t, m, 100, 16)
	_, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 3, Speculation: &Speculation{Method: SpecMTP}})
	if err == nil {
		t.Fatal("MTP speculation accepted on a model without MTP")
	}
}
