// Package qwen35 implements the Qwen3.5 text model, dense and MoE
// (spec/models/qwen3.5-moe.md): its configuration in both spellings (the
// Hub's multimodal config with the text model under text_config, and the
// text-only config save_pretrained writes), weight binding in both namings,
// the per-request state as cache kinds with their policies (full-attention
// KV append; conv and delta-rule state recurrent), and a model.Model whose
// forward pass over ragged batches is composed of backend ops on tensors
// the backend owns, reading and writing that state in the cache pool: the
// short causal convolution and the gated delta rule (compute.Recurrent),
// gated attention with partial RoPE (compute.Causal, compute.Gating), the
// MoE with a gated shared expert (compute.Experts). The MTP module drafts
// for speculative decoding (model.Drafter).
package qwen35

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
)

// LayerKind is the token mixer of one decoder layer.
type LayerKind int

const (
	Linear LayerKind = iota // Gated DeltaNet (layer type "linear_attention")
	Full                    // gated full attention (layer type "full_attention")
)

func (k LayerKind) String() string {
	switch k {
	case Linear:
		return "linear_attention"
	case Full:
		return "full_attention"
	}
	return fmt.Sprintf("LayerKind(%d)", int(k))
}

// Config is the resolved architecture of a Qwen3.5 text model.
type Config struct {
	// MoE is set for Qwen3.5-MoE (every layer's FFN is a mixture of experts
	// with a gated shared expert); dense Qwen3.5 has one SwiGLU FFN.
	MoE bool
	// Multimodal is set when the config is the Hub's multimodal one (text
	// model under text_config): the checkpoint then also holds the vision
	// tower (model.visual.*), which the text model does not use.
	Multimodal bool

	VocabSize int
	Hidden    int // D
	Layers    []LayerKind

	// Gated full attention.
	Heads   int // Hq
	KVHeads int // Hkv
	HeadDim int // d
	RopeDim int // R: leading channels of a head that carry RoPE (d · partial_rotary_factor)
	// RopeTheta is the RoPE base.
	RopeTheta float64
	// MRopeSection and MRopeInterleaved describe multimodal RoPE. For text
	// all three position streams are the token position, so they do not
	// change the rotation; they are kept for inspection.
	MRopeSection     []int
	MRopeInterleaved bool

	// Gated DeltaNet.
	LinKeyHeads   int // Hk
	LinValueHeads int // Hv, a multiple of Hk
	LinKeyDim     int // dk
	LinValueDim   int // dv
	ConvKernel    int // K

	// Dense FFN width.
	Intermediate int
	// MoE FFN.
	Experts       int // E
	ExpertsPerTok int // k
	MoEInter      int // Ie
	SharedInter   int // Is

	RMSEps        float64
	TieEmbeddings bool
	// MTPLayers is mtp_num_hidden_layers: the multi-token-prediction
	// layers the Hub checkpoint carries under mtp.* (0 when absent).
	MTPLayers   int
	MaxPosition int
	BOS         int   // -1 when the config names none
	EOS         []int // empty when the config names none
}

// NumLayers is the number of decoder layers.
func (c *Config) NumLayers() int { return len(c.Layers) }

// KeyDim is the width of the delta rule's queries and keys, Hk·dk.
func (c *Config) KeyDim() int { return c.LinKeyHeads * c.LinKeyDim }

// ValueDim is the width of the delta rule's values and output, Hv·dv.
func (c *Config) ValueDim() int { return c.LinValueHeads * c.LinValueDim }

// ConvDim is the number of channels of the short convolution, 2Hk·dk + Hv·dv.
func (c *Config) ConvDim() int { return 2*c.KeyDim() + c.ValueDim() }

// LayersOf lists the indices of the layers of kind k.
func (c *Config) LayersOf(k LayerKind) []int {
	var out []int
	for i, l := range c.Layers {
		if l == k {
			out = append(out, i)
		}
	}
	return out
}

// rawText is a text config as either spelling writes it.
type rawText struct {
	ModelType                    string          `json:"model_type"`
	VocabSize                    *int            `json:"vocab_size"`
	HiddenSize                   *int            `json:"hidden_size"`
	NumHiddenLayers              *int            `json:"num_hidden_layers"`
	NumAttentionHeads            *int            `json:"num_attention_heads"`
	NumKeyValueHeads             *int            `json:"num_key_value_heads"`
	HeadDim                      *int            `json:"head_dim"`
	IntermediateSize             *int            `json:"intermediate_size"`
	LayerTypes                   []string        `json:"layer_types"`
	FullAttentionInterval        *int            `json:"full_attention_interval"`
	LinearNumKeyHeads            *int            `json:"linear_num_key_heads"`
	LinearNumValueHeads          *int            `json:"linear_num_value_heads"`
	LinearKeyHeadDim             *int            `json:"linear_key_head_dim"`
	LinearValueHeadDim           *int            `json:"linear_value_head_dim"`
	LinearConvKernelDim          *int            `json:"linear_conv_kernel_dim"`
	NumExperts                   *int            `json:"num_experts"`
	NumExpertsPerTok             *int            `json:"num_experts_per_tok"`
	MoEIntermediateSize          *int            `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize *int            `json:"shared_expert_intermediate_size"`
	RMSNormEps                   *float64        `json:"rms_norm_eps"`
	RopeParameters               *rawRope        `json:"rope_parameters"`
	RopeScaling                  *rawRope        `json:"rope_scaling"`
	RopeTheta                    *float64        `json:"rope_theta"`
	PartialRotaryFactor          *float64        `json:"partial_rotary_factor"`
	TieWordEmbeddings            *bool           `json:"tie_word_embeddings"`
	AttentionBias                *bool           `json:"attention_bias"`
	AttnOutputGate               *bool           `json:"attn_output_gate"`
	HiddenAct                    *string         `json:"hidden_act"`
	MaxPositionEmbeddings        *int            `json:"max_position_embeddings"`
	MTPNumHiddenLayers           *int            `json:"mtp_num_hidden_layers"`
	MTPUseDedicatedEmbeddings    *bool           `json:"mtp_use_dedicated_embeddings"`
	BOSTokenID                   json.RawMessage `json:"bos_token_id"`
	EOSTokenID                   json.RawMessage `json:"eos_token_id"`
}

type rawRope struct {
	RopeType            *string  `json:"rope_type"`
	Type                *string  `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	MRopeSection        []int    `json:"mrope_section"`
	MRopeInterleaved    *bool    `json:"mrope_interleaved"`
}

// rawTop is the part of the Hub's multimodal config outside text_config.
type rawTop struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	TextConfig        json.RawMessage `json:"text_config"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
}

// maxConfigBytes bounds config.json; real ones are a few KB.
const maxConfigBytes = 1 << 20

// maxLayers bounds num_hidden_layers and the like, so that a hostile config
// cannot make the parser allocate without limit.
const maxLayers = 1 << 16

// LoadConfig reads and validates a config.json in either spelling.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("qwen35: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("qwen35: %s: %w", path, err)
	}
	return c, nil
}

// Model types and architectures of the two spellings.
var (
	denseTypes = map[string]bool{"qwen3_5": true, "qwen3_5_text": true}
	moeTypes   = map[string]bool{"qwen3_5_moe": true, "qwen3_5_moe_text": true}
	denseArchs = map[string]bool{"Qwen3_5ForCausalLM": true, "Qwen3_5ForConditionalGeneration": true}
	moeArchs   = map[string]bool{"Qwen3_5MoeForCausalLM": true, "Qwen3_5MoeForConditionalGeneration": true}
)

// ParseConfig parses and validates config.json bytes in either spelling:
// the Hub's multimodal config (Qwen3_5ForConditionalGeneration or its MoE
// twin, the text model's fields under text_config) or the text-only config
// (Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM). Every problem found is
// reported, joined into one error. Fields with defaults in the reference
// (transformers' Qwen3_5TextConfig) take those defaults; the sizes that
// define the shapes are required.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var top rawTop
	if err := decodeStrict(data, &top); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p := &parser{}
	text := data
	multimodal := len(top.TextConfig) > 0 && string(top.TextConfig) != "null"
	if multimodal {
		text = top.TextConfig
	}
	var r rawText
	if err := decodeStrict(text, &r); err != nil {
		where := "config"
		if multimodal {
			where = "config: text_config"
		}
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	c := &Config{Multimodal: multimodal}
	c.MoE = p.family(&top, &r, multimodal)

	c.VocabSize = p.req("vocab_size", r.VocabSize)
	c.Hidden = p.req("hidden_size", r.HiddenSize)
	nLayers := p.req("num_hidden_layers", r.NumHiddenLayers)
	c.Heads = p.req("num_attention_heads", r.NumAttentionHeads)
	c.KVHeads = p.req("num_key_value_heads", r.NumKeyValueHeads)
	c.HeadDim = intOr(r.HeadDim, 256)
	c.LinKeyHeads = p.req("linear_num_key_heads", r.LinearNumKeyHeads)
	c.LinValueHeads = p.req("linear_num_value_heads", r.LinearNumValueHeads)
	c.LinKeyDim = p.req("linear_key_head_dim", r.LinearKeyHeadDim)
	c.LinValueDim = p.req("linear_value_head_dim", r.LinearValueHeadDim)
	c.ConvKernel = intOr(r.LinearConvKernelDim, 4)
	c.RMSEps = floatOr(r.RMSNormEps, 1e-6)
	c.MaxPosition = intOr(r.MaxPositionEmbeddings, 32768)
	if c.MoE {
		c.Experts = p.req("num_experts", r.NumExperts)
		c.ExpertsPerTok = p.req("num_experts_per_tok", r.NumExpertsPerTok)
		c.MoEInter = p.req("moe_intermediate_size", r.MoEIntermediateSize)
		c.SharedInter = p.req("shared_expert_intermediate_size", r.SharedExpertIntermediateSize)
	} else {
		c.Intermediate = p.req("intermediate_size", r.IntermediateSize)
	}

	if r.AttentionBias != nil && *r.AttentionBias {
		p.errf("attention_bias true is not supported (Qwen3.5 projections have no bias)")
	}
	if r.AttnOutputGate != nil && !*r.AttnOutputGate {
		p.errf("attn_output_gate false is not supported (Qwen3.5 attention is gated)")
	}
	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		p.errf("hidden_act %q is not supported (want silu)", *r.HiddenAct)
	}
	if r.MTPUseDedicatedEmbeddings != nil && *r.MTPUseDedicatedEmbeddings {
		p.errf("mtp_use_dedicated_embeddings true is not supported (the MTP layer shares the model's embedding)")
	}
	c.MTPLayers = intOr(r.MTPNumHiddenLayers, 0)
	if c.MTPLayers < 0 || c.MTPLayers > maxLayers {
		p.errf("mtp_num_hidden_layers %d is outside [0, %d]", c.MTPLayers, maxLayers)
		c.MTPLayers = 0
	}

	c.TieEmbeddings = boolOr(r.TieWordEmbeddings, false)
	if top.TieWordEmbeddings != nil && multimodal {
		if r.TieWordEmbeddings != nil && *r.TieWordEmbeddings != *top.TieWordEmbeddings {
			p.errf("tie_word_embeddings is %v at the top level but %v in text_config", *top.TieWordEmbeddings, *r.TieWordEmbeddings)
		}
		c.TieEmbeddings = *top.TieWordEmbeddings
	}
	c.BOS = p.tokenID("bos_token_id", r.BOSTokenID)
	eos := r.EOSTokenID
	if len(eos) == 0 || string(eos) == "null" {
		eos = top.EOSTokenID
	}
	c.EOS = p.tokenIDs("eos_token_id", eos)

	p.resolveLayers(c, &r, nLayers)
	p.resolveRope(c, &r)
	c.validate(p)
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(p.errs...))
	}
	return c, nil
}

// decodeStrict decodes one JSON object, rejecting trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

type parser struct {
	errs    []error
	missing map[string]bool
}

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *parser) req(name string, v *int) int {
	if v == nil {
		p.errf("%s is missing", name)
		if p.missing == nil {
			p.missing = map[string]bool{}
		}
		p.missing[name] = true
		return 0
	}
	return *v
}

func intOr(v *int, d int) int {
	if v == nil {
		return d
	}
	return *v
}

func floatOr(v *float64, d float64) float64 {
	if v == nil {
		return d
	}
	return *v
}

func boolOr(v *bool, d bool) bool {
	if v == nil {
		return d
	}
	return *v
}

// family decides dense or MoE from model_type and architectures, and from
// the presence of num_experts when neither names the family.
func (p *parser) family(top *rawTop, r *rawText, multimodal bool) bool {
	var votes []bool
	check := func(where, t string) {
		switch {
		case t == "":
		case denseTypes[t]:
			votes = append(votes, false)
		case moeTypes[t]:
			votes = append(votes, true)
		default:
			p.errf("%s %q is not a Qwen3.5 model type (want qwen3_5, qwen3_5_text, qwen3_5_moe or qwen3_5_moe_text)", where, t)
		}
	}
	if multimodal {
		check("model_type", top.ModelType)
		check("text_config.model_type", r.ModelType)
	} else {
		check("model_type", r.ModelType)
	}
	for _, a := range top.Architectures {
		switch {
		case denseArchs[a]:
			votes = append(votes, false)
		case moeArchs[a]:
			votes = append(votes, true)
		default:
			p.errf("architecture %q is not a Qwen3.5 architecture", a)
		}
	}
	if len(votes) == 0 {
		return r.NumExperts != nil
	}
	for _, v := range votes[1:] {
		if v != votes[0] {
			p.errf("model_type and architectures disagree on whether the model is dense or MoE")
			break
		}
	}
	return votes[0]
}

// tokenID reads a token id that may be a number, null or a list (first entry); -1 when absent.
func (p *parser) tokenID(name string, raw json.RawMessage) int {
	ids := p.tokenIDs(name, raw)
	if len(ids) == 0 {
		return -1
	}
	return ids[0]
}

// tokenIDs reads a token id or a list of them.
func (p *parser) tokenIDs(name string, raw json.RawMessage) []int {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return []int{n}
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil {
		return list
	}
	p.errf("%s: %.40s is not a token id or a list of them", name, raw)
	return nil
}

// resolveLayers reads the per-layer token mixers from layer_types, or from
// full_attention_interval (default 4: every fourth layer full) as the
// reference does when layer_types is absent.
func (p *parser) resolveLayers(c *Config, r *rawText, n int) {
	if n <= 0 || n > maxLayers {
		if !p.missing["num_hidden_layers"] {
			p.errf("num_hidden_layers %d is outside [1, %d]", n, maxLayers)
		}
		return
	}
	if r.LayerTypes != nil {
		if len(r.LayerTypes) != n {
			p.errf("layer_types has %d entries; want num_hidden_layers (%d)", len(r.LayerTypes), n)
			return
		}
		for i, t := range r.LayerTypes {
			switch t {
			case "linear_attention":
				c.Layers = append(c.Layers, Linear)
			case "full_attention":
				c.Layers = append(c.Layers, Full)
			default:
				p.errf("layer_types[%d] is %q; want linear_attention or full_attention", i, t)
				c.Layers = append(c.Layers, Linear)
			}
		}
		if r.FullAttentionInterval != nil && *r.FullAttentionInterval > 0 {
			for i, k := range c.Layers {
				if (k == Full) != ((i+1)%*r.FullAttentionInterval == 0) {
					p.errf("layer_types disagrees with full_attention_interval %d at layer %d", *r.FullAttentionInterval, i)
					break
				}
			}
		}
		return
	}
	every := intOr(r.FullAttentionInterval, 4)
	if every <= 0 {
		p.errf("full_attention_interval %d must be positive", every)
		return
	}
	for i := range n {
		if (i+1)%every == 0 {
			c.Layers = append(c.Layers, Full)
		} else {
			c.Layers = append(c.Layers, Linear)
		}
	}
}

// resolveRope reads the RoPE base and rotated width from rope_parameters
// (transformers 5), falling back to the legacy top-level rope_theta,
// partial_rotary_factor and rope_scaling. Only the default rope type is
// supported; mrope sections are read but, for text, do not change the
// rotation.
func (p *parser) resolveRope(c *Config, r *rawText) {
	rp := r.RopeParameters
	if rp == nil {
		rp = r.RopeScaling
	}
	if rp == nil {
		rp = &rawRope{}
	}
	kind := "default"
	switch {
	case rp.RopeType != nil:
		kind = *rp.RopeType
	case rp.Type != nil:
		kind = *rp.Type
	}
	if kind != "default" && kind != "mrope" {
		p.errf("rope type %q is not supported (want default)", kind)
	}
	c.RopeTheta = floatOr(r.RopeTheta, 10000)
	if rp.RopeTheta != nil {
		c.RopeTheta = *rp.RopeTheta
	}
	factor := floatOr(r.PartialRotaryFactor, 0.25)
	if rp.PartialRotaryFactor != nil {
		if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != *rp.PartialRotaryFactor {
			p.errf("partial_rotary_factor %g disagrees with rope_parameters.partial_rotary_factor %g", *r.PartialRotaryFactor, *rp.PartialRotaryFactor)
		}
		factor = *rp.PartialRotaryFactor
	}
	if !(factor > 0 && factor <= 1) {
		p.errf("partial_rotary_factor %g must be in (0, 1]", factor)
		factor = 0
	}
	c.RopeDim = int(float64(c.HeadDim) * factor)
	c.MRopeSection = rp.MRopeSection
	c.MRopeInterleaved = boolOr(rp.MRopeInterleaved, false)
	for i, s := range c.MRopeSection {
		if s < 0 {
			p.errf("rope_parameters.mrope_section[%d] is %d", i, s)
		}
	}
}

func (c *Config) validate(p *parser) {
	pos := func(name string, v int) {
		if v <= 0 && !p.missing[name] {
			p.errf("%s must be positive, got %d", name, v)
		}
	}
	pos("vocab_size", c.VocabSize)
	pos("hidden_size", c.Hidden)
	pos("num_attention_heads", c.Heads)
	pos("num_key_value_heads", c.KVHeads)
	pos("head_dim", c.HeadDim)
	pos("linear_num_key_heads", c.LinKeyHeads)
	pos("linear_num_value_heads", c.LinValueHeads)
	pos("linear_key_head_dim", c.LinKeyDim)
	pos("linear_value_head_dim", c.LinValueDim)
	pos("linear_conv_kernel_dim", c.ConvKernel)
	pos("max_position_embeddings", c.MaxPosition)
	if c.MoE {
		pos("num_experts", c.Experts)
		pos("num_experts_per_tok", c.ExpertsPerTok)
		pos("moe_intermediate_size", c.MoEInter)
		pos("shared_expert_intermediate_size", c.SharedInter)
		if c.ExpertsPerTok > c.Experts && c.Experts > 0 {
			p.errf("num_experts_per_tok %d exceeds num_experts %d", c.ExpertsPerTok, c.Experts)
		}
	} else {
		pos("intermediate_size", c.Intermediate)
	}
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		p.errf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.LinKeyHeads > 0 && c.LinValueHeads > 0 && c.LinValueHeads%c.LinKeyHeads != 0 {
		p.errf("linear_num_value_heads %d is not a multiple of linear_num_key_heads %d", c.LinValueHeads, c.LinKeyHeads)
	}
	if c.HeadDim > 0 && (c.RopeDim <= 0 || c.RopeDim%2 != 0) {
		p.errf("rotary dims %d (head_dim %d × partial_rotary_factor) must be even and positive", c.RopeDim, c.HeadDim)
	}
	if !(c.RMSEps > 0) || math.IsInf(c.RMSEps, 0) {
		p.errf("rms_norm_eps must be positive and finite, got %g", c.RMSEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		p.errf("rope_theta must be positive and finite, got %g", c.RopeTheta)
	}
	if c.VocabSize > 0 {
		if c.BOS >= c.VocabSize || c.BOS < -1 {
			p.errf("bos_token_id %d is outside the vocabulary of %d", c.BOS, c.VocabSize)
		}
		for _, e := range c.EOS {
			if e < 0 || e >= c.VocabSize {
				p.errf("eos_token_id %d is outside the vocabulary of %d", e, c.VocabSize)
			}
		}
	}
	// Products that size allocations must not overflow.
	const lim = 1 << 40
	for _, s := range []struct {
		name string
		v    float64
	}{
		{"vocab_size × hidden_size", float64(c.VocabSize) * float64(c.Hidden)},
		{"attention heads × head_dim", float64(c.Heads) * float64(c.HeadDim)},
		{"linear heads × dims", float64(c.LinValueHeads) * float64(c.LinKeyDim) * float64(c.LinValueDim)},
		{"conv channels × kernel", float64(2*c.LinKeyHeads*c.LinKeyDim+c.LinValueHeads*c.LinValueDim) * float64(c.ConvKernel)},
		{"experts × widths", float64(c.Experts) * float64(c.MoEInter) * float64(c.Hidden)},
		{"intermediate × hidden", float64(c.Intermediate+c.SharedInter) * float64(c.Hidden)},
	} {
		if s.v > lim {
			p.errf("%s (%g) is too large", s.name, s.v)
		}
	}
}
