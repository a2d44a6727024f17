package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/model/glm5"
)

// FromConfigFile sizes the model of a config.json of any family the
// planner reads, chosen by its model_type (or its text_config's):
// DeepSeek-V4 (also when model_type is absent), DeepSeek-V3.2, GLM-5,
// Gemma 4 and Qwen3.5, with the cache kinds stored as dt.
func FromConfigFile(path string, dt cache.DType) (Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	var c struct {
		ModelType  string `json:"model_type"`
		TextConfig *struct {
			ModelType string `json:"model_type"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Model{}, fmt.Errorf("plan: %s: %w", path, err)
	}
	t := c.ModelType
	if c.TextConfig != nil && c.TextConfig.ModelType != "" {
		t = c.TextConfig.ModelType
	}
	for _, f := range []*dsa.Family{&deepseekv32.Family, &glm5.Family} {
		if slices.Contains(f.ModelTypes, t) {
			return FromDSAConfig(path, f, dt)
		}
	}
	switch {
	case strings.HasPrefix(t, "gemma4"):
		return FromGemma4Config(path, dt)
	case strings.HasPrefix(t, "qwen3_5"):
		return FromQwen35Config(path, dt)
	}
	return FromDeepSeekV4Config(path, dt)
}
