package glm5

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
	b, err := os.ReadFile(filepath.Join(caseDir("glm-5/tiny"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parse(t *testing.T, m map[string]any) (*dsa.Config, error) {
	t.Helper()
	b, _ := json.Marshal(m)
	return ParseConfig(b)
}

// TestConfigTiny: the golden case's config: interleaved indexer RoPE,
// indexer_types [full shared full shared], plain RoPE, one routing group.
func TestConfigTiny(t *testing.T) {
	c, err := parse(t, tinyConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.IndexerRope != dsa.Interleaved || !slices.Equal(c.FullIndexer, []bool{true, false, true, false}) || !slices.Equal(c.IndexerLayers(), []int{0, 2}) {
		t.Errorf("indexer %v, full %v", c.IndexerRope, c.FullIndexer)
	}
	if c.Yarn != nil || c.RopeTheta != 10000 || c.RMSEps != 1e-5 || c.Groups != 1 || c.TopGroups != 1 || c.Experts != 8 || c.ExpertsPerTok != 2 || c.MoEInter != 16 {
		t.Errorf("config %+v", c)
	}
	if got, want := c.SoftmaxScale(), 1/4.898979485566356; got-want > 1e-15 || want-got > 1e-15 {
		t.Errorf("softmax scale %v, want %v", got, want)
	}
	// Indexer keys only on the full layers.
	specs := c.CacheSpecs(cache.F32)
	if !slices.Equal(specs[0].Layers, []int{0, 1, 2, 3}) || !slices.Equal(specs[1].Layers, []int{0, 2}) || specs[0].SlotBytes != 40*4 || specs[1].SlotBytes != 16*4 {
		t.Errorf("specs %+v", specs)
	}
}

// TestIndexerTypeSpellings: indexer_types, else index_topk_pattern (a
// string of F and S), else index_topk_freq/index_skip_topk_offset (layer
// i is full when max(i - offset + 1, 0) is a multiple of freq), else
// every layer full.
func TestIndexerTypeSpellings(t *testing.T) {
	tests := []struct {
		name string
		set  map[string]any
		want []bool
	}{
		{"default", map[string]any{}, []bool{true, true, true, true, true, true}},
		{"pattern", map[string]any{"index_topk_pattern": "FSSFSF"}, []bool{true, false, false, true, false, true}},
		{"freq 2", map[string]any{"index_topk_freq": 2}, []bool{true, true, false, true, false, true}},
		{"freq 3 offset 1", map[string]any{"index_topk_freq": 3, "index_skip_topk_offset": 1}, []bool{true, false, false, true, false, false}},
	}
	for _, tc := range tests {
		m := tinyConfig(t)
		delete(m, "indexer_types")
		m["num_hidden_layers"] = 6
		m["mlp_layer_types"] = []string{"dense", "sparse", "sparse", "sparse", "sparse", "sparse"}
		delete(m, "layer_types")
		for k, v := range tc.set {
			m[k] = v
		}
		c, err := parse(t, m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(c.FullIndexer, tc.want) {
			t.Errorf("%s: full %v, want %v", tc.name, c.FullIndexer, tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		want   []string
	}{
		{"first shared", func(m map[string]any) { m["indexer_types"] = []string{"shared", "full", "full", "full"} }, []string{"indexer_types[0] is shared"}},
		{"bad type and length", func(m map[string]any) { m["indexer_types"] = []string{"full", "half", "full"} }, []string{"indexer_types has 3 entries"}},
		{"bad type", func(m map[string]any) { m["indexer_types"] = []string{"full", "half", "full", "full"} }, []string{`indexer_types[1] is "half"`}},
		{"pattern letter", func(m map[string]any) { delete(m, "indexer_types"); m["index_topk_pattern"] = "FXFS" }, []string{`index_topk_pattern[1] is "X"`}},
		{"model type", func(m map[string]any) { m["model_type"] = "deepseek_v32" }, []string{`model_type "deepseek_v32" is not glm-5`}},
		{"architecture", func(m map[string]any) { m["architectures"] = []string{"DeepseekV32ForCausalLM"} }, []string{`architecture "DeepseekV32ForCausalLM" is not glm-5`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tinyConfig(t)
			tc.mutate(m)
			_, err := parse(t, m)
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
	b, err := os.ReadFile(filepath.Join(caseDir("glm-5/tiny"), "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"num_hidden_layers":3,"index_topk_pattern":"FSF","index_topk_freq":0}`))
	f.Add([]byte(`{"num_hidden_layers":2,"indexer_types":["full","shared"],"index_skip_topk_offset":-4}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if len(c.FullIndexer) != c.NumLayers || len(c.Dense) != c.NumLayers || !c.FullIndexer[0] || c.RopeDim%2 != 0 || c.IndexDim < c.RopeDim {
			t.Fatalf("inconsistent accepted config %+v", c)
		}
		for _, dt := range []cache.DType{cache.F32, cache.BF16, cache.FP8} {
			for _, s := range c.CacheSpecs(dt) {
				if s.SlotBytes <= 0 || s.SlotBytes%4 != 0 {
					t.Fatalf("%v: spec %+v", dt, s)
				}
			}
		}
	})
}
