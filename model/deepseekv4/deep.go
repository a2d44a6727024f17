package deepseekv4

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// LoadDeep loads the checkpoint in dir as a model of layers layers: the
// checkpoint's own, then its last period layers repeated in turn (layer i
// >= stored binds the tensors of layer stored − period + (i − stored) mod
// period). Each repeated layer is bound afresh, so a backend that holds
// weights in its own memory (Upload) holds a separate copy of every layer
// and a step reads as many bytes as a checkpoint of that depth would make
// it read. It exists to benchmark depths whose checkpoints would not fit on
// disk (a Flash-width layer with 256 FP4 experts is 3.5 GB); the model's
// outputs are those of a checkpoint whose extra layers' tensors are copies
// of their sources' (TestLoadDeep).
func LoadDeep(dir string, be compute.Backend, o model.Options, layers, period int) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	deep, err := Deepen(cfg, layers, period)
	if err != nil {
		return nil, fmt.Errorf("deepseekv4: %s: %w", dir, err)
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	w, err := bind(deep, ck, len(cfg.Layers), period)
	if err == nil {
		var m *Model
		if m, err = newBound(deep, ck, w, be, o); err == nil {
			return m, nil
		}
	}
	ck.Close()
	return nil, err
}

// Deepen returns a copy of cfg with layers layers: cfg's own, then its last
// period layers' specs repeated in turn, as LoadDeep binds them.
func Deepen(cfg *Config, layers, period int) (*Config, error) {
	stored := len(cfg.Layers)
	if period < 1 || period > stored {
		return nil, fmt.Errorf("deepening: a period of %d layers, the config has %d", period, stored)
	}
	if layers < stored {
		return nil, fmt.Errorf("deepening to %d layers, fewer than the config's %d", layers, stored)
	}
	deep := *cfg
	deep.Layers = slices.Clone(cfg.Layers)
	for i := stored; i < layers; i++ {
		deep.Layers = append(deep.Layers, cfg.Layers[stored-period+(i-stored)%period])
	}
	deep.NumLayers = layers
	return &deep, nil
}
