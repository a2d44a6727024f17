package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/strata-inference/strata/cache"
)

// FromConfigFile sizes the model of a config.json of any family the
// planner reads, chosen by its model_type (or its text_config's):
// DeepSeek-V4, Gemma 4 and Qwen3.5, with the cache kinds stored as dt.
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
	switch {
	case strings.HasPrefix(t, "gemma4"):
		return FromGemma4Config(path, dt)
	case strings.HasPrefix(t, "qwen3_5"):
		return FromQwen35Config(path, dt)
	}
	return FromDeepSeekV4Config(path, dt)
}
