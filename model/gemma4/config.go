// Package gemma4 implements the Gemma 4 text model (spec/models/gemma4.md):
// sliding-window and full attention layers in the pattern the config gives,
// the full layers' key=value heads with proportional RoPE, KV-shared layers
// that read an earlier layer's cache, per-layer embeddings, routed experts
// beside the dense MLP and the final logit cap. Its configuration is read in
// the save_pretrained spelling (Gemma4ForCausalLM, model_type gemma4_text)
// and in the Hub's multimodal one (Gemma4ForConditionalGeneration, the text
// model under text_config), its weights in the matching namings.
package gemma4

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
)

// Kind is a layer's attention.
type Kind int

const (
	Sliding Kind = iota // "sliding_attention": a window of the last W positions
	Full                // "full_attention": every earlier position
)

func (k Kind) String() string {
	if k == Full {
		return "full_attention"
	}
	return "sliding_attention"
}

// Layer is one decoder layer's resolved shape.
type Layer struct {
	Kind    Kind
	HeadDim int // dl: d for sliding layers, dg for full ones
	KVHeads int // Hl
	// KEqV: the layer has no v_proj; its values are its normed keys before
	// k_norm and RoPE (full layers with attention_k_eq_v).
	KEqV bool
	// Shared: the layer computes no K/V and reads Source's (the last
	// earlier non-shared layer of the same kind). Source is the layer
	// itself when it is not shared.
	Shared bool
	Source int
	// Intermediate is the dense MLP's width (doubled in the KV-shared
	// layers when use_double_wide_mlp is set).
	Intermediate int
}

// Rope is one layer kind's rotary embedding: Pairs of the head's Dim/2
// channel pairs (j, j + Dim/2) rotate, with inverse frequencies
// θ^(−2j/Dim) / Factor.
type Rope struct {
	Type   string // "default" or "proportional"
	Theta  float64
	Factor float64
	Dim    int // the head size the exponent divides by
	Pairs  int
}

// Config is the resolved architecture of a Gemma 4 text model.
type Config struct {
	// Multimodal: the config is the Hub's (the text model under
	// text_config) and the weights are named model.language_model.*; the
	// vision and audio towers in the checkpoint are not used.
	Multimodal bool
	// Unified: a Gemma 4 Unified config (gemma4_unified): its text decoder
	// is read for planning; loading it is not supported.
	Unified bool

	VocabSize int
	Hidden    int // D
	Heads     int // Hq, in every layer
	Layers    []Layer
	// Window is the sliding window W: a query sees itself and the W−1
	// positions before it.
	Window int
	// KVShared is num_kv_shared_layers: the last KVShared layers are
	// shared.
	KVShared int
	Rope     map[Kind]Rope

	// PLE is hidden_size_per_layer_input (0: no per-layer embeddings),
	// PLEVocab the rows of their table.
	PLE, PLEVocab int

	// MoE: every layer has routed experts beside the dense MLP.
	MoE           bool
	Experts       int // E
	ExpertsPerTok int // k
	MoEInter      int // Ie

	// Softcap is final_logit_softcapping (0: none).
	Softcap       float64
	RMSEps        float64
	TieEmbeddings bool
	MaxPosition   int
	BOS           int   // -1 when none
	EOS           []int // empty when none
}

// LayersOf lists the layers of kind k.
func (c *Config) LayersOf(k Kind) []int {
	var out []int
	for i, l := range c.Layers {
		if l.Kind == k {
			out = append(out, i)
		}
	}
	return out
}

// rawRope is one entry of rope_parameters.
type rawRope struct {
	RopeType            *string  `json:"rope_type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	Factor              *float64 `json:"factor"`
}

// rawLayerOverride is one entry of per_layer_config.
type rawLayerOverride struct {
	HeadDim          *int `json:"head_dim"`
	NumKeyValueHeads *int `json:"num_key_value_heads"`
}

// rawText is a text config as either spelling writes it.
type rawText struct {
	ModelType                 string                      `json:"model_type"`
	VocabSize                 *int                        `json:"vocab_size"`
	HiddenSize                *int                        `json:"hidden_size"`
	IntermediateSize          *int                        `json:"intermediate_size"`
	NumHiddenLayers           *int                        `json:"num_hidden_layers"`
	NumAttentionHeads         *int                        `json:"num_attention_heads"`
	NumKeyValueHeads          *int                        `json:"num_key_value_heads"`
	HeadDim                   *int                        `json:"head_dim"`
	GlobalHeadDim             *int                        `json:"global_head_dim"`
	NumGlobalKeyValueHeads    *int                        `json:"num_global_key_value_heads"`
	PerLayerConfig            map[string]rawLayerOverride `json:"per_layer_config"`
	HiddenActivation          *string                     `json:"hidden_activation"`
	MaxPositionEmbeddings     *int                        `json:"max_position_embeddings"`
	RMSNormEps                *float64                    `json:"rms_norm_eps"`
	TieWordEmbeddings         *bool                       `json:"tie_word_embeddings"`
	RopeParameters            map[string]*rawRope         `json:"rope_parameters"`
	AttentionBias             *bool                       `json:"attention_bias"`
	SlidingWindow             *int                        `json:"sliding_window"`
	LayerTypes                []string                    `json:"layer_types"`
	FinalLogitSoftcapping     *float64                    `json:"final_logit_softcapping"`
	UseBidirectionalAttention *string                     `json:"use_bidirectional_attention"`
	VocabSizePerLayerInput    *int                        `json:"vocab_size_per_layer_input"`
	HiddenSizePerLayerInput   *int                        `json:"hidden_size_per_layer_input"`
	AttentionKEqV             *bool                       `json:"attention_k_eq_v"`
	NumKVSharedLayers         *int                        `json:"num_kv_shared_layers"`
	EnableMoEBlock            *bool                       `json:"enable_moe_block"`
	UseDoubleWideMLP          *bool                       `json:"use_double_wide_mlp"`
	NumExperts                *int                        `json:"num_experts"`
	TopKExperts               *int                        `json:"top_k_experts"`
	MoEIntermediateSize       *int                        `json:"moe_intermediate_size"`
	BOSTokenID                json.RawMessage             `json:"bos_token_id"`
	EOSTokenID                json.RawMessage             `json:"eos_token_id"`
}

// rawTop is the part of the Hub's multimodal config outside text_config.
type rawTop struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	TextConfig        json.RawMessage `json:"text_config"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
}

// Limits that keep a hostile config from making the parser or the model
// allocate without bound; the released models are far inside them.
const (
	maxConfigBytes = 1 << 20
	maxLayers      = 1 << 12
	maxWidth       = 1 << 20 // hidden, head, intermediate sizes; heads; experts
	maxVocab       = 1 << 24
	maxPosition    = 1 << 26
)

// Model types and architectures of the spellings this package reads.
var (
	textTypes    = map[string]bool{"gemma4_text": true, "gemma4_unified_text": true}
	topTypes     = map[string]bool{"gemma4": true, "gemma4_unified": true}
	unifiedTypes = map[string]bool{"gemma4_unified": true, "gemma4_unified_text": true}
	knownArchs   = map[string]bool{"Gemma4ForCausalLM": true, "Gemma4ForConditionalGeneration": true, "Gemma4UnifiedForConditionalGeneration": true}
)

// LoadConfig reads and validates a config.json in either spelling.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gemma4: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("gemma4: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates config.json bytes: the text-only config
// save_pretrained writes (Gemma4ForCausalLM, model_type gemma4_text) or the
// Hub's multimodal one (Gemma4ForConditionalGeneration, model_type gemma4,
// the text model under text_config). Fields with defaults in the reference
// (transformers' Gemma4TextConfig) take those defaults; the sizes that
// define the shapes are required. Every problem found is reported, joined
// into one error.
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
	c := &Config{Multimodal: len(top.TextConfig) > 0 && string(top.TextConfig) != "null"}
	if c.Multimodal {
		text = top.TextConfig
	}
	var r rawText
	if err := decodeStrict(text, &r); err != nil {
		if c.Multimodal {
			return nil, fmt.Errorf("config: text_config: %w", err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	p.family(c, &top, &r)

	c.VocabSize = p.size("vocab_size", r.VocabSize, maxVocab)
	c.Hidden = p.size("hidden_size", r.HiddenSize, maxWidth)
	inter := p.size("intermediate_size", r.IntermediateSize, maxWidth)
	nLayers := p.size("num_hidden_layers", r.NumHiddenLayers, maxLayers)
	c.Heads = p.size("num_attention_heads", r.NumAttentionHeads, maxWidth)
	kvHeads := p.size("num_key_value_heads", r.NumKeyValueHeads, maxWidth)
	headDim := p.sizeOr("head_dim", r.HeadDim, 256, maxWidth)
	c.Window = p.sizeOr("sliding_window", r.SlidingWindow, 512, maxPosition)
	c.MaxPosition = p.sizeOr("max_position_embeddings", r.MaxPositionEmbeddings, 131072, maxPosition)
	c.RMSEps = floatOr(r.RMSNormEps, 1e-6)
	if !(c.RMSEps > 0 && c.RMSEps < 1) {
		p.errf("rms_norm_eps %g is not in (0, 1)", c.RMSEps)
	}
	if r.HiddenActivation != nil && *r.HiddenActivation != "gelu_pytorch_tanh" {
		p.errf("hidden_activation %q is not supported (want gelu_pytorch_tanh)", *r.HiddenActivation)
	}
	if r.AttentionBias != nil && *r.AttentionBias {
		p.errf("attention_bias true is not supported (Gemma 4 projections have no bias)")
	}
	if b := r.UseBidirectionalAttention; b != nil && *b != "vision" {
		p.errf("use_bidirectional_attention %q is not supported (text is causal; want null or \"vision\")", *b)
	}
	if s := r.FinalLogitSoftcapping; s != nil {
		if !(*s > 0) || math.IsInf(*s, 0) {
			p.errf("final_logit_softcapping %g is not a positive cap (null: none)", *s)
		} else {
			c.Softcap = *s
		}
	}

	c.TieEmbeddings = boolOr(r.TieWordEmbeddings, true)
	if top.TieWordEmbeddings != nil && c.Multimodal {
		if r.TieWordEmbeddings != nil && *r.TieWordEmbeddings != *top.TieWordEmbeddings {
			p.errf("tie_word_embeddings is %v at the top level but %v in text_config", *top.TieWordEmbeddings, *r.TieWordEmbeddings)
		}
		c.TieEmbeddings = *top.TieWordEmbeddings
	}
	c.BOS = -1
	if len(r.BOSTokenID) == 0 {
		c.BOS = 2 // the reference's default
	} else if ids := p.tokenIDs("bos_token_id", r.BOSTokenID); len(ids) > 0 {
		c.BOS = ids[0]
	}
	eos := r.EOSTokenID
	if (len(eos) == 0 || string(eos) == "null") && c.Multimodal {
		eos = top.EOSTokenID
	}
	if len(eos) == 0 {
		c.EOS = []int{1} // the reference's default
	} else {
		c.EOS = p.tokenIDs("eos_token_id", eos)
	}

	switch v := r.HiddenSizePerLayerInput; {
	case v == nil:
		c.PLE = 256 // the reference's default
	case *v != 0: // 0 turns per-layer embeddings off
		c.PLE = p.check("hidden_size_per_layer_input", *v, maxWidth)
	}
	if c.PLE > 0 {
		c.PLEVocab = p.sizeOr("vocab_size_per_layer_input", r.VocabSizePerLayerInput, 262144, maxVocab)
	}

	c.MoE = boolOr(r.EnableMoEBlock, false)
	if c.MoE {
		c.Experts = p.size("num_experts", r.NumExperts, maxWidth)
		c.ExpertsPerTok = p.size("top_k_experts", r.TopKExperts, maxWidth)
		c.MoEInter = p.size("moe_intermediate_size", r.MoEIntermediateSize, maxWidth)
		if c.Experts > 0 && c.ExpertsPerTok > c.Experts {
			p.errf("top_k_experts %d exceeds num_experts %d", c.ExpertsPerTok, c.Experts)
		}
	}

	c.KVShared = intOr(r.NumKVSharedLayers, 0)
	if c.KVShared < 0 || (nLayers > 0 && c.KVShared >= nLayers) {
		p.errf("num_kv_shared_layers %d must be in [0, num_hidden_layers %d)", c.KVShared, nLayers)
		c.KVShared = 0
	}
	p.resolveLayers(c, &r, nLayers, inter, kvHeads, headDim)
	p.resolveRope(c, &r, headDim)
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

// parser collects every problem of a config.
type parser struct{ errs []error }

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// size reads a required positive size no larger than limit (0 when absent
// or out of range, with the problem recorded).
func (p *parser) size(name string, v *int, limit int) int {
	if v == nil {
		p.errf("%s is missing", name)
		return 0
	}
	return p.check(name, *v, limit)
}

// sizeOr reads an optional positive size with a default.
func (p *parser) sizeOr(name string, v *int, def, limit int) int {
	if v == nil {
		return def
	}
	return p.check(name, *v, limit)
}

func (p *parser) check(name string, v, limit int) int {
	if v <= 0 || v > limit {
		p.errf("%s %d is not in [1, %d]", name, v, limit)
		return 0
	}
	return v
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

// family checks model_type and architectures.
func (p *parser) family(c *Config, top *rawTop, r *rawText) {
	if c.Multimodal {
		if t := top.ModelType; t != "" && !topTypes[t] {
			p.errf("model_type %q is not a Gemma 4 multimodal type (want gemma4)", t)
		}
		if t := r.ModelType; t != "" && !textTypes[t] {
			p.errf("text_config.model_type %q is not a Gemma 4 text type (want gemma4_text)", t)
		}
		c.Unified = unifiedTypes[top.ModelType] || unifiedTypes[r.ModelType]
	} else {
		if t := r.ModelType; t != "" && !textTypes[t] {
			p.errf("model_type %q is not a Gemma 4 text type (want gemma4_text, or gemma4 with a text_config)", t)
		}
		c.Unified = unifiedTypes[r.ModelType]
	}
	for _, a := range top.Architectures {
		if !knownArchs[a] {
			p.errf("architecture %q is not a Gemma 4 architecture", a)
		}
		if a == "Gemma4UnifiedForConditionalGeneration" {
			c.Unified = true
		}
	}
}

// tokenIDs reads a token id, null or a list of ids.
func (p *parser) tokenIDs(name string, raw json.RawMessage) []int {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			p.errf("%s %d is negative", name, n)
			return nil
		}
		return []int{n}
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil {
		for _, v := range list {
			if v < 0 {
				p.errf("%s holds the negative id %d", name, v)
				return nil
			}
		}
		return list
	}
	p.errf("%s: %.40s is not a token id or a list of them", name, raw)
	return nil
}

// resolveLayers reads layer_types (default: every sixth layer full, the
// last one forced to full, as the reference does), each layer's head size
// and KV heads (per_layer_config, or global_head_dim and
// num_global_key_value_heads for the full layers), and the KV sharing.
func (p *parser) resolveLayers(c *Config, r *rawText, n, inter, kvHeads, headDim int) {
	if n == 0 {
		return
	}
	kinds := make([]Kind, n)
	switch {
	case r.LayerTypes == nil:
		for i := range kinds {
			if (i+1)%6 == 0 {
				kinds[i] = Full
			}
		}
	case len(r.LayerTypes) != n:
		p.errf("layer_types has %d entries for %d layers", len(r.LayerTypes), n)
		return
	default:
		for i, t := range r.LayerTypes {
			switch t {
			case "sliding_attention":
				kinds[i] = Sliding
			case "full_attention":
				kinds[i] = Full
			default:
				p.errf("layer_types[%d] %q is not sliding_attention or full_attention", i, t)
			}
		}
	}
	kinds[n-1] = Full // the reference forces the last layer to full attention

	kEqV := boolOr(r.AttentionKEqV, false)
	over := map[int]rawLayerOverride{}
	if r.PerLayerConfig != nil {
		keys := make([]string, 0, len(r.PerLayerConfig))
		for k := range r.PerLayerConfig {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= n {
				p.errf("per_layer_config key %q is not a layer index in [0, %d)", k, n)
				continue
			}
			over[i] = r.PerLayerConfig[k]
		}
	} else {
		// The config class's translation of the Hub fields.
		o := rawLayerOverride{HeadDim: r.GlobalHeadDim}
		if o.HeadDim == nil {
			def := 512
			o.HeadDim = &def
		}
		if kEqV {
			o.NumKeyValueHeads = r.NumGlobalKeyValueHeads
		}
		for i, k := range kinds {
			if k == Full {
				over[i] = o
			}
		}
	}

	first := n - c.KVShared // the first KV-shared layer
	doubleWide := boolOr(r.UseDoubleWideMLP, false)
	c.Layers = make([]Layer, n)
	for i, k := range kinds {
		l := Layer{Kind: k, HeadDim: headDim, KVHeads: kvHeads, Source: i, Intermediate: inter}
		if o, ok := over[i]; ok {
			if o.HeadDim != nil {
				l.HeadDim = p.check(fmt.Sprintf("per_layer_config[%d].head_dim", i), *o.HeadDim, maxWidth)
			}
			if o.NumKeyValueHeads != nil {
				l.KVHeads = p.check(fmt.Sprintf("per_layer_config[%d].num_key_value_heads", i), *o.NumKeyValueHeads, maxWidth)
			}
		}
		l.KEqV = kEqV && k == Full
		if c.KVShared > 0 && i >= first {
			l.Shared = true
			if doubleWide && first > 0 {
				l.Intermediate = 2 * inter
			}
		}
		if l.HeadDim%2 != 0 {
			p.errf("layer %d: head size %d is odd (RoPE pairs channels)", i, l.HeadDim)
		}
		if l.KVHeads > 0 && c.Heads > 0 && c.Heads%l.KVHeads != 0 {
			p.errf("layer %d: num_attention_heads %d is not a multiple of its %d KV heads", i, c.Heads, l.KVHeads)
		}
		c.Layers[i] = l
	}
	for i := first; c.KVShared > 0 && i < n; i++ {
		l := &c.Layers[i]
		src := -1
		for j := first - 1; j >= 0; j-- {
			if c.Layers[j].Kind == l.Kind {
				src = j
				break
			}
		}
		if src < 0 {
			p.errf("layer %d is KV-shared but no earlier non-shared layer is %s", i, l.Kind)
			continue
		}
		s := c.Layers[src]
		if s.HeadDim != l.HeadDim || s.KVHeads != l.KVHeads || s.KEqV != l.KEqV {
			p.errf("layer %d reads layer %d's KV but their heads differ (%d×%d against %d×%d)", i, src, l.KVHeads, l.HeadDim, s.KVHeads, s.HeadDim)
		}
		l.Source = src
	}
	if c.Hidden > 0 && c.Heads > 0 {
		for i, l := range c.Layers {
			if int64(c.Heads)*int64(l.HeadDim) > maxWidth || int64(l.KVHeads)*int64(l.HeadDim) > maxWidth {
				p.errf("layer %d: %d heads of %d channels are too wide", i, c.Heads, l.HeadDim)
			}
		}
	}
}

// resolveRope reads rope_parameters (the reference's defaults when absent):
// default RoPE rotates every pair of the head, proportional RoPE the first
// floor(partial·Dim/2) pairs with exponents still divided by Dim.
func (p *parser) resolveRope(c *Config, r *rawText, headDim int) {
	params := r.RopeParameters
	if params == nil {
		params = map[string]*rawRope{
			"sliding_attention": {RopeType: strPtr("default"), RopeTheta: fPtr(10000)},
			"full_attention":    {RopeType: strPtr("proportional"), PartialRotaryFactor: fPtr(0.25), RopeTheta: fPtr(1e6)},
		}
	}
	for k := range params {
		if k != "sliding_attention" && k != "full_attention" {
			p.errf("rope_parameters has an entry for %q (want sliding_attention and full_attention)", k)
		}
	}
	c.Rope = map[Kind]Rope{}
	for _, k := range []Kind{Sliding, Full} {
		layers := c.LayersOf(k)
		if len(layers) == 0 {
			continue
		}
		raw := params[k.String()]
		if raw == nil {
			p.errf("rope_parameters has no %s entry", k)
			continue
		}
		dim := c.Layers[layers[0]].HeadDim
		for _, i := range layers {
			if c.Layers[i].HeadDim != dim {
				p.errf("%s layers %d and %d have head sizes %d and %d: one RoPE per kind needs one size", k, layers[0], i, dim, c.Layers[i].HeadDim)
				break
			}
		}
		ro := Rope{Type: "default", Theta: floatOr(raw.RopeTheta, 0), Factor: floatOr(raw.Factor, 1), Dim: dim}
		if raw.RopeType != nil {
			ro.Type = *raw.RopeType
		}
		if !(ro.Theta > 1) || math.IsInf(ro.Theta, 0) {
			p.errf("rope_parameters.%s.rope_theta %g is not a base above 1", k, ro.Theta)
		}
		if !(ro.Factor > 0) || math.IsInf(ro.Factor, 0) {
			p.errf("rope_parameters.%s.factor %g is not positive", k, ro.Factor)
		}
		partial := floatOr(raw.PartialRotaryFactor, 1)
		switch ro.Type {
		case "default":
			if raw.Factor != nil && *raw.Factor != 1 {
				p.errf("rope_parameters.%s: default RoPE takes no factor", k)
			}
			if raw.PartialRotaryFactor != nil && partial != 1 {
				p.errf("rope_parameters.%s: default RoPE rotates every channel (partial_rotary_factor %g); use proportional", k, partial)
			}
			if k == Full && dim != headDim {
				// The reference sizes default RoPE by head_dim, which
				// does not fit a full layer of another size.
				p.errf("rope_parameters.full_attention: default RoPE for full layers of %d channels (head_dim %d); want proportional", dim, headDim)
			}
			ro.Pairs = dim / 2
		case "proportional":
			if !(partial > 0 && partial <= 1) {
				p.errf("rope_parameters.%s.partial_rotary_factor %g is not in (0, 1]", k, partial)
				partial = 1
			}
			ro.Pairs = int(math.Floor(partial * float64(dim) / 2))
		default:
			p.errf("rope_parameters.%s.rope_type %q is not supported (want default or proportional)", k, ro.Type)
		}
		c.Rope[k] = ro
	}
}

func strPtr(s string) *string { return &s }
func fPtr(f float64) *float64 { return &f }

// InvFreq is the kind's inverse frequencies, as the reference computes
// them in float32: 1/θ^(float32(2j)/float32(Dim)) / Factor for j < Pairs.
func (r Rope) InvFreq() []float32 {
	out := make([]float32, r.Pairs)
	for j := range out {
		e := float32(2*j) / float32(r.Dim)
		out[j] = float32(1/float32(math.Pow(r.Theta, float64(e)))) / float32(r.Factor)
	}
	return out
}
