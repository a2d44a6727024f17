package qwen35

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func caseDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

// TestConfigGoldenCases reads the two golden cases' text-only configs and
// checks every field the forward pass uses against the values written in
// their config.json files.
func TestConfigGoldenCases(t *testing.T) {
	full := []LayerKind{Linear, Linear, Linear, Full, Linear, Linear, Linear, Full}
	tests := []struct {
		dir  string
		want Config
	}{
		{"qwen3.5/tiny", Config{
			VocabSize: 320, Hidden: 64, Layers: full, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDim: 8,
			RopeTheta: 1e7, MRopeSection: []int{2, 1, 1}, MRopeInterleaved: true,
			LinKeyHeads: 2, LinValueHeads: 4, LinKeyDim: 16, LinValueDim: 16, ConvKernel: 4,
			Intermediate: 128, RMSEps: 1e-6, MaxPosition: 32768, BOS: -1,
		}},
		{"qwen3.5-moe/tiny", Config{
			MoE:       true,
			VocabSize: 224, Hidden: 64, Layers: full, Heads: 4, KVHeads: 2, HeadDim: 32, RopeDim: 8,
			RopeTheta: 1e7, MRopeSection: []int{2, 1, 1}, MRopeInterleaved: true,
			LinKeyHeads: 2, LinValueHeads: 4, LinKeyDim: 16, LinValueDim: 16, ConvKernel: 4,
			Experts: 8, ExpertsPerTok: 2, MoEInter: 16, SharedInter: 16, RMSEps: 1e-6, MaxPosition: 4096, BOS: -1,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			c, err := LoadConfig(filepath.Join(caseDir(tc.dir), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*c, tc.want) {
				t.Errorf("config\n got %+v\nwant %+v", *c, tc.want)
			}
			if got, want := c.ConvDim(), 2*2*16+4*16; got != want {
				t.Errorf("ConvDim %d, want %d", got, want)
			}
			if got := c.LayersOf(Full); !reflect.DeepEqual(got, []int{3, 7}) {
				t.Errorf("full layers %v", got)
			}
		})
	}
}

// TestConfigSpellings parses the Hub's multimodal config of Qwen3.5-0.8B
// and the same text model written as a text-only config: they must agree
// on everything but Multimodal.
func TestConfigSpellings(t *testing.T) {
	hub, err := os.ReadFile(filepath.Join("testdata", "hub-0.8b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig(hub)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(hub, &top); err != nil {
		t.Fatal(err)
	}
	var text map[string]any
	if err := json.Unmarshal(top["text_config"], &text); err != nil {
		t.Fatal(err)
	}
	text["architectures"] = []string{"Qwen3_5ForCausalLM"}
	flat, _ := json.Marshal(text)
	d, err := ParseConfig(flat)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Multimodal || d.Multimodal {
		t.Errorf("Multimodal %v / %v, want true / false", c.Multimodal, d.Multimodal)
	}
	d.Multimodal = true
	if !reflect.DeepEqual(c, d) {
		t.Errorf("spellings differ:\n hub %+v\ntext %+v", *c, *d)
	}
	// Values of the released 0.8B model (the handbook's example).
	if c.MoE || c.Hidden != 1024 || len(c.Layers) != 24 || len(c.LayersOf(Full)) != 6 || c.KVHeads != 2 || c.HeadDim != 256 ||
		c.RopeDim != 64 || c.LinValueHeads != 16 || c.LinKeyDim != 128 || c.ConvDim() != 6144 || !c.TieEmbeddings ||
		c.MTPLayers != 1 || c.MaxPosition != 262144 || !reflect.DeepEqual(c.EOS, []int{248044}) {
		t.Errorf("0.8B config %+v", *c)
	}
}

// TestConfigDefaults: without layer_types, every full_attention_interval-th
// layer is full (default 4), as transformers builds them; head_dim,
// partial_rotary_factor and the conv kernel take the reference defaults.
func TestConfigDefaults(t *testing.T) {
	base := `{"model_type": "qwen3_5_text", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 6,
	  "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 16,
	  "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 4, "linear_value_head_dim": 4`
	c, err := ParseConfig([]byte(base + `}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []LayerKind{Linear, Linear, Linear, Full, Linear, Linear}
	if !reflect.DeepEqual(c.Layers, want) || c.HeadDim != 256 || c.RopeDim != 64 || c.ConvKernel != 4 || c.RopeTheta != 10000 || c.MoE {
		t.Errorf("defaults: %+v", *c)
	}
	c, err = ParseConfig([]byte(base + `, "full_attention_interval": 2, "head_dim": 16, "rope_theta": 5e5, "partial_rotary_factor": 0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	want = []LayerKind{Linear, Full, Linear, Full, Linear, Full}
	if !reflect.DeepEqual(c.Layers, want) || c.RopeDim != 8 || c.RopeTheta != 5e5 {
		t.Errorf("legacy spelling: %+v", *c)
	}
}

// TestConfigReportsEveryProblem: one error lists every problem.
func TestConfigReportsEveryProblem(t *testing.T) {
	cfg := `{"architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
	  "vocab_size": 10, "hidden_size": 0, "num_hidden_layers": 3,
	  "num_attention_heads": 3, "num_key_value_heads": 2, "head_dim": 6,
	  "linear_num_key_heads": 2, "linear_num_value_heads": 3, "linear_key_head_dim": 4, "linear_value_head_dim": 4,
	  "num_experts": 4, "num_experts_per_tok": 5, "moe_intermediate_size": 8,
	  "layer_types": ["linear_attention", "sliding_attention", "full_attention"],
	  "hidden_act": "gelu", "attention_bias": true, "eos_token_id": 99, "rms_norm_eps": -1,
	  "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}`
	_, err := ParseConfig([]byte(cfg))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"hidden_size must be positive, got 0",
		"shared_expert_intermediate_size is missing",
		"num_experts_per_tok 5 exceeds num_experts 4",
		"num_attention_heads 3 is not a multiple of num_key_value_heads 2",
		"linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2",
		`layer_types[1] is "sliding_attention"`,
		`hidden_act "gelu" is not supported`,
		"attention_bias true is not supported",
		"eos_token_id 99 is outside the vocabulary of 10",
		"rms_norm_eps must be positive",
		`rope type "yarn" is not supported`,
		"rotary dims 1 (head_dim 6",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestConfigRejects(t *testing.T) {
	for name, cfg := range map[string]string{
		"not qwen":            `{"model_type": "llama", "vocab_size": 1}`,
		"family disagreement": `{"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_moe_text"}`,
		"tie disagreement":    `{"model_type": "qwen3_5", "tie_word_embeddings": true, "text_config": {"tie_word_embeddings": false}}`,
		"bad json":            `{"vocab_size": "many"}`,
		"trailing":            `{} {}`,
		"layer count":         `{"num_hidden_layers": 2, "layer_types": ["full_attention"]}`,
		"interval mismatch":   `{"num_hidden_layers": 2, "full_attention_interval": 2, "layer_types": ["full_attention", "linear_attention"]}`,
		"dedicated mtp embed": `{"mtp_use_dedicated_embeddings": true}`,
		"too many layers":     `{"num_hidden_layers": 100000000}`,
	} {
		if _, err := ParseConfig([]byte(cfg)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts is a
// configuration the forward pass can size buffers from.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{
		filepath.Join(caseDir("qwen3.5/tiny"), "config.json"),
		filepath.Join(caseDir("qwen3.5-moe/tiny"), "config.json"),
		filepath.Join("testdata", "hub-0.8b-config.json"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"text_config": null}`))
	f.Add([]byte(`{"eos_token_id": [1, 2], "bos_token_id": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if len(c.Layers) == 0 || c.Hidden <= 0 || c.VocabSize <= 0 || c.HeadDim <= 0 || c.RopeDim <= 0 || c.RopeDim%2 != 0 ||
			c.Heads%c.KVHeads != 0 || c.LinValueHeads%c.LinKeyHeads != 0 || c.ConvKernel <= 0 || !(c.RMSEps > 0) {
			t.Fatalf("accepted an unusable config: %+v", *c)
		}
		if c.MoE && (c.ExpertsPerTok > c.Experts || c.MoEInter <= 0 || c.SharedInter <= 0) {
			t.Fatalf("accepted an unusable MoE config: %+v", *c)
		}
		if !c.MoE && c.Intermediate <= 0 {
			t.Fatalf("accepted a dense config without intermediate_size: %+v", *c)
		}
	})
}

// TestGenerationConfig: generation_config.json's BOS and EOS ids (a
// number or a list) override config.json's; absent fields and an absent
// file change nothing; ids outside the vocabulary are rejected.
func TestGenerationConfig(t *testing.T) {
	base := func() *Config { return &Config{VocabSize: 100, BOS: -1, EOS: []int{7}} }
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "generation_config.json")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := base()
	if err := c.applyGenerationConfig(filepath.Join(dir, "none.json")); err != nil || c.BOS != -1 || len(c.EOS) != 1 || c.EOS[0] != 7 {
		t.Fatalf("absent file: %v, %+v", err, c)
	}
	c = base()
	if err := c.applyGenerationConfig(write(`{"bos_token_id": 3, "eos_token_id": [9, 8], "temperature": 0.6}`)); err != nil || c.BOS != 3 || len(c.EOS) != 2 || c.EOS[0] != 9 {
		t.Fatalf("list: %v, %+v", err, c)
	}
	c = base()
	if err := c.applyGenerationConfig(write(`{"eos_token_id": null}`)); err != nil || c.EOS[0] != 7 {
		t.Fatalf("null: %v, %+v", err, c)
	}
	c = base()
	if err := c.applyGenerationConfig(write(`{"eos_token_id": 100}`)); err == nil {
		t.Fatal("an id outside the vocabulary was accepted")
	}
}
