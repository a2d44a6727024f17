package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Options are what a caller may ask of a loaded model besides its
// checkpoint.
type Options struct {
	// CacheDType is how the KV-like cache kinds (window and compressed
	// entries, indexer keys, attention KV) are stored: F32 (the default,
	// exact), BF16 or FP8 (lossy; each architecture documents its layout).
	// State that is overwritten as a sequence decodes stays float32.
	CacheDType cache.DType
}

// Architecture is one model family a Registry can load.
type Architecture struct {
	Name string
	// ModelTypes and Architectures are the config.json values
	// ("model_type", and the "architectures" list) that select it.
	ModelTypes, Architectures []string
	Load                      func(dir string, be compute.Backend, o Options) (Model, error)
	// Describe, when set, summarizes the config.json at path for
	// `strata inspect` (Summary) without loading the weights.
	Describe func(path string) (*Summary, error)
}

// Registry maps a checkpoint's config to the architecture that loads it.
type Registry struct{ archs []Architecture }

// NewRegistry returns a registry of the given architectures.
func NewRegistry(archs ...Architecture) *Registry { return &Registry{archs: archs} }

// Architectures lists the registered architectures' names.
func (r *Registry) Architectures() []string {
	var names []string
	for _, a := range r.archs {
		names = append(names, a.Name)
	}
	return names
}

// Lookup returns the architecture of the checkpoint in dir, chosen by its
// config.json's model_type (or that of a nested text_config, as in
// multimodal Hub checkpoints), then by its architectures list.
func (r *Registry) Lookup(dir string) (*Architecture, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var c struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
		TextConfig    *struct {
			ModelType string `json:"model_type"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	types := []string{c.ModelType}
	if c.TextConfig != nil {
		types = append(types, c.TextConfig.ModelType)
	}
	for i := range r.archs {
		a := &r.archs[i]
		for _, t := range types {
			if t != "" && slices.Contains(a.ModelTypes, t) {
				return a, nil
			}
		}
		for _, name := range c.Architectures {
			if slices.Contains(a.Architectures, name) {
				return a, nil
			}
		}
	}
	var known []string
	for _, a := range r.archs {
		known = append(known, a.ModelTypes...)
	}
	return nil, fmt.Errorf("model: %s: model_type %q (architectures %v) is not supported; this build runs %s", path, c.ModelType, c.Architectures, strings.Join(known, ", "))
}

// Load loads the checkpoint in dir with its architecture.
func (r *Registry) Load(dir string, be compute.Backend, o Options) (Model, error) {
	a, err := r.Lookup(dir)
	if err != nil {
		return nil, err
	}
	return a.Load(dir, be, o)
}
