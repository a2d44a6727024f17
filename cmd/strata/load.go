package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/model/glm5"
	"github.com/strata-inference/strata/model/qwen35"
)

// registry is every architecture this binary runs, chosen by a checkpoint's
// config.json.
func registry() *model.Registry {
	return model.NewRegistry(deepseekv4.Arch, deepseekv32.Arch, glm5.Arch, gemma4.Arch, qwen35.Arch)
}

// loadModel loads the checkpoint in dir with its architecture, saying
// clearly when the folder is not a model.
func loadModel(dir string, be compute.Backend, o model.Options) (model.Model, error) {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if dir == defaultModel {
			return nil, fmt.Errorf("the shipped model is not in %s (no config.json there); give another with -model DIR", dir)
		}
		return nil, fmt.Errorf("model folder %s: %w", dir, err)
	}
	return registry().Load(dir, be, o)
}
