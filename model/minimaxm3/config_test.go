package minimaxm3

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigTiny: the reference case's config resolves as the spec's §8
// describes it.
func TestConfigTiny(t *testing.T) {
	c, err := LoadConfig(filepath.Join(caseDir("minimax-m3/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Sparse, []bool{false, true, true, false, true, true}) || !slices.Equal(c.MoE, []bool{false, true, true, true, true, true}) {
		t.Fatalf("layers: sparse %v, MoE %v", c.Sparse, c.MoE)
	}
	want := Config{VocabSize: 256, Hidden: 64, Sparse: c.Sparse, MoE: c.MoE, Heads: 8, KVHeads: 2, HeadDim: 16, RopeDim: 8, RopeTheta: 5e6,
		IndexHeads: 2, IndexDim: 16, IndexBlock: 16, IndexTopK: 4, IndexLocal: 1, DenseInter: 128, MoEInter: 16, SharedInter: 16,
		Experts: 8, ExpertsPerTok: 2, RoutedScale: 2, SwigluAlpha: 1.702, SwigluLimit: 1.5, RMSEps: 1e-6, MaxPosition: 4096, BOS: -1, EOS: []int{}}
	if !configEqual(c, &want) {
		t.Fatalf("config\n%+v\nwant\n%+v", *c, want)
	}
}

func configEqual(a, b *Config) bool {
	x, y := *a, *b
	if !slices.Equal(x.Sparse, y.Sparse) || !slices.Equal(x.MoE, y.MoE) || !slices.Equal(x.EOS, y.EOS) {
		return false
	}
	x.Sparse, x.MoE, x.EOS, y.Sparse, y.MoE, y.EOS = nil, nil, nil, nil, nil, nil
	return fmt.Sprintf("%+v", x) == fmt.Sprintf("%+v", y)
}

// TestConfigHub: the Hub's multimodal spelling (text under text_config,
// sparse_attention_config, moe_layer_freq, flat rope fields) resolves to
// the same fields as transformers maps it to.
func TestConfigHub(t *testing.T) {
	c, err := LoadConfig(filepath.Join("testdata", "hub-small-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Multimodal || !slices.Equal(c.Sparse, []bool{false, true, true, false}) || !slices.Equal(c.MoE, []bool{false, true, true, true}) ||
		c.IndexHeads != 2 || c.IndexDim != 16 || c.IndexBlock != 16 || c.IndexTopK != 4 || c.IndexLocal != 1 || c.RopeDim != 8 || c.RopeTheta != 5e6 ||
		c.DenseInter != 96 || c.BOS != -1 || len(c.EOS) != 0 {
		t.Fatalf("config %+v", *c)
	}
}

// TestConfigDefaults: a config naming nothing but its type has the
// released model's shapes (transformers' defaults), every layer full
// attention and MoE as the reference resolves absent layer lists.
func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "minimax_m3_vl_text"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.NumLayers() != 60 || c.Hidden != 6144 || c.Heads != 64 || c.KVHeads != 4 || c.HeadDim != 128 || c.RopeDim != 64 ||
		c.VocabSize != 200064 || c.BOS != 200034 || !slices.Equal(c.EOS, []int{200020}) || len(c.SparseLayers()) != 0 || slices.Contains(c.MoE, false) {
		t.Fatalf("config %+v", *c)
	}
}

// TestConfigErrors: every problem of a config is reported, in one error.
func TestConfigErrors(t *testing.T) {
	bad := `{"model_type": "minimax_m3_vl_text", "vocab_size": 0, "hidden_size": 64, "num_hidden_layers": 3,
	  "num_attention_heads": 6, "num_key_value_heads": 4, "head_dim": 16, "index_n_heads": 4, "index_head_dim": 2,
	  "index_topk_blocks": 2, "index_local_blocks": 3, "num_local_experts": 2, "num_experts_per_tok": 3,
	  "layer_types": ["full_attention", "sliding_attention", "minimax_m3_sparse"], "mlp_layer_types": ["dense", "sparse"],
	  "scoring_func": "softmax", "use_gemma_norm": false, "swiglu_limit": -1, "rms_norm_eps": "x"}`
	if _, err := ParseConfig([]byte(bad)); err == nil || !strings.Contains(err.Error(), "rms_norm_eps") {
		t.Fatalf("a string eps: %v", err)
	}
	bad = strings.Replace(bad, `"rms_norm_eps": "x"`, `"rms_norm_eps": 0, "eos_token_id": 300000,
	  "rope_parameters": {"rope_type": "yarn", "partial_rotary_factor": 0.1875}`, 1)
	_, err := ParseConfig([]byte(bad))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"vocab_size 0", "not a multiple of num_key_value_heads 4", "index_n_heads 4 does not divide", "index_head_dim 2 is narrower",
		"index_local_blocks 3 exceeds index_topk_blocks 2", "num_experts_per_tok 3 exceeds", "layer_types[1] \"sliding_attention\"",
		"mlp_layer_types has 2 entries for 3 layers", "scoring_func \"softmax\"", "use_gemma_norm false", "swiglu_limit -1",
		"rms_norm_eps 0", "rope_type \"yarn\"", "the rotated width 3", "eos_token_id 300000",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q:\n%v", want, err)
		}
	}
	for name, cfg := range map[string]string{
		"trailing data":       `{"model_type": "minimax_m3_vl_text"} {}`,
		"not a MiniMax type":  `{"model_type": "llama"}`,
		"bad architectures":   `{"architectures": ["LlamaForCausalLM"], "model_type": "minimax_m3_vl_text"}`,
		"bad text_config":     `{"model_type": "minimax_m3_vl", "text_config": [1]}`,
		"legacy disagreement": `{"index_block_size": 16, "sparse_attention_config": {"sparse_block_size": 32}}`,
		"too many layers":     `{"num_hidden_layers": 100000}`,
		"bad sparse freq":     `{"num_hidden_layers": 2, "sparse_attention_config": {"sparse_attention_freq": [0, 2]}}`,
	} {
		if _, err := ParseConfig([]byte(cfg)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts is a
// configuration the model can size its weights, cache and ops from.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{filepath.Join(caseDir("minimax-m3/tiny"), "config.json"), filepath.Join("testdata", "hub-small-config.json")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"text_config": null}`))
	f.Add([]byte(`{"num_hidden_layers": 1, "layer_types": ["minimax_m3_sparse"], "index_local_blocks": 0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		n := c.NumLayers()
		if n <= 0 || len(c.MoE) != n || c.Hidden <= 0 || c.VocabSize <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 ||
			c.HeadDim <= 0 || c.RopeDim <= 0 || c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim || !(c.RMSEps > 0) || c.MaxPosition <= 0 ||
			c.Experts <= 0 || c.ExpertsPerTok <= 0 || c.ExpertsPerTok > c.Experts || c.MoEInter <= 0 || c.SharedInter <= 0 || c.DenseInter <= 0 {
			t.Fatalf("accepted an unusable config: %+v", *c)
		}
		if len(c.SparseLayers()) > 0 && (c.IndexHeads <= 0 || c.Heads%c.IndexHeads != 0 || c.IndexDim < c.RopeDim || c.IndexBlock <= 0 ||
			c.IndexTopK <= 0 || c.IndexLocal < 0 || c.IndexLocal > c.IndexTopK) {
			t.Fatalf("accepted an unusable indexer: %+v", *c)
		}
		if c.BOS >= c.VocabSize || slices.ContainsFunc(c.EOS, func(e int) bool { return e < 0 || e >= c.VocabSize }) {
			t.Fatalf("token ids outside the vocabulary: %+v", *c)
		}
	})
}
