package hy4

import (
	"fmt"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/safetensors"
)

// Describe summarizes the HY4 config.json at path (model.Summary): the
// DSA fields, with sinks and output gates, and the hyper-connections.
func Describe(path string) (*model.Summary, error) {
	c, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &model.Summary{Family: "HY4", Layers: c.NumLayers, VocabSize: c.VocabSize, MaxContext: c.MaxPosition}
	c.Config.Describe(s)
	s.Fields = append([]model.SummaryField{{Key: "hyper-connections", Value: fmt.Sprintf("%d iHC channels (magnitude %g), SwiGLU limit %g; attention with sinks and output gates", c.HCMult, c.HCMagnitude, c.SwigluLimit)}}, s.Fields...)
	s.Caches = dsa.Caches()
	s.CacheSpecs = func(dt cache.DType) ([]cache.Spec, error) { return c.CacheSpecs(dt), nil }
	s.Bind = func(ck *safetensors.Checkpoint) error {
		_, err := Bind(c, ck)
		return err
	}
	return s, nil
}
