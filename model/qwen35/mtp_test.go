package qwen35

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// mtpShapes are random-weight models with an MTP module (the golden
// checkpoints have none): dense with a tied head, and MoE.
var mtpShapes = []naiveShape{
	{vocab: 97, d: 48, layers: []string{"linear_attention", "full_attention", "linear_attention"},
		hq: 4, hkv: 2, hd: 16, partial: 0.5, hk: 1, hv: 2, dk: 8, dv: 12, conv: 4, inter: 40, tied: true, mtp: true},
	{moe: true, vocab: 50, d: 32, layers: []string{"linear_attention", "full_attention"},
		hq: 2, hkv: 1, hd: 24, partial: 0.25, hk: 2, hv: 2, dk: 12, dv: 8, conv: 3, experts: 5, topk: 2, ie: 8, is: 12, mtp: true},
}

// TestMTP checks the MTP draft head. No reference computes Qwen3.5's MTP
// module here, so it is checked against the float64 evaluation of the
// structure read from vLLM (naiveMTP, which shares naiveForward's layer
// code, itself checked against the golden logits' model) and against its
// own token-by-token path: a catch-up pass over every position, and the
// same positions drafted one per pass as the main model records them,
// give the same bits; and drafting further from the MTP layer's own
// output matches the float64 evaluation too.
func TestMTP(t *testing.T) {
	ctx := context.Background()
	for i, s := range mtpShapes {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir, w := randomCheckpoint(t, s, uint64(10+i))
			m, err := Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if len(m.DraftSpecs()) == 0 {
				t.Fatal("no draft kinds for a checkpoint with an MTP module")
			}
			r := rand.New(rand.NewPCG(uint64(i), 7))
			const L = 40
			ids := make([]int32, L)
			for j := range ids {
				ids[j] = int32(r.IntN(s.vocab))
			}
			_, hidden := naiveForwardHidden(s, w, ids)
			want, wantOut := naiveMTP(s, w, hidden[:L-1], ids[1:])
			scale := 0.0
			for _, v := range want {
				scale = max(scale, math.Abs(v))
			}
			pool := testPool(t, m, L+2, 4)
			newDraft := func() *cache.Seq {
				d, err := cache.NewSeq(pool, m.DraftSpecs())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(d.Release)
				return d
			}

			// One forward over the sequence records the hidden states; one
			// catch-up pass drafts from every position.
			seq, draft := newSeq(t, m, pool), newDraft()
			if _, err := m.Forward(ctx, &model.Batch{Tokens: ids, Spans: []model.Span{{Seq: seq, Len: L, Logits: model.LastLogits, Draft: draft}}}); err != nil {
				t.Fatal(err)
			}
			got, err := m.Draft(ctx, &model.Batch{Tokens: ids[1:], Spans: []model.Span{{Seq: draft, Len: L - 1, Logits: model.AllLogits}}})
			if err != nil {
				t.Fatal(err)
			}
			d := 0.0
			for j := range want {
				d = max(d, math.Abs(float64(got[j])-want[j]))
			}
			t.Logf("catch-up over %d positions: max abs diff %.3g from float64 (logits up to %.3g)", L-1, d, scale)
			if d > 1e-4*max(scale, 1) {
				t.Errorf("MTP logits differ from the float64 evaluation by %.3g", d)
			}

			// Drafting further: from the MTP layer's own output at L-2,
			// with the draft it proposed.
			V := m.VocabSize()
			tok := golden.Argmax(got[(L-2)*V:])
			further, err := m.Draft(ctx, &model.Batch{Tokens: []int32{tok}, Spans: []model.Span{{Seq: draft, Len: 1, Logits: model.LastLogits}}})
			if err != nil {
				t.Fatal(err)
			}
			want2, _ := naiveMTP(s, w, append(hidden[:L-1:L-1], wantOut[L-2]), append(ids[1:L:L], tok))
			d = 0.0
			for j := range V {
				d = max(d, math.Abs(float64(further[j])-want2[(L-1)*V+j]))
			}
			if d > 1e-4*max(scale, 1) {
				t.Errorf("drafting from the MTP layer's own output differs from float64 by %.3g", d)
			}

			// Token by token: the main model fed a prompt then one token
			// per step, the MTP layer drafting after each as the engine
			// does: from every position the main model has computed, the
			// last with the token sampled after it (so its output stands
			// in for the hidden state of a position not yet computed).
			seq2, draft2 := newSeq(t, m, pool), newDraft()
			var steps []float32
			const prompt = 9
			for pos := 0; pos < L; {
				n := 1
				if pos == 0 {
					n = prompt
				}
				if _, err := m.Forward(ctx, &model.Batch{Tokens: ids[pos : pos+n], Spans: []model.Span{{Seq: seq2, Len: n, Logits: model.LastLogits, Draft: draft2}}}); err != nil {
					t.Fatal(err)
				}
				pos += n
				from, last := draft2.Len(), min(pos-1, L-2)
				if k := last - from + 1; k > 0 {
					lg, err := m.Draft(ctx, &model.Batch{Tokens: ids[from+1 : last+2], Spans: []model.Span{{Seq: draft2, Len: k, Logits: model.AllLogits}}})
					if err != nil {
						t.Fatal(err)
					}
					steps = append(steps, lg...)
				}
			}
			if !bitsEqual(steps, got) {
				t.Errorf("drafting position by position differs from one catch-up pass by %g", maxAbsDiff(steps, got))
			}
			a, b := stateOf(t, draft2), stateOf(t, draft)
			if !bitsEqual(a.kinds[KindMTPKV][0], b.kinds[KindMTPKV][0][:len(a.kinds[KindMTPKV][0])]) {
				t.Error("the MTP layer's keys and values differ between the two paths")
			}
		})
	}
}
