// Package deepseekv32 is DeepSeek-V3.2 (DeepseekV32ForCausalLM, model_type
// deepseek_v32; spec/models/deepseek-v3.2.md): MLA with a DSA indexer in
// every layer, the indexer's RoPE rotate-half on its first channels,
// group-limited routing, YaRN. The architecture itself is model/dsa's.
package deepseekv32

import (
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/dsa"
)

// Family is DeepSeek-V3.2 for package dsa, with the defaults of
// transformers' DeepseekV32Config (the released model's shapes).
var Family = dsa.Family{
	Name:          "deepseek-v3.2",
	ModelTypes:    []string{"deepseek_v32"},
	Architectures: []string{"DeepseekV32ForCausalLM"},
	IndexerRope:   dsa.Half,
	Defaults: dsa.Defaults{
		VocabSize: 129280, Hidden: 7168, Intermediate: 18432, MoEInter: 2048, Layers: 61, Heads: 128,
		SharedExperts: 1, Experts: 256, ExpertsPerTok: 8, Groups: 8, TopGroups: 4,
		KVLoraRank: 512, QLoraRank: 1536, NopeDim: 128, RopeDim: 64, VDim: 128,
		IndexTopK: 2048, IndexDim: 128, IndexHeads: 64,
		FirstDense: 3, MaxPosition: 163840, RoutedScale: 2.5, RMSEps: 1e-6,
	},
}

// Arch is DeepSeek-V3.2 for a model.Registry.
var Arch = model.Architecture{
	Name:          Family.Name,
	ModelTypes:    Family.ModelTypes,
	Architectures: Family.Architectures,
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return dsa.Load(dir, be, o, &Family)
	},
}

// Load loads the DeepSeek-V3.2 checkpoint in dir.
func Load(dir string, be compute.Backend, o model.Options) (*dsa.Model, error) {
	return dsa.Load(dir, be, o, &Family)
}

// ParseConfig parses a DeepSeek-V3.2 config.json.
func ParseConfig(data []byte) (*dsa.Config, error) { return dsa.ParseConfig(data, &Family) }

// LoadConfig reads a DeepSeek-V3.2 config.json.
func LoadConfig(path string) (*dsa.Config, error) { return dsa.LoadConfig(path, &Family) }
