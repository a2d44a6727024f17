package deepseekv32

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/dsa"
)

// hubConfigPath is the released model's Hub config.json (written from its
// values: the plan preset's input).
var hubConfigPath = filepath.Join("..", "..", "plan", "configs", "DeepSeek-V3.2.json")

func rawConfig(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConfigTiny: the golden case's save_pretrained config (transformers
// 5 spelling: rope_parameters, mlp_layer_types, layer_types).
func TestConfigTiny(t *testing.T) {
	c, err := LoadConfig(filepath.Join(caseDir("deepseek-v3.2/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hidden != 64 || c.NumLayers != 4 || c.Heads != 4 || c.QLoraRank != 48 || c.KVLoraRank != 32 || c.NopeDim != 16 || c.RopeDim != 8 || c.VDim != 16 {
		t.Errorf("shapes %+v", c)
	}
	if c.IndexHeads != 16 || c.IndexDim != 16 || c.IndexTopK != 16 || c.IndexerRope != dsa.Half {
		t.Errorf("indexer %d x %d top %d %v", c.IndexHeads, c.IndexDim, c.IndexTopK, c.IndexerRope)
	}
	if !slices.Equal(c.Dense, []bool{true, false, false, false}) || !slices.Equal(c.FullIndexer, []bool{true, true, true, true}) {
		t.Errorf("layers: dense %v, full indexer %v", c.Dense, c.FullIndexer)
	}
	if c.Experts != 16 || c.ExpertsPerTok != 4 || c.Groups != 4 || c.TopGroups != 2 || c.SharedExperts != 1 || c.MoEInter != 8 || !c.NormTopK || c.RoutedScale != 2.5 {
		t.Errorf("moe %+v", c)
	}
	if y := c.Yarn; y == nil || y.Factor != 4 || y.OriginalMax != 64 || y.BetaFast != 32 || y.BetaSlow != 1 || y.MscaleAllDim != 1 {
		t.Errorf("yarn %+v", c.Yarn)
	}
	// scale = (16+8)^-1/2 · m², m = 0.1·ln 4 + 1.
	m := 0.1*0.6931471805599453*2 + 1
	if got, want := c.SoftmaxScale(), 1/4.898979485566356*m*m; got-want > 1e-15 || want-got > 1e-15 {
		t.Errorf("softmax scale %v, want %v", got, want)
	}
}

// TestConfigHub: the released model's Hub config (legacy rope_scaling
// with "type", top-level rope_theta, first_k_dense_replace, FP8
// quantization) resolves to the released shapes, and its cache kinds are
// the handbook's 656 + 132 bytes per layer and token in FP8.
func TestConfigHub(t *testing.T) {
	c, err := LoadConfig(hubConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumLayers != 61 || c.Hidden != 7168 || c.Heads != 128 || c.KVLoraRank != 512 || c.RopeDim != 64 || c.MaxPosition != 163840 || c.MTPLayers != 1 {
		t.Errorf("shapes %+v", c)
	}
	if !slices.Equal(c.Dense[:4], []bool{true, true, true, false}) || slices.Contains(c.Dense[3:], true) {
		t.Errorf("dense layers %v", c.Dense)
	}
	if y := c.Yarn; y == nil || y.Factor != 40 || y.OriginalMax != 4096 || c.RopeTheta != 10000 {
		t.Errorf("rope %g, yarn %+v", c.RopeTheta, c.Yarn)
	}
	if !slices.Equal(c.FP8Block, []int{128, 128}) {
		t.Errorf("fp8 block %v", c.FP8Block)
	}
	want := map[cache.DType][2]int{cache.F32: {576 * 4, 128 * 4}, cache.BF16: {576 * 2, 128 * 2}, cache.FP8: {656, 132}}
	for dt, w := range want {
		specs := c.CacheSpecs(dt)
		if len(specs) != 2 || specs[0].SlotBytes != w[0] || specs[1].SlotBytes != w[1] || len(specs[0].Layers) != 61 || len(specs[1].Layers) != 61 {
			t.Errorf("%v: specs %+v", dt, specs)
		}
	}
}

// TestConfigErrors: every problem of a config is reported at once, each
// saying what is wrong.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   []string
	}{
		{"several at once", func(m map[string]any) {
			m["qk_rope_head_dim"] = 7
			m["n_group"] = 3
			m["hidden_act"] = "gelu"
		}, []string{"qk_rope_head_dim 7 must be even", "n_routed_experts 256 is not a multiple of n_group 3", `hidden_act "gelu"`}},
		{"kv heads", func(m map[string]any) { m["num_key_value_heads"] = 1 }, []string{"num_key_value_heads 1 differs"}},
		{"topk experts", func(m map[string]any) { m["num_experts_per_tok"] = 200 }, []string{"num_experts_per_tok 200 exceeds the 128 experts"}},
		{"groups", func(m map[string]any) { m["topk_group"] = 9 }, []string{"topk_group 9 exceeds n_group 8"}},
		{"q lora", func(m map[string]any) { m["q_lora_rank"] = nil }, []string{"q_lora_rank null"}},
		{"mlp types", func(m map[string]any) { m["mlp_layer_types"] = []string{"dense", "moe"} }, []string{"mlp_layer_types has 2 entries", `mlp_layer_types[1] is "moe"`}},
		{"shared indexers", func(m map[string]any) {
			types := make([]string, 61)
			for i := range types {
				types[i] = "full"
			}
			types[5] = "shared"
			m["indexer_types"] = types
		}, []string{"shared indexer layers are not part of this family"}},
		{"yarn factor", func(m map[string]any) {
			m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 40, "mscale": 0.5, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}
		}, []string{"attention factor"}},
		{"yarn missing", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 40} }, []string{"original_max_position_embeddings is missing"}},
		{"rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "longrope"} }, []string{`rope type "longrope"`}},
		{"both rope spellings", func(m map[string]any) { m["rope_parameters"] = map[string]any{"rope_type": "default"} }, []string{"both rope_parameters and rope_scaling"}},
		{"model type", func(m map[string]any) { m["model_type"] = "glm_moe_dsa" }, []string{`model_type "glm_moe_dsa" is not deepseek-v3.2`}},
		{"quant", func(m map[string]any) { m["quantization_config"] = map[string]any{"quant_method": "awq"} }, []string{`quant_method "awq"`}},
		{"scoring", func(m map[string]any) { m["scoring_func"] = "softmax" }, []string{`scoring_func "softmax"`}},
		{"eos", func(m map[string]any) { m["eos_token_id"] = 200000 }, []string{"eos_token_id 200000 is outside"}},
		{"index dim", func(m map[string]any) { m["index_head_dim"] = 32 }, []string{"index_head_dim 32 is narrower"}},
		{"wrong json type", func(m map[string]any) { m["hidden_size"] = "big" }, []string{"hidden_size"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := rawConfig(t, hubConfigPath)
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

// FuzzParseConfig: the parser never panics, and a config it accepts is
// consistent enough to size caches and bind weights against.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{hubConfigPath, filepath.Join(caseDir("deepseek-v3.2/tiny"), "config.json")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"num_hidden_layers":2,"mlp_layer_types":["dense"],"n_group":0}`))
	f.Add([]byte(`{"rope_scaling":{"type":"yarn","factor":-1,"original_max_position_embeddings":0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		checkAccepted(t, c)
	})
}

// checkAccepted checks what every accepted config must satisfy.
func checkAccepted(t *testing.T, c *dsa.Config) {
	t.Helper()
	if len(c.Dense) != c.NumLayers || len(c.FullIndexer) != c.NumLayers || !c.FullIndexer[0] || c.Hidden <= 0 || c.Heads <= 0 || c.RopeDim%2 != 0 || c.IndexDim < c.RopeDim {
		t.Fatalf("inconsistent accepted config %+v", c)
	}
	if slices.Contains(c.Dense, false) && (c.Groups <= 0 || c.Experts%c.Groups != 0 || c.TopGroups > c.Groups || c.ExpertsPerTok > c.TopGroups*(c.Experts/c.Groups)) {
		t.Fatalf("inconsistent routing %+v", c)
	}
	for _, dt := range []cache.DType{cache.F32, cache.BF16, cache.FP8} {
		for _, s := range c.CacheSpecs(dt) {
			if s.SlotBytes <= 0 || s.SlotBytes%4 != 0 {
				t.Fatalf("%v: spec %+v", dt, s)
			}
		}
	}
	if s := c.SoftmaxScale(); !(s > 0) {
		t.Fatalf("softmax scale %g", s)
	}
}
