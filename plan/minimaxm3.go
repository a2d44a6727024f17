package plan

import (
	"fmt"
	"path/filepath"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/minimaxm3"
)

// FromMiniMaxM3Config reads a MiniMax-M3 config.json (either spelling) and
// sizes its cache with K, V and indexer keys stored as dt (f32 or bf16).
// The model is named after the directory holding the file.
func FromMiniMaxM3Config(path string, dt cache.DType) (Model, error) {
	c, err := minimaxm3.LoadConfig(path)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(path); err == nil {
		dir = filepath.Dir(abs)
	}
	m, err := FromMiniMaxM3(filepath.Base(dir), c, dt)
	if err != nil {
		return Model{}, err
	}
	m.Description = fmt.Sprintf("%s (%s)", path, miniMaxM3Shape(c))
	return m, nil
}

// FromMiniMaxM3 sizes a MiniMax-M3 configuration's per-request cache with
// the engine's own c.CacheKinds(dt): one K and V entry per token in every
// layer, one indexer key per token in every MSA layer, nothing fixed.
// MaxContext is max_position_embeddings.
func FromMiniMaxM3(name string, c *minimaxm3.Config, dt cache.DType) (Model, error) {
	specs, err := c.CacheKinds(dt)
	if err != nil {
		return Model{}, fmt.Errorf("plan: %w", err)
	}
	return Model{
		Name:        name,
		Description: fmt.Sprintf("MiniMax-M3 (%s)", miniMaxM3Shape(c)),
		DTypes:      fmt.Sprintf("%s KV and indexer keys", dt),
		Specs:       specs,
		MaxContext:  c.MaxPosition,
	}, nil
}

func miniMaxM3Shape(c *minimaxm3.Config) string {
	return fmt.Sprintf("%d layers of %d KV heads of %d, %d MSA with indexer keys of %d (blocks of %d, top %d)",
		c.NumLayers(), c.KVHeads, c.HeadDim, len(c.SparseLayers()), c.IndexDim, c.IndexBlock, c.IndexTopK)
}
