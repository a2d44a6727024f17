package deepseekv4

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// TestLoadDeep loads a 4-layer synthetic checkpoint as 7 layers (the last
// two repeated) and checks it against the same depth written out: a
// checkpoint whose layers 4-6 are copies of layers 2, 3, 2 under their own
// names, loaded by Load. Every logit of a prefill and of decode steps must
// have the same bits, every repeated matrix must be a matrix of its own
// (each made resident on its own), and bad depths must be refused.
func TestLoadDeep(t *testing.T) {
	m := hubConfig(t)
	m["num_nextn_predict_layers"] = 0
	cfgJSON, _ := json.Marshal(m)
	short := t.TempDir()
	if err := WriteSynthetic(short, cfgJSON, 3); err != nil {
		t.Fatal(err)
	}
	src := []int{0, 1, 2, 3, 2, 3, 2}
	full := writeRepeated(t, short, m, src)

	be := cpu.New(0)
	deep, err := LoadDeep(short, be, model.Options{}, len(src), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer deep.Close()
	ref, err := Load(full, be)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if len(deep.Cfg.Layers) != len(src) || deep.Cfg.NumLayers != len(src) {
		t.Fatalf("deep model has %d layers (NumLayers %d), want %d", len(deep.Cfg.Layers), deep.Cfg.NumLayers, len(src))
	}
	for i, s := range src {
		if deep.Cfg.Layers[i] != ref.Cfg.Layers[i] || deep.Cfg.Layers[i] != deep.Cfg.Layers[s] {
			t.Errorf("layer %d: spec %+v, the written checkpoint's %+v, its source's %+v", i, deep.Cfg.Layers[i], ref.Cfg.Layers[i], deep.Cfg.Layers[s])
		}
	}
	a, b := deep.W.Layers[4].Attn.WqB, deep.W.Layers[2].Attn.WqB
	if a == b || &a.Data[0] != &b.Data[0] {
		t.Errorf("layer 4's wq_b: the same matrix as layer 2's (%v) or other bytes (%v)", a == b, &a.Data[0] != &b.Data[0])
	}
	if e4, e2 := deep.W.Layers[6].FFN.Experts[1].W2, deep.W.Layers[2].FFN.Experts[1].W2; e4 == e2 {
		t.Error("layer 6's expert 1 is layer 2's matrix")
	}

	ctx := context.Background()
	run := func(mod *Model) [][]float32 {
		pool, err := cache.PoolFor(be, mod.CacheSpecs(), 64, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		seq, err := mod.NewSeq(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer seq.Release()
		var out [][]float32
		toks := []int32{5, 17, 200, 3, 99, 41, 7, 250, 11, 64, 128, 2, 300, 77, 19, 1, 8}
		lg, err := mod.Forward(ctx, &model.Batch{Tokens: toks, Spans: []model.Span{{Seq: seq, Len: len(toks), Logits: model.AllLogits}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg)
		for k := range 6 {
			lg, err := mod.Forward(ctx, &model.Batch{Tokens: []int32{int32(30 + 13*k)}, Spans: []model.Span{{Seq: seq, Len: 1, Logits: model.LastLogits}}})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, lg)
		}
		return out
	}
	got, want := run(deep), run(ref)
	for k := range want {
		for i := range want[k] {
			if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) || math.IsNaN(float64(want[k][i])) {
				t.Fatalf("call %d, logit %d: deep %g, written %g", k, i, got[k][i], want[k][i])
			}
		}
	}

	for _, c := range []struct {
		layers, period int
		want           string
	}{
		{3, 2, "fewer than"},
		{7, 0, "period"},
		{7, 5, "period"},
	} {
		if _, err := LoadDeep(short, be, model.Options{}, c.layers, c.period); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadDeep(%d layers, period %d): error %v, want one saying %q", c.layers, c.period, err, c.want)
		}
	}
}

// writeRepeated writes, beside the checkpoint in dir (WriteSynthetic's: a
// shard a layer), the checkpoint whose layer i is dir's layer src[i] under
// layer i's names, with config m deepened to match; it returns its folder.
func writeRepeated(t *testing.T, dir string, m map[string]any, src []int) string {
	out := t.TempDir()
	ratios := m["compress_ratios"].([]any)
	var deep []any
	for _, s := range src {
		deep = append(deep, ratios[s])
	}
	m["compress_ratios"], m["num_hidden_layers"] = deep, len(src)
	cfg, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(out, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	weightMap := map[string]string{}
	copyShard := func(from, to string, rename func(string) string) {
		f, err := safetensors.Open(filepath.Join(dir, from))
		if err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.WriteTensor
		for _, name := range f.Names() {
			x, _ := f.Tensor(name)
			ts = append(ts, safetensors.WriteTensor{Name: rename(name), DType: x.DType, Shape: x.Shape, Data: x.Data})
			weightMap[rename(name)] = to
		}
		if err := safetensors.WriteFile(filepath.Join(out, to), ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	same := func(s string) string { return s }
	copyShard("model-head.safetensors", "model-head.safetensors", same)
	for i, s := range src {
		from, to := fmt.Sprintf("layers.%d.", s), fmt.Sprintf("layers.%d.", i)
		copyShard(fmt.Sprintf("model-layer%03d.safetensors", s), fmt.Sprintf("model-layer%03d.safetensors", i),
			func(n string) string { return to + strings.TrimPrefix(n, from) })
	}
	idx, _ := json.Marshal(map[string]any{"weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(out, "model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
