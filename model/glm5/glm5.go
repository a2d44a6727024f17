// Package glm5 is GLM-5 (GlmMoeDsaForCausalLM, model_type glm_moe_dsa;
// spec/models/glm-5.md): DeepSeek-V3.2's design on GLM's shapes, with the
// indexer's RoPE interleaved like MLA's and "shared" layers that reuse the
// top-k selection of the closest earlier "full" indexer layer. The
// architecture itself is model/dsa's.
package glm5

import (
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/dsa"
)

// Family is GLM-5 for package dsa, with the defaults of transformers'
// GlmMoeDsaConfig (the released model's shapes).
var Family = dsa.Family{
	Name:           "glm-5",
	ModelTypes:     []string{"glm_moe_dsa"},
	Architectures:  []string{"GlmMoeDsaForCausalLM"},
	IndexerRope:    dsa.Interleaved,
	SharedIndexers: true,
	Defaults: dsa.Defaults{
		VocabSize: 154880, Hidden: 6144, Intermediate: 12288, MoEInter: 2048, Layers: 78, Heads: 64,
		SharedExperts: 1, Experts: 256, ExpertsPerTok: 8, Groups: 1, TopGroups: 1,
		KVLoraRank: 512, QLoraRank: 2048, NopeDim: 192, RopeDim: 64, VDim: 256,
		IndexTopK: 2048, IndexDim: 128, IndexHeads: 32,
		FirstDense: 3, MaxPosition: 202752, RoutedScale: 2.5, RMSEps: 1e-5,
	},
}

// Arch is GLM-5 for a model.Registry.
var Arch = model.Architecture{
	Name:          Family.Name,
	ModelTypes:    Family.ModelTypes,
	Architectures: Family.Architectures,
	Load: func(dir string, be compute.Backend, o model.Options) (model.Model, error) {
		return dsa.Load(dir, be, o, &Family)
	},
}

// Load loads the GLM-5 checkpoint in dir.
func Load(dir string, be compute.Backend, o model.Options) (*dsa.Model, error) {
	return dsa.Load(dir, be, o, &Family)
}

// ParseConfig parses a GLM-5 config.json.
func ParseConfig(data []byte) (*dsa.Config, error) { return dsa.ParseConfig(data, &Family) }

// LoadConfig reads a GLM-5 config.json.
func LoadConfig(path string) (*dsa.Config, error) { return dsa.LoadConfig(path, &Family) }
