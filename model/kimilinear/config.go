// Package kimilinear implements Kimi Linear (spec/models/kimi-linear.md,
// transformers' KimiLinearForCausalLM, model_type kimi_linear): KDA layers
// (Kimi Delta Attention, a gated delta rule with a decay per key channel,
// after a short causal convolution) interleaved with MLA layers that carry
// no positional encoding, and DeepSeek's noaux MoE. Its configuration is
// read in the save_pretrained spelling and in the released checkpoints'
// (linear_attn_config with 1-based layer lists), its weights in the
// save_pretrained naming, which the released checkpoints share. The
// per-request state is three cache kinds: the MLA latents (append, one slot
// per token), and per KDA layer the delta-rule state and the conv history
// (recurrent). The forward pass is composed of backend ops: compute.KDA's
// per-channel delta rule, compute.Recurrent's convolution, compute.MLA's
// absorbed latent attention and routed MoE.
//
// Kimi-K3 (the handbook's 93-layer model) uses the same two layer kinds but
// a latent MoE, which no reference implements (transformers 5.17 has no
// Kimi-K3 model); this package runs Kimi Linear only.
package kimilinear

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
)

// LayerKind is the token mixer of one decoder layer.
type LayerKind int

const (
	KDA LayerKind = iota // Kimi Delta Attention ("linear_attention")
	MLA                  // multi-head latent attention without RoPE ("full_attention")
)

func (k LayerKind) String() string {
	if k == MLA {
		return "full_attention"
	}
	return "linear_attention"
}

// Config is the resolved architecture of a Kimi Linear model.
type Config struct {
	VocabSize int
	Hidden    int // D
	Layers    []LayerKind
	// Dense[l]: layer l's FFN is a dense SwiGLU of width Intermediate;
	// otherwise the MoE.
	Dense        []bool
	Intermediate int

	// KDA.
	LinHeads   int // Hl
	LinHeadDim int // dk (q, k and v heads alike)
	ConvKernel int // K

	// MLA.
	Heads      int // H
	KVLoraRank int // c
	NopeDim    int // n
	RopeDim    int // r: the unrotated shared key part
	VDim       int // dv
	QLoraRank  int // 0: a plain q_proj

	// MoE (DeepSeek noaux routing).
	Experts       int // E
	ExpertsPerTok int // k
	SharedExperts int
	MoEInter      int // Ie
	RoutedScale   float64
	NormTopK      bool
	Groups        int
	TopGroups     int

	RMSEps        float64
	TieEmbeddings bool
	MaxPosition   int
	BOS           int   // -1 when none
	EOS           []int // empty when none
}

// NumLayers is the number of decoder layers.
func (c *Config) NumLayers() int { return len(c.Layers) }

// LinDim is the width of KDA's q, k and v, Hl·dk.
func (c *Config) LinDim() int { return c.LinHeads * c.LinHeadDim }

// ConvDim is the number of channels of the short convolution, 3·Hl·dk.
func (c *Config) ConvDim() int { return 3 * c.LinDim() }

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

// SoftmaxScale is MLA's (n + r)^(-1/2).
func (c *Config) SoftmaxScale() float64 { return 1 / math.Sqrt(float64(c.NopeDim+c.RopeDim)) }

type rawLinear struct {
	FullAttnLayers      []int `json:"full_attn_layers"`
	KDALayers           []int `json:"kda_layers"`
	NumHeads            *int  `json:"num_heads"`
	HeadDim             *int  `json:"head_dim"`
	ShortConvKernelSize *int  `json:"short_conv_kernel_size"`
}

// raw is config.json in either spelling (the aliases the config class
// accepts included).
type raw struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures"`
	VocabSize             *int            `json:"vocab_size"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	LayerTypes            []string        `json:"layer_types"`
	MLPLayerTypes         []string        `json:"mlp_layer_types"`
	FirstKDenseReplace    *int            `json:"first_k_dense_replace"`
	MoELayerFreq          *int            `json:"moe_layer_freq"`
	LinearNumHeads        *int            `json:"linear_num_heads"`
	LinearHeadDim         *int            `json:"linear_head_dim"`
	LinearConvKernelDim   *int            `json:"linear_conv_kernel_dim"`
	LinearAttnConfig      *rawLinear      `json:"linear_attn_config"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	KVLoraRank            *int            `json:"kv_lora_rank"`
	QKNopeHeadDim         *int            `json:"qk_nope_head_dim"`
	QKRopeHeadDim         *int            `json:"qk_rope_head_dim"`
	QKHeadDim             *int            `json:"qk_head_dim"`
	VHeadDim              *int            `json:"v_head_dim"`
	QLoraRank             *int            `json:"q_lora_rank"`
	NumExperts            *int            `json:"num_experts"`
	NumLocalExperts       *int            `json:"num_local_experts"`
	NumExpertsPerToken    *int            `json:"num_experts_per_token"`
	NumExpertsPerTok      *int            `json:"num_experts_per_tok"`
	NumSharedExperts      *int            `json:"num_shared_experts"`
	NSharedExperts        *int            `json:"n_shared_experts"`
	MoEIntermediateSize   *int            `json:"moe_intermediate_size"`
	RoutedScalingFactor   *float64        `json:"routed_scaling_factor"`
	MoERenormalize        *bool           `json:"moe_renormalize"`
	NormTopKProb          *bool           `json:"norm_topk_prob"`
	NumExpertGroup        *int            `json:"num_expert_group"`
	NGroup                *int            `json:"n_group"`
	TopKGroup             *int            `json:"topk_group"`
	MoERouterActivation   *string         `json:"moe_router_activation_func"`
	MLAUseNope            *bool           `json:"mla_use_nope"`
	HiddenAct             *string         `json:"hidden_act"`
	AttentionBias         *bool           `json:"attention_bias"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	ModelMaxLength        *int            `json:"model_max_length"`
	NumNextnPredictLayers *int            `json:"num_nextn_predict_layers"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
}

// Limits that keep a hostile config from making the parser or the model
// allocate without bound; the released models are far inside them.
const (
	maxConfigBytes = 1 << 20
	maxLayers      = 1 << 12
	maxWidth       = 1 << 20
	maxVocab       = 1 << 24
	maxPosition    = 1 << 26
)

// DefaultMaxPosition is the context limit when the config names none
// (neither max_position_embeddings nor model_max_length).
const DefaultMaxPosition = 1 << 20

// LoadConfig reads and validates a config.json.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kimilinear: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("kimilinear: %s: %w", path, err)
	}
	return c, nil
}

type parser struct{ errs []error }

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// req returns the first set value of the named fields (aliases), or
// records that the first name is missing.
func (p *parser) req(name string, vs ...*int) int {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	p.errf("%s is missing", name)
	return 0
}

func first(d int, vs ...*int) int {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return d
}

// ParseConfig parses and validates config.json bytes. Every problem found
// is reported, joined into one error. Fields with defaults in the
// reference (KimiLinearConfig) take them; the sizes that define the
// shapes are required.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var r raw
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("config: trailing data after the JSON object")
	}
	p := &parser{}
	if r.ModelType != "" && r.ModelType != "kimi_linear" {
		p.errf("model_type %q is not kimi_linear", r.ModelType)
	}
	for _, a := range r.Architectures {
		if a != "KimiLinearForCausalLM" {
			p.errf("architecture %q is not KimiLinearForCausalLM", a)
		}
	}
	c := &Config{}
	la := r.LinearAttnConfig
	if la == nil {
		la = &rawLinear{}
	}
	c.VocabSize = p.req("vocab_size", r.VocabSize)
	c.Hidden = p.req("hidden_size", r.HiddenSize)
	c.Intermediate = p.req("intermediate_size", r.IntermediateSize)
	nLayers := p.req("num_hidden_layers", r.NumHiddenLayers)
	c.LinHeads = p.req("linear_num_heads", r.LinearNumHeads, la.NumHeads)
	c.LinHeadDim = p.req("linear_head_dim", r.LinearHeadDim, la.HeadDim)
	c.ConvKernel = first(4, r.LinearConvKernelDim, la.ShortConvKernelSize)
	c.Heads = p.req("num_attention_heads", r.NumAttentionHeads)
	c.KVLoraRank = p.req("kv_lora_rank", r.KVLoraRank)
	c.NopeDim = p.req("qk_nope_head_dim", r.QKNopeHeadDim)
	c.RopeDim = p.req("qk_rope_head_dim", r.QKRopeHeadDim)
	c.VDim = p.req("v_head_dim", r.VHeadDim)
	c.QLoraRank = first(0, r.QLoraRank)
	c.Experts = p.req("num_experts", r.NumExperts, r.NumLocalExperts)
	c.ExpertsPerTok = p.req("num_experts_per_token", r.NumExpertsPerToken, r.NumExpertsPerTok)
	c.SharedExperts = first(1, r.NumSharedExperts, r.NSharedExperts)
	c.MoEInter = p.req("moe_intermediate_size", r.MoEIntermediateSize)
	c.RoutedScale = 1
	if r.RoutedScalingFactor != nil {
		c.RoutedScale = *r.RoutedScalingFactor
	}
	c.NormTopK = true
	if r.MoERenormalize != nil {
		c.NormTopK = *r.MoERenormalize
	} else if r.NormTopKProb != nil {
		c.NormTopK = *r.NormTopKProb
	}
	c.Groups = first(1, r.NumExpertGroup, r.NGroup)
	c.TopGroups = first(1, r.TopKGroup)
	c.RMSEps = 1e-5
	if r.RMSNormEps != nil {
		c.RMSEps = *r.RMSNormEps
	}
	c.TieEmbeddings = r.TieWordEmbeddings != nil && *r.TieWordEmbeddings
	c.MaxPosition = first(DefaultMaxPosition, r.MaxPositionEmbeddings, r.ModelMaxLength)
	c.BOS = p.tokenID("bos_token_id", r.BOSTokenID)
	c.EOS = p.tokenIDs("eos_token_id", r.EOSTokenID)

	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		p.errf("hidden_act %q is not supported (want silu)", *r.HiddenAct)
	}
	if r.AttentionBias != nil && *r.AttentionBias {
		p.errf("attention_bias true is not supported (Kimi Linear's projections have no bias)")
	}
	if r.MoERouterActivation != nil && *r.MoERouterActivation != "sigmoid" {
		p.errf("moe_router_activation_func %q is not supported (want sigmoid)", *r.MoERouterActivation)
	}
	if r.MLAUseNope != nil && !*r.MLAUseNope {
		p.errf("mla_use_nope false (MLA with RoPE) is not supported: Kimi Linear's MLA has no positional encoding")
	}
	if r.QKHeadDim != nil && r.QKNopeHeadDim != nil && r.QKRopeHeadDim != nil && *r.QKHeadDim != *r.QKNopeHeadDim+*r.QKRopeHeadDim {
		p.errf("qk_head_dim %d is not qk_nope_head_dim + qk_rope_head_dim = %d", *r.QKHeadDim, *r.QKNopeHeadDim+*r.QKRopeHeadDim)
	}
	if r.NumNextnPredictLayers != nil && *r.NumNextnPredictLayers != 0 {
		p.errf("num_nextn_predict_layers %d is not supported (no MTP layers)", *r.NumNextnPredictLayers)
	}
	if nLayers < 0 || nLayers > maxLayers {
		p.errf("num_hidden_layers %d is outside [1, %d]", nLayers, maxLayers)
		nLayers = 0
	}
	p.resolveLayers(c, &r, la, nLayers)
	c.validate(p)
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(p.errs...))
	}
	return c, nil
}

// resolveLayers reads the token mixers from layer_types, else from
// linear_attn_config's 1-based full_attn_layers / kda_layers, else the
// reference's default (MLA at 0-based layers 4, 8, ...); and the FFNs from
// mlp_layer_types, else the first first_k_dense_replace (default 1)
// layers dense and after them the layers whose index is a multiple of
// moe_layer_freq (default 1) sparse.
func (p *parser) resolveLayers(c *Config, r *raw, la *rawLinear, n int) {
	c.Layers = make([]LayerKind, n)
	switch {
	case r.LayerTypes != nil:
		if len(r.LayerTypes) != n {
			p.errf("layer_types has %d entries for %d layers", len(r.LayerTypes), n)
		}
		for i, t := range r.LayerTypes {
			if i >= n {
				break
			}
			switch t {
			case "linear_attention":
				c.Layers[i] = KDA
			case "full_attention":
				c.Layers[i] = MLA
			default:
				p.errf("layer_types[%d] %q is not linear_attention or full_attention", i, t)
			}
		}
	case la.FullAttnLayers != nil || la.KDALayers != nil:
		kind := make([]int, n) // 0 unset, 1 KDA, 2 MLA
		mark := func(name string, ls []int, k int) {
			for _, l := range ls {
				switch {
				case l < 1 || l > n:
					p.errf("linear_attn_config.%s: layer %d is outside 1..%d", name, l, n)
				case kind[l-1] != 0:
					p.errf("linear_attn_config.%s: layer %d is listed twice", name, l)
				default:
					kind[l-1] = k
				}
			}
		}
		mark("kda_layers", la.KDALayers, 1)
		mark("full_attn_layers", la.FullAttnLayers, 2)
		for i, k := range kind {
			switch {
			case k == 2:
				c.Layers[i] = MLA
			case k == 0 && la.KDALayers != nil && la.FullAttnLayers != nil:
				p.errf("linear_attn_config: layer %d is in neither kda_layers nor full_attn_layers", i+1)
			}
		}
	default:
		for i := range c.Layers {
			if i > 0 && i%4 == 0 {
				c.Layers[i] = MLA
			}
		}
	}
	c.Dense = make([]bool, n)
	if r.MLPLayerTypes != nil {
		if len(r.MLPLayerTypes) != n {
			p.errf("mlp_layer_types has %d entries for %d layers", len(r.MLPLayerTypes), n)
		}
		for i, t := range r.MLPLayerTypes {
			if i >= n {
				break
			}
			switch t {
			case "dense":
				c.Dense[i] = true
			case "sparse":
			default:
				p.errf("mlp_layer_types[%d] %q is not dense or sparse", i, t)
			}
		}
		return
	}
	k, freq := first(1, r.FirstKDenseReplace), first(1, r.MoELayerFreq)
	if freq < 1 {
		p.errf("moe_layer_freq must be positive, got %d", freq)
		freq = 1
	}
	for i := range c.Dense {
		c.Dense[i] = i < k || i%freq != 0 // DeepSeek's rule: sparse where the layer index is a multiple of the frequency
	}
}

func (p *parser) tokenID(name string, raw json.RawMessage) int {
	ids := p.tokenIDs(name, raw)
	if len(ids) == 0 {
		return -1
	}
	return ids[0]
}

func (p *parser) tokenIDs(name string, raw json.RawMessage) []int {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return []int{n}
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil && len(list) <= 64 {
		return list
	}
	p.errf("%s: %.40s is not a token id or a short list of them", name, raw)
	return nil
}

func (c *Config) validate(p *parser) {
	in := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			p.errf("%s %d is outside [%d, %d]", name, v, lo, hi)
		}
	}
	in("vocab_size", c.VocabSize, 1, maxVocab)
	in("hidden_size", c.Hidden, 1, maxWidth)
	in("num_hidden_layers", len(c.Layers), 1, maxLayers)
	in("max_position_embeddings", c.MaxPosition, 1, maxPosition)
	in("linear_conv_kernel_dim", c.ConvKernel, 1, 64)
	hasKDA, hasMLA := slices.Contains(c.Layers, KDA), slices.Contains(c.Layers, MLA)
	if hasKDA {
		in("linear_num_heads", c.LinHeads, 1, maxWidth)
		in("linear_head_dim", c.LinHeadDim, 1, 1<<12)
	}
	if hasMLA {
		in("num_attention_heads", c.Heads, 1, maxWidth)
		in("kv_lora_rank", c.KVLoraRank, 1, maxWidth)
		in("qk_nope_head_dim", c.NopeDim, 1, maxWidth)
		in("qk_rope_head_dim", c.RopeDim, 1, maxWidth)
		in("v_head_dim", c.VDim, 1, maxWidth)
		in("q_lora_rank", c.QLoraRank, 0, maxWidth)
	}
	if slices.Contains(c.Dense, true) {
		in("intermediate_size", c.Intermediate, 1, maxWidth)
	}
	if slices.Contains(c.Dense, false) {
		in("num_experts", c.Experts, 1, 1<<14)
		in("num_experts_per_token", c.ExpertsPerTok, 1, max(1, c.Experts))
		in("num_shared_experts", c.SharedExperts, 1, 64)
		in("moe_intermediate_size", c.MoEInter, 1, maxWidth)
		in("num_expert_group", c.Groups, 1, max(1, c.Experts))
		in("topk_group", c.TopGroups, 1, max(1, c.Groups))
		if c.Groups > 0 && c.Experts%c.Groups != 0 {
			p.errf("num_experts %d is not a multiple of num_expert_group %d", c.Experts, c.Groups)
		}
		if !(c.RoutedScale > 0) || math.IsInf(c.RoutedScale, 0) {
			p.errf("routed_scaling_factor must be positive and finite, got %g", c.RoutedScale)
		}
	}
	if !(c.RMSEps > 0) || math.IsInf(c.RMSEps, 0) {
		p.errf("rms_norm_eps must be positive and finite, got %g", c.RMSEps)
	}
	if c.BOS < -1 || c.BOS >= c.VocabSize && c.VocabSize > 0 {
		p.errf("bos_token_id %d is outside the vocabulary of %d", c.BOS, c.VocabSize)
	}
	for _, e := range c.EOS {
		if e < 0 || e >= c.VocabSize && c.VocabSize > 0 {
			p.errf("eos_token_id %d is outside the vocabulary of %d", e, c.VocabSize)
		}
	}
	// Products that size allocations must not overflow.
	const lim = 1 << 40
	for _, s := range []struct {
		name string
		v    float64
	}{
		{"vocab_size × hidden_size", float64(c.VocabSize) * float64(c.Hidden)},
		{"KDA heads × head_dim² ", float64(c.LinHeads) * float64(c.LinHeadDim) * float64(c.LinHeadDim)},
		{"KDA width × hidden_size", float64(c.LinHeads) * float64(c.LinHeadDim) * float64(c.Hidden)},
		{"MLA heads × widths × kv_lora_rank", float64(c.Heads) * float64(c.NopeDim+c.RopeDim+c.VDim) * float64(max(c.KVLoraRank, c.Hidden, c.QLoraRank))},
		{"experts × widths", float64(c.Experts+c.SharedExperts) * float64(c.MoEInter) * float64(c.Hidden)},
		{"intermediate × hidden", float64(c.Intermediate) * float64(c.Hidden)},
	} {
		if s.v > lim {
			p.errf("%s (%g) is too large", s.name, s.v)
		}
	}
}
