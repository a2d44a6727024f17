package minimaxm3

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestCacheFormats: with a bf16 cache the full, decode and chunked paths
// still give bit-identical logits (every step reads its own K, V and
// indexer keys back through the cache's format, as later steps do), and
// the bf16 cache stays close to the f32 one. It logs the max abs
// difference from the golden logits, the mean KL divergence from the f32
// cache's distribution, the top-1 agreement with it and the greedy
// agreement (the README's figures), for the golden case and for the same
// model with the MSA selection off (index_topk_blocks above the 13
// blocks). The random tiny model's block-score gaps are as small as
// 5.7e-5 (enough for float32, which the golden data was chosen for), so
// bf16 keys flip some choices, and a flipped block changes the attention
// far more than rounding does: the bound below holds the format's own
// rounding, measured with the selection off.
func TestCacheFormats(t *testing.T) {
	src := caseDir("minimax-m3/tiny")
	c, err := golden.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	allBlocks := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["index_topk_blocks"] = 16
	b, _ = json.Marshal(cfg)
	os.WriteFile(filepath.Join(allBlocks, "config.json"), b, 0o644)
	if err := os.Symlink(filepath.Join(mustAbs(t, src), "model.safetensors"), filepath.Join(allBlocks, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	L, V := len(c.InputIDs), c.Vocab
	for _, variant := range []struct {
		dir       string
		selection bool
	}{{src, true}, {allBlocks, false}} {
		var ref []float32
		for _, dt := range []cache.DType{cache.F32, cache.BF16} {
			m, err := LoadWith(variant.dir, cpu.New(0), model.Options{CacheDType: dt})
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
				if d := golden.MaxAbsDiff(got, full); d != 0 {
					t.Fatalf("%v cache: the %s path differs from the full pass by %g", dt, pname, d)
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
			kl /= float64(L)
			if variant.selection {
				d := golden.MaxAbsDiff(full, c.LogitsFull)
				t.Logf("%-4v max abs diff from the golden logits %.3g, mean KL vs f32 %.3g, top-1 vs f32 %d/%d, greedy %d/%d", dt, d, kl, agree, L, same, len(g))
				if dt == cache.F32 && d > c.Tolerance {
					t.Errorf("the f32 cache is %g from the reference", d)
				}
				continue
			}
			t.Logf("%-4v without selection: max abs diff from f32 %.3g, mean KL %.3g, top-1 %d/%d", dt, golden.MaxAbsDiff(full, ref), kl, agree, L)
			// bf16 rounds to 8 significant bits: a format that decoded its
			// slots wrongly would give a KL of order 1.
			if bound := map[cache.DType]float64{cache.F32: 0, cache.BF16: 1e-4}[dt]; kl > bound || agree < L*85/100 {
				t.Errorf("%v cache without selection: mean KL %g (bound %g), top-1 agreement %d/%d: beyond the format's rounding", dt, kl, bound, agree, L)
			}
		}
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
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
