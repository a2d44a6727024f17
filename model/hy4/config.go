// Package hy4 is Tencent's HY4 (HYV4ForCausalLM, model_type hy_v4;
// spec/models/hy4.md): DeepSeek-V3.2's multi-head latent attention with a
// DSA lightning indexer whose "shared" layers reuse the closest earlier
// full layer's top-k (as GLM-5), plus a learned attention sink and a
// sigmoid output gate per head, rotate-half RoPE, iHC (C independent
// residual channels per token, each sublayer reading a weighted sum of
// them and writing its output back to each with a weight of its own),
// and a sigmoid noaux mixture of experts whose routed experts clamp their
// SwiGLU.
//
// The configuration is read in the Hub spelling (transformers'
// HYV4Config) through model/dsa's parser, which this package shares with
// DeepSeek-V3.2 and GLM-5, plus the iHC and clamp fields; the weights in
// save_pretrained's naming (the checkpoint spelling) or transformers'
// in-memory one; the forward pass runs on backend ops over ragged
// batches, its caches are dsa's two append kinds.
package hy4

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/strata-inference/strata/model/dsa"
)

// Family is HY4 for model/dsa's config parser, with the defaults of
// transformers' HYV4Config (the released model's shapes, spec §1).
// max_position_embeddings has no default here: the spec does not give
// HYV4Config's, so a config must state it.
var Family = dsa.Family{
	Name:           "hy4",
	ModelTypes:     []string{"hy_v4"},
	Architectures:  []string{"HYV4ForCausalLM"},
	IndexerRope:    dsa.Half,
	SharedIndexers: true,
	Defaults: dsa.Defaults{
		VocabSize: 120832, Hidden: 2816, Intermediate: 6912, MoEInter: 768, Layers: 34, Heads: 32,
		SharedExperts: 1, Experts: 256, ExpertsPerTok: 8, Groups: 1, TopGroups: 1,
		KVLoraRank: 512, QLoraRank: 1536, NopeDim: 192, RopeDim: 64, VDim: 256,
		IndexTopK: 2048, IndexDim: 128, IndexHeads: 16,
		FirstDense: 1, RoutedScale: 2.827, RMSEps: 1e-5,
	},
}

// Config is the resolved architecture of one HY4 checkpoint: dsa's MLA,
// indexer and MoE shapes, and the iHC and clamp constants.
type Config struct {
	dsa.Config
	// HCMult is C, the number of residual channels (hc_mult).
	HCMult int
	// HCMagnitude scales the write-back gate (hc_magnitude); HCEps is the
	// floor added to every gate (hc_eps).
	HCMagnitude, HCEps float64
	// SwigluLimit clamps the routed experts' SwiGLU (swiglu_limit): the
	// gate from above, the up projection to ±limit. The reference clamps
	// whatever its sign, so a limit ≤ 0 is refused rather than read as
	// "off".
	SwigluLimit float64
}

// rawHY4 is the fields of config.json beyond dsa's.
type rawHY4 struct {
	HCMult            *int            `json:"hc_mult"`
	HCMagnitude       *float64        `json:"hc_magnitude"`
	HCEps             *float64        `json:"hc_eps"`
	SwigluLimit       *float64        `json:"swiglu_limit"`
	LearnableSinkInit *float64        `json:"learnable_sink_init"`
	IndexerTypes      []string        `json:"indexer_types"`
	IndexTopKPattern  json.RawMessage `json:"index_topk_pattern"`
	IndexTopKFreq     *int            `json:"index_topk_freq"`
	BOSTokenID        json.RawMessage `json:"bos_token_id"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	QuantConfig       json.RawMessage `json:"quantization_config"`
	MaxPosition       *int            `json:"max_position_embeddings"`
	FirstKDense       *int            `json:"first_k_dense_replace"`
	MTP               *int            `json:"num_nextn_predict_layers"`
}

// maxConfigBytes bounds config.json; real ones are a few KB.
const maxConfigBytes = 1 << 20

// LoadConfig reads and validates an HY4 config.json.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hy4: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("hy4: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates config.json bytes. Absent fields take
// HYV4Config's defaults; every problem found, in dsa's shared fields and
// in HY4's own, is reported, joined into one error.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var r rawHY4
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("config: trailing data after the JSON object")
	}
	var errs []error
	errf := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// indexer_types is HY4's only spelling of the indexer pattern; when
	// absent, HYV4Config's default applies: full at layer 0 and at every
	// layer i with (i-1) % 4 == 0.
	if len(r.IndexTopKPattern) > 0 || r.IndexTopKFreq != nil {
		errf("index_topk_pattern and index_topk_freq are GLM-5's spellings; HY4 gives indexer_types")
	}
	if r.FirstKDense != nil {
		errf("first_k_dense_replace is not an HY4 field; HY4 gives mlp_layer_types")
	}
	if r.MTP != nil && *r.MTP != 0 {
		errf("num_nextn_predict_layers %d: HY4 has no multi-token-prediction layers", *r.MTP)
	}
	if len(r.QuantConfig) > 0 && string(r.QuantConfig) != "null" {
		errf("quantization_config is not supported for HY4 (f32, bf16 and f16 weights only)")
	}
	if r.MaxPosition == nil {
		errf("max_position_embeddings is missing (HYV4Config's default is not known to this engine; state it)")
	}
	// HYV4Config derives num_key_value_heads (= num_attention_heads: MLA
	// expands the latent to every head) and head_dim (=
	// qk_rope_head_dim) whatever config.json says, so they are not
	// handed to dsa's parser, which would check them.
	shared := data
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) == nil {
		delete(fields, "num_key_value_heads")
		delete(fields, "head_dim")
		if b, err := json.Marshal(fields); err == nil {
			shared = b
		}
	}
	dc, err := dsa.ParseConfig(shared, &Family)
	if err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // without dsa's "config: " prefix
		} else {
			err = errors.New(strings.TrimPrefix(err.Error(), "config: "))
		}
		errs = append(errs, err)
	}
	c := &Config{HCMult: 4, HCMagnitude: 2, HCEps: 1e-6, SwigluLimit: 10}
	if r.HCMult != nil {
		c.HCMult = *r.HCMult
	}
	if r.HCMagnitude != nil {
		c.HCMagnitude = *r.HCMagnitude
	}
	if r.HCEps != nil {
		c.HCEps = *r.HCEps
	}
	if r.SwigluLimit != nil {
		c.SwigluLimit = *r.SwigluLimit
	}
	if c.HCMult < 1 || c.HCMult > 64 {
		errf("hc_mult %d is outside [1, 64]", c.HCMult)
	}
	finitePos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errf("%s must be positive and finite, got %g", name, v)
		}
	}
	finitePos("hc_magnitude", c.HCMagnitude)
	finitePos("hc_eps", c.HCEps)
	if !(c.SwigluLimit > 0) || math.IsInf(c.SwigluLimit, 0) {
		errf("swiglu_limit %g is not supported: the reference clamps the routed experts unconditionally, so it must be positive and finite", c.SwigluLimit)
	}
	if r.LearnableSinkInit != nil && (math.IsNaN(*r.LearnableSinkInit) || math.IsInf(*r.LearnableSinkInit, 0)) {
		errf("learnable_sink_init %g is not finite", *r.LearnableSinkInit)
	}
	if dc != nil {
		if dc.Yarn != nil {
			errf("rope type yarn is not supported for HY4 (its configs give default RoPE)")
		}
		if r.IndexerTypes == nil {
			for i := range dc.FullIndexer {
				dc.FullIndexer[i] = i == 0 || (i-1)%4 == 0
			}
		}
		if dc.RopeDim > dc.IndexDim {
			errf("index_head_dim %d is narrower than its %d RoPE channels", dc.IndexDim, dc.RopeDim)
		}
		if len(r.BOSTokenID) == 0 {
			dc.BOS = -1
		}
		if len(r.EOSTokenID) == 0 {
			dc.EOS = -1
		}
		if c.HCMult > 0 && float64(c.HCMult)*float64(c.HCMult)*float64(dc.Hidden) > 1<<36 {
			errf("hc_mult × hc_mult × hidden_size is too large")
		}
		c.Config = *dc
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(errs...))
	}
	return c, nil
}

// Shape summarises the configuration in one line.
func (c *Config) Shape() string {
	return fmt.Sprintf("%d layers of MLA (latent %d + RoPE %d, %d heads) with sinks and output gates, %d with their own indexer (%d×%d, top %d), %d iHC channels of %d",
		c.NumLayers, c.KVLoraRank, c.RopeDim, c.Heads, len(c.IndexerLayers()), c.IndexHeads, c.IndexDim, c.IndexTopK, c.HCMult, c.Hidden)
}
