// Package deepseekv4 implements the DeepSeek-V4 architecture (Flash and Pro):
// its configuration in both spellings, weight binding for both tensor
// namings, and the forward pass of spec/deepseek-v4.md §3 over a ragged batch.
package deepseekv4

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
)

// AttnKind is the attention variant of one layer.
type AttnKind int

const (
	Window AttnKind = iota // sliding window only
	CSA                    // compressed sparse attention: overlapping compressor + lightning indexer
	HCA                    // heavily compressed attention: non-overlapping compressor, all entries attended
)

func (k AttnKind) String() string {
	switch k {
	case Window:
		return "window"
	case CSA:
		return "csa"
	case HCA:
		return "hca"
	}
	return fmt.Sprintf("AttnKind(%d)", int(k))
}

// LayerSpec describes one decoder layer.
type LayerSpec struct {
	Attn AttnKind
	Rate int  // compression rate; 0 for Window layers
	Hash bool // MoE routed by the token-id table tid2eid instead of the learned router
}

// Yarn holds YaRN frequency-scaling parameters (spec §3, "RoPE").
type Yarn struct {
	Factor      float64
	OriginalMax float64
	BetaFast    float64
	BetaSlow    float64
}

// Config is the resolved architecture of a DeepSeek-V4 checkpoint.
type Config struct {
	VocabSize     int
	Hidden        int // D
	NumLayers     int
	Heads         int // H
	HeadDim       int // d
	RopeDim       int // trailing channels of a head that carry RoPE
	QLoraRank     int
	OGroups       int
	OLoraRank     int
	IndexHeads    int
	IndexHeadDim  int
	IndexTopK     int
	Experts       int
	ExpertsPerTok int
	MoEInter      int
	HCMult        int
	SinkhornIters int
	HCEps         float64
	Window        int
	Layers        []LayerSpec
	// MTP holds the multi-token-prediction layers (num_nextn_predict_layers);
	// they are window-only blocks with learned routing.
	MTP []LayerSpec

	RoutedScale       float64
	SwigluLimit       float64
	RMSEps            float64
	Scoring           string // sqrtsoftplus, sigmoid or softmax
	RopeTheta         float64
	CompressRopeTheta float64
	Yarn              *Yarn // nil: compressed layers use plain RoPE at CompressRopeTheta
	BOS, EOS          int
	TieEmbeddings     bool

	// FP8Block is the weight block of FP8-quantized matrices ([128,128] in
	// released checkpoints); nil when the checkpoint is not quantized.
	FP8Block    []int
	ExpertDType string // "fp4" in released checkpoints; "" otherwise
	MaxPosition int
}

// rawConfig is config.json as either spelling writes it.
type rawConfig struct {
	ModelType             string             `json:"model_type"`
	VocabSize             *int               `json:"vocab_size"`
	HiddenSize            *int               `json:"hidden_size"`
	NumHiddenLayers       *int               `json:"num_hidden_layers"`
	NumAttentionHeads     *int               `json:"num_attention_heads"`
	NumKeyValueHeads      *int               `json:"num_key_value_heads"`
	HeadDim               *int               `json:"head_dim"`
	QKRopeHeadDim         *int               `json:"qk_rope_head_dim"`
	PartialRotaryFactor   *float64           `json:"partial_rotary_factor"`
	QLoraRank             *int               `json:"q_lora_rank"`
	OGroups               *int               `json:"o_groups"`
	OLoraRank             *int               `json:"o_lora_rank"`
	IndexNHeads           *int               `json:"index_n_heads"`
	IndexHeadDim          *int               `json:"index_head_dim"`
	IndexTopK             *int               `json:"index_topk"`
	NRoutedExperts        *int               `json:"n_routed_experts"`
	NumExpertsPerTok      *int               `json:"num_experts_per_tok"`
	MoEIntermediateSize   *int               `json:"moe_intermediate_size"`
	NSharedExperts        *int               `json:"n_shared_experts"`
	HCMult                *int               `json:"hc_mult"`
	HCSinkhornIters       *int               `json:"hc_sinkhorn_iters"`
	HCEps                 *float64           `json:"hc_eps"`
	SlidingWindow         *int               `json:"sliding_window"`
	CompressRatios        []int              `json:"compress_ratios"`
	LayerTypes            []string           `json:"layer_types"`
	CompressRates         map[string]int     `json:"compress_rates"`
	CompressRateCSA       *int               `json:"compress_rate_csa"`
	CompressRateHCA       *int               `json:"compress_rate_hca"`
	NumHashLayers         *int               `json:"num_hash_layers"`
	MLPLayerTypes         []string           `json:"mlp_layer_types"`
	NumNextnPredictLayers *int               `json:"num_nextn_predict_layers"`
	RoutedScalingFactor   *float64           `json:"routed_scaling_factor"`
	SwigluLimit           *float64           `json:"swiglu_limit"`
	RMSNormEps            *float64           `json:"rms_norm_eps"`
	ScoringFunc           *string            `json:"scoring_func"`
	NormTopKProb          *bool              `json:"norm_topk_prob"`
	RopeTheta             *float64           `json:"rope_theta"`
	CompressRopeTheta     *float64           `json:"compress_rope_theta"`
	RopeScaling           map[string]any     `json:"rope_scaling"`
	RopeParameters        map[string]any     `json:"rope_parameters"`
	BOSTokenID            json.RawMessage    `json:"bos_token_id"`
	EOSTokenID            json.RawMessage    `json:"eos_token_id"`
	TieWordEmbeddings     *bool              `json:"tie_word_embeddings"`
	QuantizationConfig    *quantizationBlock `json:"quantization_config"`
	ExpertDType           *string            `json:"expert_dtype"`
	MaxPositionEmbeddings *int               `json:"max_position_embeddings"`
	HiddenAct             *string            `json:"hidden_act"`
}

type quantizationBlock struct {
	QuantMethod     string `json:"quant_method"`
	Fmt             string `json:"fmt"`
	ScaleFmt        string `json:"scale_fmt"`
	WeightBlockSize []int  `json:"weight_block_size"`
}

// Layer-type names of the transformers spelling.
const (
	typeWindow = "sliding_attention"
	typeCSA    = "compressed_sparse_attention"
	typeHCA    = "heavily_compressed_attention"
)

// maxConfigBytes bounds config.json; real ones are a few KB.
const maxConfigBytes = 1 << 20

// LoadConfig reads and validates a config.json in either spelling.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("deepseekv4: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("deepseekv4: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates config.json bytes in either spelling.
// Every problem found is reported, joined into one error.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var r rawConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if r.ModelType != "" && r.ModelType != "deepseek_v4" {
		return nil, fmt.Errorf("config: model_type %q is not deepseek_v4", r.ModelType)
	}
	p := &parser{}
	c := &Config{
		VocabSize:     p.req("vocab_size", r.VocabSize),
		Hidden:        p.req("hidden_size", r.HiddenSize),
		NumLayers:     p.req("num_hidden_layers", r.NumHiddenLayers),
		Heads:         p.req("num_attention_heads", r.NumAttentionHeads),
		HeadDim:       p.req("head_dim", r.HeadDim),
		QLoraRank:     p.req("q_lora_rank", r.QLoraRank),
		OGroups:       p.req("o_groups", r.OGroups),
		OLoraRank:     p.req("o_lora_rank", r.OLoraRank),
		IndexHeads:    p.req("index_n_heads", r.IndexNHeads),
		IndexHeadDim:  p.req("index_head_dim", r.IndexHeadDim),
		IndexTopK:     p.req("index_topk", r.IndexTopK),
		Experts:       p.req("n_routed_experts", r.NRoutedExperts),
		ExpertsPerTok: p.req("num_experts_per_tok", r.NumExpertsPerTok),
		MoEInter:      p.req("moe_intermediate_size", r.MoEIntermediateSize),
		HCMult:        intOr(r.HCMult, 4),
		SinkhornIters: intOr(r.HCSinkhornIters, 20),
		HCEps:         floatOr(r.HCEps, 1e-6),
		Window:        p.req("sliding_window", r.SlidingWindow),
		RoutedScale:   floatOr(r.RoutedScalingFactor, 1.5),
		SwigluLimit:   floatOr(r.SwigluLimit, 10),
		RMSEps:        floatOr(r.RMSNormEps, 1e-6),
		Scoring:       "sqrtsoftplus",
		MaxPosition:   intOr(r.MaxPositionEmbeddings, 1<<20),
	}
	if r.ScoringFunc != nil {
		c.Scoring = *r.ScoringFunc
	}
	if r.TieWordEmbeddings != nil {
		c.TieEmbeddings = *r.TieWordEmbeddings
	}
	if r.NumKeyValueHeads != nil && *r.NumKeyValueHeads != 1 {
		p.errf("num_key_value_heads is %d; DeepSeek-V4 has one shared key/value head", *r.NumKeyValueHeads)
	}
	if r.NSharedExperts != nil && *r.NSharedExperts != 1 {
		p.errf("n_shared_experts is %d; only 1 is supported", *r.NSharedExperts)
	}
	if r.NormTopKProb != nil && !*r.NormTopKProb {
		p.errf("norm_topk_prob false is not supported")
	}
	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		p.errf("hidden_act %q is not supported (want silu)", *r.HiddenAct)
	}
	c.BOS = p.tokenID("bos_token_id", r.BOSTokenID, 0)
	c.EOS = p.tokenID("eos_token_id", r.EOSTokenID, 1)

	p.resolveLayers(c, &r)
	p.resolveRope(c, &r)
	p.resolveQuant(c, &r)
	c.validate(p)
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(p.errs...))
	}
	return c, nil
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

// tokenID reads a token id that may be a number, null or a list (first entry).
func (p *parser) tokenID(name string, raw json.RawMessage, def int) int {
	if len(raw) == 0 || string(raw) == "null" {
		return def
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil && len(list) > 0 {
		return list[0]
	}
	p.errf("%s: %s is not a token id", name, raw)
	return def
}

// resolveLayers reads the per-layer attention kinds and MoE routing from either
// compress_ratios/num_hash_layers (Hub) or layer_types/compress_rates/mlp_layer_types
// (transformers). When both spellings are present they must agree.
func (p *parser) resolveLayers(c *Config, r *rawConfig) {
	n := c.NumLayers
	if n <= 0 {
		return
	}
	var fromRatios, fromTypes []LayerSpec
	var mtpRatio *int
	if r.CompressRatios != nil {
		ratios := r.CompressRatios
		switch len(ratios) {
		case n:
		case n + 1:
			mtpRatio = &ratios[n]
			ratios = ratios[:n]
		default:
			p.errf("compress_ratios has %d entries; want num_hidden_layers (%d) or one more for the MTP layer", len(ratios), n)
			ratios = nil
		}
		for i, rate := range ratios {
			switch {
			case rate == 0:
				fromRatios = append(fromRatios, LayerSpec{Attn: Window})
			case rate == 4:
				fromRatios = append(fromRatios, LayerSpec{Attn: CSA, Rate: 4})
			case rate > 0:
				fromRatios = append(fromRatios, LayerSpec{Attn: HCA, Rate: rate})
			default:
				p.errf("compress_ratios[%d] is %d", i, rate)
				fromRatios = append(fromRatios, LayerSpec{})
			}
		}
	}
	if r.LayerTypes != nil {
		if len(r.LayerTypes) != n {
			p.errf("layer_types has %d entries; want num_hidden_layers (%d)", len(r.LayerTypes), n)
		} else {
			rates := map[string]int{typeCSA: 4, typeHCA: 128}
			for k, v := range r.CompressRates {
				if k != typeCSA && k != typeHCA {
					p.errf("compress_rates: unknown layer type %q", k)
					continue
				}
				rates[k] = v
			}
			if r.CompressRateCSA != nil {
				rates[typeCSA] = *r.CompressRateCSA
			}
			if r.CompressRateHCA != nil {
				rates[typeHCA] = *r.CompressRateHCA
			}
			for i, t := range r.LayerTypes {
				switch t {
				case typeWindow:
					fromTypes = append(fromTypes, LayerSpec{Attn: Window})
				case typeCSA:
					fromTypes = append(fromTypes, LayerSpec{Attn: CSA, Rate: rates[typeCSA]})
				case typeHCA:
					fromTypes = append(fromTypes, LayerSpec{Attn: HCA, Rate: rates[typeHCA]})
				default:
					p.errf("layer_types[%d] is %q; want %s, %s or %s", i, t, typeWindow, typeCSA, typeHCA)
					fromTypes = append(fromTypes, LayerSpec{})
				}
			}
		}
	}
	switch {
	case fromRatios != nil && fromTypes != nil:
		for i := range fromRatios {
			if fromRatios[i] != fromTypes[i] {
				p.errf("layer %d: compress_ratios says %v rate %d but layer_types says %v rate %d",
					i, fromRatios[i].Attn, fromRatios[i].Rate, fromTypes[i].Attn, fromTypes[i].Rate)
			}
		}
		c.Layers = fromTypes
	case fromTypes != nil:
		c.Layers = fromTypes
	case fromRatios != nil:
		c.Layers = fromRatios
	default:
		p.errf("neither compress_ratios nor layer_types is given")
		return
	}
	if len(c.Layers) != n {
		return
	}

	hash := make([]bool, n)
	switch {
	case r.MLPLayerTypes != nil:
		if len(r.MLPLayerTypes) != n {
			p.errf("mlp_layer_types has %d entries; want num_hidden_layers (%d)", len(r.MLPLayerTypes), n)
			break
		}
		for i, t := range r.MLPLayerTypes {
			switch t {
			case "hash_moe":
				hash[i] = true
			case "moe":
			default:
				p.errf("mlp_layer_types[%d] is %q; want hash_moe or moe", i, t)
			}
		}
		if r.NumHashLayers != nil {
			for i := range hash {
				if hash[i] != (i < *r.NumHashLayers) {
					p.errf("num_hash_layers %d disagrees with mlp_layer_types", *r.NumHashLayers)
					break
				}
			}
		}
	default:
		k := intOr(r.NumHashLayers, 3)
		if k < 0 || k > n {
			p.errf("num_hash_layers %d is outside [0, %d]", k, n)
			break
		}
		for i := range k {
			hash[i] = true
		}
	}
	for i := range c.Layers {
		c.Layers[i].Hash = hash[i]
	}

	nMTP := intOr(r.NumNextnPredictLayers, 0)
	if nMTP < 0 {
		p.errf("num_nextn_predict_layers is %d", nMTP)
		nMTP = 0
	}
	if mtpRatio != nil && *mtpRatio != 0 {
		p.errf("compress_ratios gives the MTP layer rate %d; only window-only MTP layers are supported", *mtpRatio)
	}
	for range nMTP {
		c.MTP = append(c.MTP, LayerSpec{Attn: Window})
	}
}

// resolveRope reads RoPE dims, bases and YaRN from either spelling.
func (p *parser) resolveRope(c *Config, r *rawConfig) {
	main, _ := r.RopeParameters["main"].(map[string]any)
	compress, _ := r.RopeParameters["compress"].(map[string]any)

	c.RopeTheta = floatOr(r.RopeTheta, 10000)
	if v, ok := num(main, "rope_theta"); ok {
		c.RopeTheta = v
	}
	c.CompressRopeTheta = floatOr(r.CompressRopeTheta, 160000)
	if v, ok := num(compress, "rope_theta"); ok {
		c.CompressRopeTheta = v
	}

	// RoPE dims: qk_rope_head_dim, else partial_rotary_factor, else 64/512 of head_dim.
	factor := 64.0 / 512.0
	if r.PartialRotaryFactor != nil {
		factor = *r.PartialRotaryFactor
	} else if v, ok := num(main, "partial_rotary_factor"); ok {
		factor = v
	}
	c.RopeDim = int(float64(c.HeadDim) * factor)
	if r.QKRopeHeadDim != nil {
		if r.PartialRotaryFactor != nil && *r.QKRopeHeadDim != c.RopeDim {
			p.errf("qk_rope_head_dim %d disagrees with partial_rotary_factor %g of head_dim %d", *r.QKRopeHeadDim, *r.PartialRotaryFactor, c.HeadDim)
		}
		c.RopeDim = *r.QKRopeHeadDim
	}

	// YaRN: rope_scaling (Hub), rope_parameters.compress (transformers), or a flat
	// rope_parameters with rope_type yarn (transformers input before nesting).
	var yarn map[string]any
	switch {
	case compress != nil:
		yarn = compress
	case r.RopeScaling != nil:
		yarn = r.RopeScaling
	case r.RopeParameters != nil && main == nil:
		yarn = r.RopeParameters
	}
	if yarn == nil {
		return
	}
	kind, _ := yarn["rope_type"].(string)
	if kind == "" {
		kind, _ = yarn["type"].(string)
	}
	switch kind {
	case "", "default":
		return
	case "yarn":
	default:
		p.errf("rope type %q is not supported for compressed layers (want yarn or default)", kind)
		return
	}
	y := &Yarn{BetaFast: 32, BetaSlow: 1}
	var ok bool
	if y.OriginalMax, ok = num(yarn, "original_max_position_embeddings"); !ok {
		p.errf("yarn: original_max_position_embeddings is missing")
	}
	if y.Factor, ok = num(yarn, "factor"); !ok {
		y.Factor = float64(c.MaxPosition) / y.OriginalMax
	}
	if v, ok := num(yarn, "beta_fast"); ok && v != 0 {
		y.BetaFast = v
	}
	if v, ok := num(yarn, "beta_slow"); ok && v != 0 {
		y.BetaSlow = v
	}
	if v, ok := num(yarn, "attention_factor"); ok && v != 1 {
		p.errf("yarn: attention_factor %g is not supported (DeepSeek-V4 uses 1)", v)
	}
	if !(y.Factor > 0) || !(y.OriginalMax > 0) || !(y.BetaFast > 0) || !(y.BetaSlow > 0) {
		p.errf("yarn: factor %g, original_max_position_embeddings %g, beta_fast %g, beta_slow %g must be positive", y.Factor, y.OriginalMax, y.BetaFast, y.BetaSlow)
	}
	c.Yarn = y
}

func num(m map[string]any, key string) (float64, bool) {
	v, ok := m[key].(float64)
	return v, ok
}

func (p *parser) resolveQuant(c *Config, r *rawConfig) {
	if q := r.QuantizationConfig; q != nil {
		if q.QuantMethod != "fp8" {
			p.errf("quantization_config.quant_method %q is not supported (want fp8)", q.QuantMethod)
		}
		if q.Fmt != "" && q.Fmt != "e4m3" {
			p.errf("quantization_config.fmt %q is not supported (want e4m3)", q.Fmt)
		}
		if q.ScaleFmt != "" && q.ScaleFmt != "ue8m0" {
			p.errf("quantization_config.scale_fmt %q is not supported (want ue8m0)", q.ScaleFmt)
		}
		c.FP8Block = []int{128, 128}
		if q.WeightBlockSize != nil {
			if len(q.WeightBlockSize) != 2 || q.WeightBlockSize[0] <= 0 || q.WeightBlockSize[1] <= 0 {
				p.errf("quantization_config.weight_block_size %v is not two positive ints", q.WeightBlockSize)
			} else {
				c.FP8Block = q.WeightBlockSize
			}
		}
	}
	if r.ExpertDType != nil {
		switch *r.ExpertDType {
		case "fp4", "fp8", "bf16":
			c.ExpertDType = *r.ExpertDType
		default:
			p.errf("expert_dtype %q is not supported (want fp4, fp8 or bf16)", *r.ExpertDType)
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
	pos("num_hidden_layers", c.NumLayers)
	pos("num_attention_heads", c.Heads)
	pos("head_dim", c.HeadDim)
	pos("q_lora_rank", c.QLoraRank)
	pos("o_groups", c.OGroups)
	pos("o_lora_rank", c.OLoraRank)
	pos("index_n_heads", c.IndexHeads)
	pos("index_head_dim", c.IndexHeadDim)
	pos("index_topk", c.IndexTopK)
	pos("n_routed_experts", c.Experts)
	pos("num_experts_per_tok", c.ExpertsPerTok)
	pos("moe_intermediate_size", c.MoEInter)
	pos("hc_mult", c.HCMult)
	pos("hc_sinkhorn_iters", c.SinkhornIters)
	pos("sliding_window", c.Window)
	if c.OGroups > 0 && c.Heads%c.OGroups != 0 {
		p.errf("num_attention_heads %d is not a multiple of o_groups %d", c.Heads, c.OGroups)
	}
	if c.RopeDim <= 0 || c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim {
		p.errf("rope dims %d must be even and in (0, head_dim %d]", c.RopeDim, c.HeadDim)
	}
	if c.RopeDim > c.IndexHeadDim && c.IndexHeadDim > 0 && c.hasCSA() {
		p.errf("rope dims %d exceed index_head_dim %d", c.RopeDim, c.IndexHeadDim)
	}
	if c.ExpertsPerTok > c.Experts {
		p.errf("num_experts_per_tok %d exceeds n_routed_experts %d", c.ExpertsPerTok, c.Experts)
	}
	switch c.Scoring {
	case "sqrtsoftplus", "sigmoid", "softmax":
	default:
		p.errf("scoring_func %q is not supported (want sqrtsoftplus, sigmoid or softmax)", c.Scoring)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"rms_norm_eps", c.RMSEps}, {"hc_eps", c.HCEps}, {"rope_theta", c.RopeTheta}, {"compress_rope_theta", c.CompressRopeTheta}, {"swiglu_limit", c.SwigluLimit}, {"routed_scaling_factor", c.RoutedScale}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			p.errf("%s must be positive and finite, got %g", f.name, f.v)
		}
	}
	for i, l := range c.Layers {
		if l.Attn != Window && l.Rate <= 0 {
			p.errf("layer %d: %v rate %d must be positive", i, l.Attn, l.Rate)
		}
		if l.Attn == CSA && l.Rate < 2 {
			p.errf("layer %d: csa rate %d must be at least 2", i, l.Rate)
		}
	}
	if c.BOS < 0 || c.BOS >= c.VocabSize || c.EOS < 0 || c.EOS >= c.VocabSize {
		if c.VocabSize > 0 {
			p.errf("bos %d / eos %d outside vocabulary of %d", c.BOS, c.EOS, c.VocabSize)
		}
	}
}

func (c *Config) hasCSA() bool {
	for _, l := range c.Layers {
		if l.Attn == CSA {
			return true
		}
	}
	return false
}

// CompressAlign is the least common multiple of every compression rate: the
// positions where every compressor's partial window is empty (128 for the
// released models), where prefix reuse restores the least state.
func (c *Config) CompressAlign() int {
	l := 1
	for _, s := range c.Layers {
		if s.Rate > 0 {
			l = lcm(l, s.Rate)
		}
	}
	return l
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func lcm(a, b int) int { return a / gcd(a, b) * b }
