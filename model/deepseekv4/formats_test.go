package deepseekv4

import (
	"context"
	"math"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestCacheFormats: with a bf16 or FP8 cache the full, decode and chunked
// paths still give bit-identical logits (a step reads its own KV through
// the cache's format, as later steps read it from the cache), and the
// lossy formats stay close to the f32 reference. It logs, per case and
// format, the max abs difference from the golden logits, the mean KL
// divergence from the f32 cache's distribution and the greedy agreement
// (the README's table).
func TestCacheFormats(t *testing.T) {
	for _, name := range []string{"deepseek-v4/flash-ratios", "deepseek-v4/quantized", "deepseek-v4-extra/hc3-csa8"} {
		c, err := golden.Load(caseDir(name))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		L, V := len(c.InputIDs), c.Vocab
		var ref []float32
		for _, dt := range []cache.DType{cache.F32, cache.BF16, cache.FP8} {
			m, err := LoadWith(caseDir(name), cpu.New(0), model.Options{CacheDType: dt})
			if err != nil {
				t.Fatal(err)
			}
			full, err := golden.Feed(ctx, m, c.InputIDs, []int{L})
			if err != nil {
				t.Fatal(err)
			}
			for pname, feeds := range map[string][]int{"decode": golden.DecodeFeeds(c.Prompt, L), "chunked": c.Chunks} {
				got, err := golden.Feed(ctx, m, c.InputIDs, feeds)
				if err != nil {
					t.Fatal(err)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(full[i]) {
						t.Fatalf("%s %v cache: %s path logit %d is %g, the full pass %g", name, dt, pname, i, got[i], full[i])
					}
				}
			}
			g, err := golden.Greedy(ctx, m, c.InputIDs[:c.Prompt], len(c.Greedy))
			if err != nil {
				t.Fatal(err)
			}
			m.Close()
			if dt == cache.F32 {
				ref = full
			}
			same := 0
			for i := range g {
				if g[i] == c.Greedy[i] {
					same++
				}
			}
			var kl float64
			agree := 0
			for p := range L {
				kl += klDiv(ref[p*V:(p+1)*V], full[p*V:(p+1)*V])
				if golden.Argmax(ref[p*V:(p+1)*V]) == golden.Argmax(full[p*V:(p+1)*V]) {
					agree++
				}
			}
			d := golden.MaxAbsDiff(full, c.LogitsFull)
			t.Logf("%-32s %-4v max abs diff %.3g, mean KL vs f32 %.3g, top-1 vs f32 %d/%d, greedy %d/%d", name, dt, d, kl/float64(L), agree, L, same, len(g))
			if dt == cache.F32 && d > golden.Tolerance {
				t.Errorf("%s: the f32 cache is %g from the reference", name, d)
			}
			// A format that decoded its slots wrongly would give a KL of
			// order 1 and agree on few positions; rounding gives far less.
			if dt != cache.F32 && (kl/float64(L) > 0.02 || agree < L*85/100) {
				t.Errorf("%s %v cache: mean KL %g, top-1 agreement %d/%d: beyond rounding of the cache", name, dt, kl/float64(L), agree, L)
			}
		}
	}
}

// klDiv is KL(p || q) of the softmaxes of two logit rows.
func klDiv(p, q []float32) float64 {
	lp, lq := logSoftmax64(p), logSoftmax64(q)
	var s float64
	for i := range lp {
		s += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return s
}

func logSoftmax64(row []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v) - mx - math.Log(s)
	}
	return out
}
