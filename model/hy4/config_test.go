package hy4

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

func tinyConfig(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(caseDir("hy4/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parse(t *testing.T, m map[string]any) (*Config, error) {
	t.Helper()
	b, _ := json.Marshal(m)
	return ParseConfig(b)
}

// TestConfigTiny: the golden case's config, every field as spec §7 lists
// it, and its cache kinds.
func TestConfigTiny(t *testing.T) {
	c, err := parse(t, tinyConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hidden != 64 || c.VocabSize != 224 || c.NumLayers != 5 || c.Heads != 4 || c.QLoraRank != 48 || c.KVLoraRank != 32 ||
		c.NopeDim != 16 || c.RopeDim != 8 || c.VDim != 16 || c.IndexHeads != 16 || c.IndexDim != 16 || c.IndexTopK != 16 {
		t.Errorf("shapes %+v", c.Config)
	}
	if !slices.Equal(c.FullIndexer, []bool{true, true, false, false, false}) || !slices.Equal(c.Dense, []bool{true, false, false, false, false}) {
		t.Errorf("indexer %v, dense %v", c.FullIndexer, c.Dense)
	}
	if c.HCMult != 4 || c.HCMagnitude != 2 || c.HCEps != 1e-6 || c.SwigluLimit != 1.5 {
		t.Errorf("iHC %d %g %g, limit %g", c.HCMult, c.HCMagnitude, c.HCEps, c.SwigluLimit)
	}
	if c.Experts != 8 || c.ExpertsPerTok != 2 || c.SharedExperts != 1 || c.MoEInter != 16 || c.RoutedScale != 2.827 || !c.NormTopK || c.Groups != 1 {
		t.Errorf("MoE %+v", c.Config)
	}
	if c.Yarn != nil || c.RopeTheta != 10000 || c.RMSEps != 1e-5 || c.BOS != -1 || c.EOS != -1 || c.MaxPosition != 4096 {
		t.Errorf("rope %g %v, eps %g, bos %d eos %d, max %d", c.RopeTheta, c.Yarn, c.RMSEps, c.BOS, c.EOS, c.MaxPosition)
	}
	specs := c.CacheSpecs(cache.F32)
	if specs[0].Name != dsa.KindMLA || !slices.Equal(specs[0].Layers, []int{0, 1, 2, 3, 4}) || specs[0].SlotBytes != 40*4 ||
		specs[1].Name != dsa.KindIndexer || !slices.Equal(specs[1].Layers, []int{0, 1}) || specs[1].SlotBytes != 16*4 ||
		specs[0].Policy != cache.Append || specs[1].Policy != cache.Append {
		t.Errorf("specs %+v", specs)
	}
}

// TestConfigDefaults: an empty config (but for the context length, which
// has no known default) is the released model: spec §1's table, the
// default indexer pattern full at 0 and at every i with (i-1) % 4 == 0,
// layer 0 dense.
func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"model_type": "hy_v4", "max_position_embeddings": 8192}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Hidden != 2816 || c.NumLayers != 34 || c.Heads != 32 || c.QLoraRank != 1536 || c.KVLoraRank != 512 || c.NopeDim != 192 ||
		c.RopeDim != 64 || c.VDim != 256 || c.IndexHeads != 16 || c.IndexDim != 128 || c.IndexTopK != 2048 || c.HCMult != 4 ||
		c.HCMagnitude != 2 || c.HCEps != 1e-6 || c.Experts != 256 || c.ExpertsPerTok != 8 || c.SharedExperts != 1 ||
		c.MoEInter != 768 || c.RoutedScale != 2.827 || c.SwigluLimit != 10 || c.Intermediate != 6912 || c.RMSEps != 1e-5 ||
		c.RopeTheta != 10000 || c.VocabSize != 120832 {
		t.Errorf("defaults %+v", c)
	}
	var full []int
	for l, f := range c.FullIndexer {
		if f {
			full = append(full, l)
		}
	}
	if want := []int{0, 1, 5, 9, 13, 17, 21, 25, 29, 33}; !slices.Equal(full, want) {
		t.Errorf("full indexer layers %v, want %v", full, want)
	}
	if !c.Dense[0] || slices.Contains(c.Dense[1:], true) {
		t.Errorf("dense layers %v", c.Dense)
	}
	// 576 values per layer and token, 128 per full layer (spec §6).
	specs := c.CacheSpecs(cache.BF16)
	if specs[0].SlotBytes != 2*576 || specs[1].SlotBytes != 2*128 || len(specs[1].Layers) != 10 {
		t.Errorf("bf16 specs %+v", specs)
	}
}

// TestConfigErrors: every problem of a bad config is reported, in one
// error, dsa's shared fields and HY4's own alike.
func TestConfigErrors(t *testing.T) {
	m := tinyConfig(t)
	m["hc_mult"] = 0
	m["hc_magnitude"] = -1
	m["swiglu_limit"] = 0
	m["hc_eps"] = "x"
	_, err := parse(t, m)
	if err == nil || !strings.Contains(err.Error(), "hc_eps") {
		t.Fatalf("a string hc_eps: %v", err)
	}
	m["hc_eps"] = 0
	m["num_attention_heads"] = 0
	m["indexer_types"] = []string{"shared", "full", "full", "full", "full"}
	m["model_type"] = "glm_moe_dsa"
	delete(m, "max_position_embeddings")
	m["quantization_config"] = map[string]any{"quant_method": "fp8"}
	_, err = parse(t, m)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"hc_mult 0", "hc_magnitude must be positive", "swiglu_limit 0", "hc_eps must be positive", "num_attention_heads must be positive",
		"indexer_types[0] is shared", `model_type "glm_moe_dsa"`, "max_position_embeddings is missing", "quantization_config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	t.Log(err)
	for name, bad := range map[string]string{
		"not JSON":       `{"hc_mult": `,
		"trailing data":  `{"max_position_embeddings": 64} {}`,
		"GLM-5 spelling": `{"max_position_embeddings": 64, "index_topk_pattern": "FSF"}`,
		"MTP layers":     `{"max_position_embeddings": 64, "num_nextn_predict_layers": 1}`,
	} {
		if _, err := ParseConfig([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestConfigDerived: num_key_value_heads and head_dim are derived, as
// HYV4Config derives them (every head reads the latent; head_dim is
// qk_rope_head_dim): other values in config.json are ignored.
func TestConfigDerived(t *testing.T) {
	m := tinyConfig(t)
	m["num_key_value_heads"] = 1
	m["head_dim"] = 24
	c, err := parse(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Heads != 4 || c.RopeDim != 8 {
		t.Errorf("heads %d, rope %d", c.Heads, c.RopeDim)
	}
}

// FuzzParseConfig: any bytes give a config or an error, never a panic,
// and an accepted config has consistent shapes.
func FuzzParseConfig(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(caseDir("hy4/tiny"), "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"max_position_embeddings": 64}`))
	f.Add([]byte(`{"num_hidden_layers": 3, "indexer_types": ["full", "shared"], "max_position_embeddings": 64}`))
	f.Add([]byte(`{"hc_mult": 1e9, "max_position_embeddings": -1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if len(c.FullIndexer) != c.NumLayers || len(c.Dense) != c.NumLayers || !c.FullIndexer[0] || c.HCMult < 1 || !(c.SwigluLimit > 0) {
			t.Fatalf("accepted an inconsistent config: %+v", c)
		}
		for _, dt := range []cache.DType{cache.F32, cache.BF16, cache.FP8} {
			for _, s := range c.CacheSpecs(dt) {
				if s.SlotBytes <= 0 {
					t.Fatalf("%v: kind %s has slots of %d bytes", dt, s.Name, s.SlotBytes)
				}
			}
		}
	})
}
