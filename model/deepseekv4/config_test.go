package deepseekv4

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func goldenDir(name string) string {
	return filepath.Join("..", "..", "testdata", "golden", "deepseek-v4", name)
}

func TestConfigSpellings(t *testing.T) {
	tests := []struct {
		name     string
		kinds    []AttnKind
		rates    []int
		hash     []bool
		ropeDim  int
		fp8      bool
		window   int
		align    int
		topK     int
		expertDT string
	}{
		{"tiny", []AttnKind{CSA, HCA, Window, CSA, HCA, CSA}, []int{4, 16, 0, 4, 16, 4}, []bool{true, true, false, false, false, false}, 8, false, 16, 16, 4, ""},
		{"flash-ratios", []AttnKind{Window, Window, CSA, HCA, CSA, HCA}, []int{0, 0, 4, 128, 4, 128}, []bool{true, true, true, false, false, false}, 16, false, 128, 128, 64, ""},
		{"quantized", []AttnKind{Window, CSA, HCA, CSA}, []int{0, 4, 16, 4}, []bool{true, false, false, false}, 16, true, 16, 16, 4, "fp4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(filepath.Join(goldenDir(tc.name), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Layers) != len(tc.kinds) {
				t.Fatalf("%d layers, want %d", len(c.Layers), len(tc.kinds))
			}
			for i, l := range c.Layers {
				if l.Attn != tc.kinds[i] || l.Rate != tc.rates[i] || l.Hash != tc.hash[i] {
					t.Errorf("layer %d = %+v, want %v rate %d hash %v", i, l, tc.kinds[i], tc.rates[i], tc.hash[i])
				}
			}
			if c.RopeDim != tc.ropeDim {
				t.Errorf("rope dim %d, want %d", c.RopeDim, tc.ropeDim)
			}
			if (c.FP8Block != nil) != tc.fp8 {
				t.Errorf("fp8 block %v, want quantized=%v", c.FP8Block, tc.fp8)
			}
			if c.Window != tc.window || c.CompressAlign() != tc.align || c.IndexTopK != tc.topK || c.ExpertDType != tc.expertDT {
				t.Errorf("window %d align %d topk %d expert dtype %q", c.Window, c.CompressAlign(), c.IndexTopK, c.ExpertDType)
			}
			if c.Yarn == nil || c.Yarn.Factor != 16 || c.Yarn.OriginalMax != 65536 || c.Yarn.BetaFast != 32 || c.Yarn.BetaSlow != 1 {
				t.Errorf("yarn %+v", c.Yarn)
			}
			if c.RopeTheta != 10000 || c.CompressRopeTheta != 160000 {
				t.Errorf("rope thetas %g %g", c.RopeTheta, c.CompressRopeTheta)
			}
		})
	}
}

// hubConfig is a valid Hub-style config; tests mutate copies of it.
func hubConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir("quantized"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConfigMTPEntryAndReleasedRates(t *testing.T) {
	m := hubConfig(t)
	m["compress_ratios"] = []int{0, 4, 24, 4, 0} // N+1: the last is the MTP layer; 24 is an HCA rate
	m["num_nextn_predict_layers"] = 1
	b, _ := json.Marshal(m)
	c, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Layers) != 4 || c.Layers[2] != (LayerSpec{Attn: HCA, Rate: 24}) || len(c.MTP) != 1 {
		t.Fatalf("layers %+v mtp %+v", c.Layers, c.MTP)
	}
	if c.CompressAlign() != 24 {
		t.Errorf("align %d, want 24", c.CompressAlign())
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   []string // every fragment must appear in the error
	}{
		{"ratios length", func(m map[string]any) { m["compress_ratios"] = []int{0, 4} }, []string{"compress_ratios has 2 entries"}},
		{"negative ratio", func(m map[string]any) { m["compress_ratios"] = []int{0, 4, -3, 4} }, []string{"compress_ratios[2] is -3"}},
		{"missing and bad groups", func(m map[string]any) { delete(m, "hidden_size"); m["o_groups"] = 3 }, []string{"hidden_size is missing", "not a multiple of o_groups 3"}},
		{"spellings disagree", func(m map[string]any) {
			m["layer_types"] = []string{"sliding_attention", "compressed_sparse_attention", "compressed_sparse_attention", "compressed_sparse_attention"}
		}, []string{"layer 2: compress_ratios says hca rate 16 but layer_types says csa rate 4"}},
		{"unknown layer type", func(m map[string]any) {
			delete(m, "compress_ratios")
			m["layer_types"] = []string{"sliding_attention", "full_attention", "sliding_attention", "sliding_attention"}
		}, []string{`layer_types[1] is "full_attention"`}},
		{"hash layers", func(m map[string]any) { m["num_hash_layers"] = 9 }, []string{"num_hash_layers 9 is outside [0, 4]"}},
		{"kv heads", func(m map[string]any) { m["num_key_value_heads"] = 2 }, []string{"num_key_value_heads is 2"}},
		{"rope dims", func(m map[string]any) { m["qk_rope_head_dim"] = 7 }, []string{"rope dims 7 must be even"}},
		{"topk experts", func(m map[string]any) { m["num_experts_per_tok"] = 9 }, []string{"num_experts_per_tok 9 exceeds n_routed_experts 4"}},
		{"quant method", func(m map[string]any) { m["quantization_config"] = map[string]any{"quant_method": "gptq"} }, []string{`quant_method "gptq"`}},
		{"yarn", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 16} }, []string{"original_max_position_embeddings is missing"}},
		{"scoring", func(m map[string]any) { m["scoring_func"] = "relu" }, []string{`scoring_func "relu"`}},
		{"model type", func(m map[string]any) { m["model_type"] = "llama" }, []string{`model_type "llama"`}},
		{"wrong json type", func(m map[string]any) { m["hidden_size"] = "big" }, []string{"hidden_size"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := hubConfig(t)
			tc.mutate(m)
			b, _ := json.Marshal(m)
			_, err := ParseConfig(b)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, name := range []string{"tiny", "flash-ratios", "quantized"} {
		b, err := os.ReadFile(filepath.Join(goldenDir(name), "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"compress_ratios":[0,4,128],"num_hidden_layers":2}`))
	f.Add([]byte(`{"layer_types":["x"],"num_hidden_layers":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		// An accepted config is internally consistent.
		if len(c.Layers) != c.NumLayers || c.Hidden <= 0 || c.Heads%c.OGroups != 0 || c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim {
			t.Fatalf("inconsistent accepted config %+v", c)
		}
		for _, l := range c.Layers {
			if l.Attn != Window && l.Rate <= 0 {
				t.Fatalf("layer %+v", l)
			}
		}
		_ = c.CacheSpecs(0)
	})
}
