package kimilinear

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
)

func tinyConfig(t testing.TB) []byte {
	b, err := os.ReadFile(filepath.Join(caseDir("kimi-linear/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseGolden: the golden case's config (save_pretrained spelling)
// resolves to the shapes of spec §9.
func TestParseGolden(t *testing.T) {
	c, err := ParseConfig(tinyConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	wantLayers := []LayerKind{KDA, KDA, KDA, MLA, KDA, KDA, KDA, MLA}
	if !slices.Equal(c.Layers, wantLayers) {
		t.Errorf("layers %v, want %v", c.Layers, wantLayers)
	}
	if !c.Dense[0] || slices.Contains(c.Dense[1:], true) {
		t.Errorf("dense %v, want layer 0 only", c.Dense)
	}
	got := []int{c.Hidden, c.VocabSize, c.LinHeads, c.LinHeadDim, c.ConvKernel, c.Heads, c.KVLoraRank, c.NopeDim, c.RopeDim, c.VDim, c.QLoraRank, c.Experts, c.ExpertsPerTok, c.SharedExperts, c.MoEInter, c.Groups, c.TopGroups, c.MaxPosition, c.BOS, len(c.EOS)}
	want := []int{64, 192, 4, 16, 4, 4, 32, 16, 8, 16, 0, 6, 2, 1, 16, 1, 1, 4096, -1, 0}
	if !slices.Equal(got, want) {
		t.Errorf("shapes %v, want %v", got, want)
	}
	if c.RoutedScale != 2.446 || !c.NormTopK || c.RMSEps != 1e-5 || c.TieEmbeddings {
		t.Errorf("scale %g renorm %v eps %g tie %v", c.RoutedScale, c.NormTopK, c.RMSEps, c.TieEmbeddings)
	}
}

// hubConfig is a config in the released checkpoints' spelling (shaped
// like Kimi-Linear-48B-A3B; the layer lists are this test's):
// linear_attn_config with 1-based layer lists, first_k_dense_replace, the
// router activation and mla_use_nope.
const hubConfig = `{
  "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
  "vocab_size": 163840, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 27,
  "first_k_dense_replace": 1, "moe_layer_freq": 1,
  "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128,
    "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26], "num_heads": 32, "short_conv_kernel_size": 4},
  "num_attention_heads": 32, "num_key_value_heads": 32, "kv_lora_rank": 512, "q_lora_rank": null,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": true,
  "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "moe_intermediate_size": 1024,
  "moe_renormalize": true, "moe_router_activation_func": "sigmoid", "routed_scaling_factor": 2.446,
  "num_expert_group": 1, "topk_group": 1, "rms_norm_eps": 1e-5, "model_max_length": 1048576,
  "bos_token_id": 163584, "eos_token_id": 163586, "tie_word_embeddings": false, "hidden_act": "silu",
  "num_nextn_predict_layers": 0, "rope_theta": 10000.0, "rope_scaling": null, "torch_dtype": "bfloat16"
}`

// TestParseHub: the released spelling, its 1-based lists turned into
// 0-based layer kinds, and its cache sized by CacheKinds.
func TestParseHub(t *testing.T) {
	c, err := ParseConfig([]byte(hubConfig))
	if err != nil {
		t.Fatal(err)
	}
	mla := c.LayersOf(MLA)
	if !slices.Equal(mla, []int{3, 7, 11, 15, 19, 23, 26}) || len(c.LayersOf(KDA)) != 20 {
		t.Fatalf("MLA layers %v, %d KDA", mla, len(c.LayersOf(KDA)))
	}
	if !c.Dense[0] || slices.Contains(c.Dense[1:], true) || c.LinHeads != 32 || c.LinHeadDim != 128 || c.BOS != 163584 || c.EOS[0] != 163586 || c.MaxPosition != 1<<20 {
		t.Fatalf("resolved %+v", c)
	}
	kinds, err := c.CacheKinds(cache.BF16)
	if err != nil {
		t.Fatal(err)
	}
	// 7 MLA layers of (512 + 64)·2 B per token; 20 KDA layers of 32 heads
	// of 128×128 f32, and 3 conv columns of 3·32·128 f32.
	got := map[string][3]int{}
	for _, k := range kinds {
		got[k.Name] = [3]int{len(k.Layers), k.SlotBytes, k.FixedSlots}
	}
	want := map[string][3]int{KindMLA: {7, 1152, 0}, KindState: {20, 65536, 32}, KindConv: {20, 49152, 3}}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("kind %s: %v, want %v", n, got[n], w)
		}
	}
}

// TestParseErrors: a malformed config reports every problem in one error.
func TestParseErrors(t *testing.T) {
	var m map[string]any
	json.Unmarshal(tinyConfig(t), &m)
	delete(m, "kv_lora_rank")
	m["model_type"] = "kimi"
	m["hidden_act"] = "gelu"
	m["layer_types"] = []string{"linear_attention", "sliding_attention"}
	m["num_experts_per_token"] = 9
	m["rms_norm_eps"] = -1
	m["eos_token_id"] = 500
	m["mla_use_nope"] = false
	b, _ := json.Marshal(m)
	_, err := ParseConfig(b)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, s := range []string{"kv_lora_rank is missing", `model_type "kimi"`, `hidden_act "gelu"`, "layer_types has 2 entries for 8 layers",
		`layer_types[1] "sliding_attention"`, "num_experts_per_token 9", "rms_norm_eps", "eos_token_id 500", "mla_use_nope"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q:\n%v", s, err)
		}
	}
	for _, bad := range []string{``, `[]`, `{"num_hidden_layers": -1}`, `{} {}`, `{"linear_attn_config": {"full_attn_layers": [0, 9]}, "num_hidden_layers": 8}`} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseConfig: no input makes the parser panic, and what it accepts
// is a usable model shape.
func FuzzParseConfig(f *testing.F) {
	f.Add(tinyConfig(f))
	f.Add([]byte(hubConfig))
	b, _ := json.Marshal(naiveConfig)
	f.Add(b)
	f.Add([]byte(`{"num_hidden_layers": 3, "linear_attn_config": {"kda_layers": [1, 1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if len(c.Layers) == 0 || len(c.Dense) != len(c.Layers) || c.Hidden <= 0 || c.VocabSize <= 0 || !(c.RMSEps > 0) || c.MaxPosition <= 0 {
			t.Fatalf("accepted an unusable config: %+v", *c)
		}
		if len(c.LayersOf(KDA)) > 0 && (c.LinHeads <= 0 || c.LinHeadDim <= 0 || c.ConvKernel <= 0) {
			t.Fatalf("unusable KDA shape: %+v", *c)
		}
		if len(c.LayersOf(MLA)) > 0 && (c.Heads <= 0 || c.KVLoraRank <= 0 || c.NopeDim <= 0 || c.RopeDim <= 0 || c.VDim <= 0) {
			t.Fatalf("unusable MLA shape: %+v", *c)
		}
		if slices.Contains(c.Dense, false) && (c.Experts <= 0 || c.ExpertsPerTok <= 0 || c.ExpertsPerTok > c.Experts || c.SharedExperts <= 0 || c.Groups <= 0 || c.Experts%c.Groups != 0 || c.TopGroups > c.Groups) {
			t.Fatalf("unusable MoE shape: %+v", *c)
		}
		if _, err := c.CacheKinds(cache.F32); err != nil {
			t.Fatal(err)
		}
	})
}
