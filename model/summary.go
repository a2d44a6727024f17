package model

import (
	"fmt"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/safetensors"
)

// Summary is what an architecture says of a checkpoint's config for
// `strata inspect`: its family, the shape of its layers in the family's
// own terms, and how its per-request cache is sized. The generic part of
// a summary (parameters and bytes by dtype, tensor count) is the caller's
// to count from the checkpoint.
type Summary struct {
	// Family names the architecture in output ("DeepSeek-V4", "Gemma 4").
	Family string
	// Fields are the config's summary, in order: a key ("attention",
	// "moe", "rope") and its value; Sub fields are details of the field
	// before them (one layer of the layers).
	Fields []SummaryField
	// Layers is the number of decoder layers, VocabSize the vocabulary's
	// size and MaxContext the longest context, as the config says.
	Layers, VocabSize, MaxContext int
	// Caches are the cache layouts to report, each with what its dtype
	// means for this family.
	Caches []CacheLayout
	// CacheSpecs returns the per-request cache kinds with the KV-like
	// kinds stored as dt: the family's own CacheSpecs, as load and plan
	// size them.
	CacheSpecs func(dt cache.DType) ([]cache.Spec, error)
	// Bind binds the checkpoint's weights as load does and reports every
	// problem found; nil when the family cannot check them apart from
	// loading.
	Bind func(ck *safetensors.Checkpoint) error
}

// SummaryField is one line of a Summary.
type SummaryField struct {
	Key, Value string
	Sub        bool
}

// CacheLayout is one cache dtype a Summary reports, and what it is
// ("as strata's CPU engine stores it").
type CacheLayout struct {
	DType cache.DType
	Note  string
}

// Field appends a top-level line to s.
func (s *Summary) Field(key, value string) {
	s.Fields = append(s.Fields, SummaryField{Key: key, Value: value})
}

// SubField appends a detail line to s.
func (s *Summary) SubField(key, value string) {
	s.Fields = append(s.Fields, SummaryField{Key: key, Value: value, Sub: true})
}

// CPUCache is the note of the float32 cache layout.
const CPUCache = "as strata's CPU engine stores it"

// CountKinds is "3 dense; 5 MoE": how many layers of each kind, in the
// order the kinds first appear.
func CountKinds(kinds []string) string {
	counts := map[string]int{}
	var order []string
	for _, k := range kinds {
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, "; ")
}

// LayerKinds appends the layers field ("8, 6 X; 2 Y") and one detail line per
// layer to s.
func (s *Summary) LayerKinds(kinds []string) {
	s.Field("layers", fmt.Sprintf("%d, %s", len(kinds), CountKinds(kinds)))
	for i, k := range kinds {
		s.SubField(fmt.Sprint(i), k)
	}
}
