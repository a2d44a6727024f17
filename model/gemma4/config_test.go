package gemma4

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/model"
)

// TestConfigTiny: the reference case's config resolves as the spec's §8
// describes it.
func TestConfigTiny(t *testing.T) {
	c, err := LoadConfig(filepath.Join(caseDir("gemma4/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	for _, l := range c.Layers {
		kinds = append(kinds, l.Kind)
	}
	S, F := Sliding, Full
	if !slices.Equal(kinds, []Kind{S, S, S, S, S, F, S, F}) {
		t.Fatalf("layer kinds %v", kinds)
	}
	for i, l := range c.Layers {
		want := Layer{Kind: kinds[i], HeadDim: 16, KVHeads: 2, Source: i, Intermediate: 64}
		if l.Kind == Full {
			want.HeadDim, want.KVHeads, want.KEqV = 64, 1, true
		}
		if i >= 6 {
			want.Shared, want.Intermediate = true, 128
			want.Source = map[int]int{6: 4, 7: 5}[i]
		}
		if l != want {
			t.Errorf("layer %d: %+v, want %+v", i, l, want)
		}
	}
	if c.Multimodal || c.Unified || c.Window != 24 || c.KVShared != 2 || c.PLE != 16 || c.PLEVocab != 192 || !c.MoE ||
		c.Experts != 4 || c.ExpertsPerTok != 2 || c.MoEInter != 16 || c.Softcap != 5 || !c.TieEmbeddings || c.BOS != 2 || !slices.Equal(c.EOS, []int{1}) {
		t.Fatalf("config %+v", c)
	}
	if r := c.Rope[Sliding]; r.Pairs != 8 || r.Dim != 16 || r.Theta != 1e4 {
		t.Errorf("sliding RoPE %+v", r)
	}
	if r := c.Rope[Full]; r.Pairs != 8 || r.Dim != 64 || r.Theta != 1e6 || r.Type != "proportional" {
		t.Errorf("full RoPE %+v (want 8 of 32 pairs: floor(0.25·64/2))", r)
	}
}

// TestConfigHub12B: the Hub config of Gemma 4 12B (written from its
// config.json's values) nests the text model under text_config and gives
// the full layers' heads as global_head_dim and num_global_key_value_heads.
func TestConfigHub12B(t *testing.T) {
	c, err := LoadConfig(filepath.Join("testdata", "hub-12b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Multimodal || !c.Unified || len(c.Layers) != 48 || c.Window != 1024 || c.Hidden != 3840 || c.Heads != 16 ||
		c.PLE != 0 || c.MoE || c.KVShared != 0 || c.Softcap != 30 || c.MaxPosition != 262144 {
		t.Fatalf("config %+v", c)
	}
	if n := len(c.LayersOf(Full)); n != 8 {
		t.Fatalf("%d full layers, want 8", n)
	}
	for i, l := range c.Layers {
		if l.Kind == Full && (l.HeadDim != 512 || l.KVHeads != 1 || !l.KEqV) || l.Kind == Sliding && (l.HeadDim != 256 || l.KVHeads != 8 || l.KEqV) || l.Shared {
			t.Fatalf("layer %d: %+v", i, l)
		}
	}
	if r := c.Rope[Full]; r.Pairs != 64 || r.Dim != 512 {
		t.Fatalf("full RoPE %+v, want 64 of 256 pairs", r)
	}
}

// TestConfigErrors: every problem of a config is reported, in one error.
func TestConfigErrors(t *testing.T) {
	bad := `{"model_type": "gemma4_text", "vocab_size": 0, "hidden_size": 64, "num_hidden_layers": 3,
	  "num_attention_heads": 3, "num_key_value_heads": 2, "head_dim": 15,
	  "hidden_activation": "silu", "attention_bias": true, "final_logit_softcapping": 0,
	  "layer_types": ["sliding_attention", "chunked_attention", "full_attention"],
	  "num_kv_shared_layers": 1, "enable_moe_block": true, "num_experts": 2, "top_k_experts": 3,
	  "use_bidirectional_attention": "all",
	  "rope_parameters": {"sliding_attention": {"rope_type": "yarn", "rope_theta": 10000},
	    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 1.5, "rope_theta": 1e6}}}`
	_, err := ParseConfig([]byte(bad))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"vocab_size 0", "intermediate_size is missing", "hidden_activation \"silu\"", "attention_bias",
		"final_logit_softcapping 0", "layer_types[1] \"chunked_attention\"", "moe_intermediate_size is missing",
		"top_k_experts 3 exceeds num_experts 2", "use_bidirectional_attention \"all\"", "head size 15 is odd",
		"not a multiple of its 2 KV heads", "rope_type \"yarn\"", "partial_rotary_factor 1.5",
		"layer 2 is KV-shared but no earlier non-shared layer is full_attention",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %q:\n%v", want, err)
		}
	}
	for name, cfg := range map[string]string{
		"trailing data":     `{"model_type": "gemma4_text"} {}`,
		"not a text type":   `{"model_type": "llama"}`,
		"bad architectures": `{"architectures": ["LlamaForCausalLM"], "model_type": "gemma4_text"}`,
		"bad text_config":   `{"model_type": "gemma4", "text_config": [1]}`,
	} {
		if _, err := ParseConfig([]byte(cfg)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts is a
// configuration the model can size its weights, cache and ops from.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{filepath.Join(caseDir("gemma4/tiny"), "config.json"), filepath.Join("testdata", "hub-12b-config.json")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range otherShapes {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"text_config": null}`))
	f.Add([]byte(`{"per_layer_config": {"0": {"head_dim": 0}}, "num_hidden_layers": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if len(c.Layers) == 0 || c.Hidden <= 0 || c.VocabSize <= 0 || c.Heads <= 0 || c.Window <= 0 || !(c.RMSEps > 0) || c.MaxPosition <= 0 {
			t.Fatalf("accepted an unusable config: %+v", *c)
		}
		if c.Layers[len(c.Layers)-1].Kind != Full {
			t.Fatalf("the last layer is not full attention: %+v", c.Layers)
		}
		for i, l := range c.Layers {
			if l.HeadDim <= 0 || l.HeadDim%2 != 0 || l.KVHeads <= 0 || c.Heads%l.KVHeads != 0 || l.Intermediate <= 0 {
				t.Fatalf("layer %d unusable: %+v", i, l)
			}
			s := c.Layers[l.Source]
			if l.Source > i || s.Shared || s.Kind != l.Kind || s.HeadDim != l.HeadDim || s.KVHeads != l.KVHeads {
				t.Fatalf("layer %d reads an unusable source %d: %+v", i, l.Source, s)
			}
			r, ok := c.Rope[l.Kind]
			if !ok || r.Dim != l.HeadDim || r.Pairs < 0 || 2*r.Pairs > r.Dim {
				t.Fatalf("layer %d: RoPE %+v", i, r)
			}
		}
		if c.MoE && (c.Experts <= 0 || c.ExpertsPerTok <= 0 || c.ExpertsPerTok > c.Experts || c.MoEInter <= 0) {
			t.Fatalf("accepted an unusable MoE config: %+v", *c)
		}
		if c.PLE < 0 || c.PLE > 0 && c.PLEVocab <= 0 {
			t.Fatalf("accepted unusable per-layer embeddings: %+v", *c)
		}
	})
}

// TestUnifiedRefused: a Gemma 4 Unified config is read (for planning) but
// not loaded.
func TestUnifiedRefused(t *testing.T) {
	c, err := LoadConfig(filepath.Join("testdata", "hub-12b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(c, nil, nil, model.Options{}); err == nil || !strings.Contains(err.Error(), "Unified") {
		t.Fatalf("a Unified config was loaded: %v", err)
	}
}
