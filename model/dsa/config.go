// Package dsa implements the transformer DeepSeek-V3.2 and GLM-5 share
// (spec/models/deepseek-v3.2.md and glm-5.md): multi-head latent
// attention whose keys and values are one compressed latent per token
// plus a shared RoPE key, restricted per query by DeepSeek Sparse
// Attention (a lightning indexer choosing the top-k keys over the whole
// context), and a sigmoid "noaux" mixture of experts with a shared
// expert. A Family says what differs between the two (the indexer's RoPE
// pairing, shared indexer layers, defaults); the family packages
// (model/deepseekv32, model/glm5) define theirs and register them.
//
// The configuration is read in the Hub spelling (transformers'
// DeepseekV32Config and GlmMoeDsaConfig, legacy rope_scaling included),
// the weights in save_pretrained's naming and the Hub checkpoints' (FP8
// e4m3 with weight_scale_inv block scales, one tensor per expert or
// stacked), and the forward pass runs on backend ops over ragged batches.
package dsa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// Pairing is how a RoPE rotation pairs its channels.
type Pairing int

const (
	Interleaved Pairing = iota // channel 2j with 2j+1 (MLA; GLM-5's indexer)
	Half                       // channel j with j + r/2 (DeepSeek-V3.2's indexer)
)

func (p Pairing) String() string {
	if p == Half {
		return "rotate-half"
	}
	return "interleaved"
}

// Family is what one model family of this architecture fixes: its names,
// its indexer's RoPE pairing, whether layers may share an indexer, and
// the defaults its transformers config class gives absent fields.
type Family struct {
	Name                      string // "deepseek-v3.2"
	ModelTypes, Architectures []string
	IndexerRope               Pairing
	// SharedIndexers allows indexer_types (GLM-5): a "shared" layer reuses
	// the top-k selection of the closest earlier "full" layer.
	SharedIndexers bool
	Defaults       Defaults
}

// Defaults are a config class's values for absent fields.
type Defaults struct {
	VocabSize, Hidden, Intermediate, MoEInter, Layers, Heads int
	SharedExperts, Experts, ExpertsPerTok, Groups, TopGroups int
	KVLoraRank, QLoraRank, NopeDim, RopeDim, VDim            int
	IndexTopK, IndexDim, IndexHeads                          int
	FirstDense, MaxPosition                                  int
	RoutedScale, RMSEps                                      float64
}

// Yarn holds YaRN frequency-scaling parameters (spec §4).
type Yarn struct {
	Factor, OriginalMax, BetaFast, BetaSlow float64
	// MscaleAllDim scales the softmax by m² (m = 0.1·MscaleAllDim·ln(Factor)
	// + 1); 0 when absent.
	MscaleAllDim float64
}

// Config is the resolved architecture of one checkpoint.
type Config struct {
	Family *Family

	VocabSize, Hidden, NumLayers int
	Heads                        int // H (key/value heads = H)
	QLoraRank, KVLoraRank        int // q, c
	NopeDim, RopeDim, VDim       int // n, r, dv
	IndexHeads, IndexDim         int // Hi, di
	IndexTopK                    int // K
	IndexerRope                  Pairing
	// FullIndexer[l] says whether layer l runs its own indexer (else it
	// reuses the selection of the closest earlier full layer).
	FullIndexer []bool
	// Dense[l] says whether layer l's FFN is a dense SwiGLU of width
	// Intermediate (else the mixture of experts).
	Dense         []bool
	Intermediate  int
	Experts       int // E
	ExpertsPerTok int // k
	SharedExperts int // S: the shared expert is a SwiGLU of width MoEInter·S
	MoEInter      int // Ie
	Groups        int // G
	TopGroups     int // g
	NormTopK      bool
	RoutedScale   float64
	RMSEps        float64
	RopeTheta     float64
	Yarn          *Yarn // nil: plain RoPE
	MaxPosition   int
	BOS, EOS      int // -1: none; EOS is the first of eos_token_id's list
	TieEmbeddings bool
	// MTPLayers is num_nextn_predict_layers: multi-token-prediction layers
	// the Hub checkpoints store as model.layers.NumLayers.. (not used).
	MTPLayers int
	// FP8Block is the weight block of FP8-quantized matrices ([128 128] in
	// the Hub checkpoints); nil when the config declares no quantization.
	FP8Block []int
}

// QKDim is a head's query/key width n + r.
func (c *Config) QKDim() int { return c.NopeDim + c.RopeDim }

// SoftmaxScale is (n+r)^(-1/2), times m² for YaRN with mscale_all_dim
// (spec §4).
func (c *Config) SoftmaxScale() float64 {
	s := 1 / math.Sqrt(float64(c.QKDim()))
	if y := c.Yarn; y != nil && y.MscaleAllDim != 0 {
		m := yarnMscale(y.Factor, y.MscaleAllDim)
		s *= m * m
	}
	return s
}

// yarnMscale is 0.1·mscale·ln(factor) + 1 (1 for factor ≤ 1).
func yarnMscale(factor, mscale float64) float64 {
	if factor <= 1 {
		return 1
	}
	return 0.1*mscale*math.Log(factor) + 1
}

// IndexerLayers lists the layers that run their own indexer (and hold
// indexer keys).
func (c *Config) IndexerLayers() []int {
	var out []int
	for l, f := range c.FullIndexer {
		if f {
			out = append(out, l)
		}
	}
	return out
}

// rawConfig is config.json as the Hub and save_pretrained write it.
type rawConfig struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures"`
	VocabSize             *int            `json:"vocab_size"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	MoEIntermediateSize   *int            `json:"moe_intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	NSharedExperts        *int            `json:"n_shared_experts"`
	NRoutedExperts        *int            `json:"n_routed_experts"`
	NumExperts            *int            `json:"num_experts"`
	RoutedScalingFactor   *float64        `json:"routed_scaling_factor"`
	KVLoraRank            *int            `json:"kv_lora_rank"`
	QLoraRank             json.RawMessage `json:"q_lora_rank"`
	QKRopeHeadDim         *int            `json:"qk_rope_head_dim"`
	VHeadDim              *int            `json:"v_head_dim"`
	QKNopeHeadDim         *int            `json:"qk_nope_head_dim"`
	NGroup                *int            `json:"n_group"`
	TopKGroup             *int            `json:"topk_group"`
	NumExpertsPerTok      *int            `json:"num_experts_per_tok"`
	NormTopKProb          *bool           `json:"norm_topk_prob"`
	HiddenAct             *string         `json:"hidden_act"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	BOSTokenID            json.RawMessage `json:"bos_token_id"`
	EOSTokenID            json.RawMessage `json:"eos_token_id"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	RopeParameters        map[string]any  `json:"rope_parameters"`
	RopeScaling           map[string]any  `json:"rope_scaling"`
	RopeTheta             *float64        `json:"rope_theta"`
	MLPLayerTypes         []string        `json:"mlp_layer_types"`
	FirstKDenseReplace    *int            `json:"first_k_dense_replace"`
	MoELayerFreq          *int            `json:"moe_layer_freq"`
	AttentionBias         *bool           `json:"attention_bias"`
	MLPBias               *bool           `json:"mlp_bias"`
	IndexTopK             *int            `json:"index_topk"`
	IndexHeadDim          *int            `json:"index_head_dim"`
	IndexNHeads           *int            `json:"index_n_heads"`
	LayerTypes            []string        `json:"layer_types"`
	IndexerTypes          []string        `json:"indexer_types"`
	IndexTopKPattern      json.RawMessage `json:"index_topk_pattern"`
	IndexTopKFreq         *int            `json:"index_topk_freq"`
	IndexSkipTopKOffset   *int            `json:"index_skip_topk_offset"`
	NumNextnPredictLayers *int            `json:"num_nextn_predict_layers"`
	ScoringFunc           *string         `json:"scoring_func"`
	TopKMethod            *string         `json:"topk_method"`
	QuantizationConfig    *rawQuant       `json:"quantization_config"`
}

type rawQuant struct {
	QuantMethod     string `json:"quant_method"`
	Fmt             string `json:"fmt"`
	ScaleFmt        string `json:"scale_fmt"`
	WeightBlockSize []int  `json:"weight_block_size"`
}

// maxConfigBytes bounds config.json; real ones are a few KB.
const maxConfigBytes = 1 << 20

// maxLayers bounds num_hidden_layers and the per-layer lists, so that a
// hostile config cannot make the parser allocate without limit.
const maxLayers = 1 << 16

// LoadConfig reads and validates a config.json of family f.
func LoadConfig(path string, f *Family) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	c, err := ParseConfig(b, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", f.Name, path, err)
	}
	return c, nil
}

// ParseConfig parses and validates config.json bytes of family f. Absent
// fields take the family's defaults (its transformers config class's);
// every problem found is reported, joined into one error.
func ParseConfig(data []byte, f *Family) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var r rawConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("config: trailing data after the JSON object")
	}
	p := &parser{}
	d := &f.Defaults
	c := &Config{Family: f, IndexerRope: f.IndexerRope}
	if r.ModelType != "" && !slices.Contains(f.ModelTypes, r.ModelType) {
		p.errf("model_type %q is not %s (want %s)", r.ModelType, f.Name, strings.Join(f.ModelTypes, " or "))
	}
	for _, a := range r.Architectures {
		if !slices.Contains(f.Architectures, a) {
			p.errf("architecture %q is not %s (want %s)", a, f.Name, strings.Join(f.Architectures, " or "))
		}
	}
	c.VocabSize = intOr(r.VocabSize, d.VocabSize)
	c.Hidden = intOr(r.HiddenSize, d.Hidden)
	c.Intermediate = intOr(r.IntermediateSize, d.Intermediate)
	c.MoEInter = intOr(r.MoEIntermediateSize, d.MoEInter)
	c.NumLayers = intOr(r.NumHiddenLayers, d.Layers)
	c.Heads = intOr(r.NumAttentionHeads, d.Heads)
	if r.NumKeyValueHeads != nil && *r.NumKeyValueHeads != c.Heads {
		p.errf("num_key_value_heads %d differs from num_attention_heads %d (MLA expands the latent to every head)", *r.NumKeyValueHeads, c.Heads)
	}
	c.SharedExperts = intOr(r.NSharedExperts, d.SharedExperts)
	c.Experts = intOr(r.NRoutedExperts, d.Experts)
	if r.NumExperts != nil {
		c.Experts = *r.NumExperts // transformers' BC spelling wins
	}
	c.RoutedScale = floatOr(r.RoutedScalingFactor, d.RoutedScale)
	c.KVLoraRank = intOr(r.KVLoraRank, d.KVLoraRank)
	c.QLoraRank = d.QLoraRank
	if len(r.QLoraRank) > 0 {
		if string(r.QLoraRank) == "null" {
			p.errf("q_lora_rank null (a full-rank query projection) is not supported: the indexer reads the low-rank query")
		} else if err := json.Unmarshal(r.QLoraRank, &c.QLoraRank); err != nil {
			p.errf("q_lora_rank: %.40s is not an integer", r.QLoraRank)
		}
	}
	c.RopeDim = intOr(r.QKRopeHeadDim, d.RopeDim)
	c.VDim = intOr(r.VHeadDim, d.VDim)
	c.NopeDim = intOr(r.QKNopeHeadDim, d.NopeDim)
	// head_dim and qk_head_dim are derived: transformers overwrites them
	// (with qk_rope_head_dim and qk_nope_head_dim + qk_rope_head_dim)
	// whatever config.json says, and so does this parser.
	c.Groups = intOr(r.NGroup, d.Groups)
	c.TopGroups = intOr(r.TopKGroup, d.TopGroups)
	c.ExpertsPerTok = intOr(r.NumExpertsPerTok, d.ExpertsPerTok)
	c.NormTopK = boolOr(r.NormTopKProb, true)
	c.MaxPosition = intOr(r.MaxPositionEmbeddings, d.MaxPosition)
	c.RMSEps = floatOr(r.RMSNormEps, d.RMSEps)
	c.IndexTopK = intOr(r.IndexTopK, d.IndexTopK)
	c.IndexDim = intOr(r.IndexHeadDim, d.IndexDim)
	c.IndexHeads = intOr(r.IndexNHeads, d.IndexHeads)
	c.TieEmbeddings = boolOr(r.TieWordEmbeddings, false)
	c.BOS = p.tokenID("bos_token_id", r.BOSTokenID, 0)
	c.EOS = p.tokenID("eos_token_id", r.EOSTokenID, 1)
	c.MTPLayers = intOr(r.NumNextnPredictLayers, 0)

	if r.HiddenAct != nil && *r.HiddenAct != "silu" {
		p.errf("hidden_act %q is not supported (want silu)", *r.HiddenAct)
	}
	if r.AttentionBias != nil && *r.AttentionBias {
		p.errf("attention_bias true is not supported (the released projections have no bias)")
	}
	if r.MLPBias != nil && *r.MLPBias {
		p.errf("mlp_bias true is not supported")
	}
	if r.ScoringFunc != nil && *r.ScoringFunc != "sigmoid" {
		p.errf("scoring_func %q is not supported (want sigmoid)", *r.ScoringFunc)
	}
	if r.TopKMethod != nil && *r.TopKMethod != "noaux_tc" {
		p.errf("topk_method %q is not supported (want noaux_tc)", *r.TopKMethod)
	}
	if r.MoELayerFreq != nil && *r.MoELayerFreq != 1 {
		p.errf("moe_layer_freq %d is not supported (want 1)", *r.MoELayerFreq)
	}
	p.resolveLayers(c, &r, d)
	p.resolveRope(c, &r)
	p.resolveQuant(c, &r)
	c.validate(p)
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("config: %w", errors.Join(p.errs...))
	}
	return c, nil
}

type parser struct{ errs []error }

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
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

// tokenID reads a token id that may be a number, null (-1) or a list (its
// first entry); absent gives def.
func (p *parser) tokenID(name string, raw json.RawMessage, def int) int {
	if len(raw) == 0 {
		return def
	}
	if string(raw) == "null" {
		return -1
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		return n
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil {
		if len(list) == 0 {
			return -1
		}
		return list[0]
	}
	p.errf("%s: %.40s is not a token id or a list of them", name, raw)
	return -1
}

// resolveLayers reads the per-layer FFN kinds (mlp_layer_types, else the
// first first_k_dense_replace layers dense) and indexer kinds
// (indexer_types, else index_topk_pattern, else index_topk_freq and
// index_skip_topk_offset; every layer full by default).
func (p *parser) resolveLayers(c *Config, r *rawConfig, d *Defaults) {
	n := c.NumLayers
	if n <= 0 || n > maxLayers {
		p.errf("num_hidden_layers %d is outside [1, %d]", n, maxLayers)
		return
	}
	c.Dense = make([]bool, n)
	if r.MLPLayerTypes != nil {
		if len(r.MLPLayerTypes) != n {
			p.errf("mlp_layer_types has %d entries; want num_hidden_layers (%d)", len(r.MLPLayerTypes), n)
		}
		for i, t := range r.MLPLayerTypes[:min(n, len(r.MLPLayerTypes))] {
			switch t {
			case "dense":
				c.Dense[i] = true
			case "sparse":
			default:
				p.errf("mlp_layer_types[%d] is %q; want dense or sparse", i, t)
			}
		}
	} else {
		k := intOr(r.FirstKDenseReplace, d.FirstDense)
		if k < 0 {
			p.errf("first_k_dense_replace %d is negative", k)
		}
		for i := range min(max(k, 0), n) {
			c.Dense[i] = true
		}
	}
	if r.LayerTypes != nil {
		if len(r.LayerTypes) != n {
			p.errf("layer_types has %d entries; want num_hidden_layers (%d)", len(r.LayerTypes), n)
		}
		for i, t := range r.LayerTypes {
			if t != "deepseek_sparse_attention" {
				p.errf("layer_types[%d] is %q; want deepseek_sparse_attention", i, t)
				break
			}
		}
	}
	c.FullIndexer = make([]bool, n)
	for i := range c.FullIndexer {
		c.FullIndexer[i] = true
	}
	types := r.IndexerTypes
	if types == nil && len(r.IndexTopKPattern) > 0 && string(r.IndexTopKPattern) != "null" {
		var s string
		if err := json.Unmarshal(r.IndexTopKPattern, &s); err == nil {
			for i, ch := range s {
				switch ch {
				case 'F':
					types = append(types, "full")
				case 'S':
					types = append(types, "shared")
				default:
					p.errf("index_topk_pattern[%d] is %q; want F or S", i, string(ch))
					return
				}
			}
		} else if err := json.Unmarshal(r.IndexTopKPattern, &types); err != nil {
			p.errf("index_topk_pattern: %.40s is neither a string of F and S nor a list", r.IndexTopKPattern)
		}
	}
	if types == nil && (r.IndexTopKFreq != nil || r.IndexSkipTopKOffset != nil) {
		freq := max(intOr(r.IndexTopKFreq, 1), 1)
		off := intOr(r.IndexSkipTopKOffset, 2)
		for i := range n {
			if max(i-off+1, 0)%freq == 0 {
				types = append(types, "full")
			} else {
				types = append(types, "shared")
			}
		}
	}
	if types == nil {
		return
	}
	if len(types) != n {
		p.errf("indexer_types has %d entries; want num_hidden_layers (%d)", len(types), n)
		return
	}
	for i, t := range types {
		switch t {
		case "full":
		case "shared":
			c.FullIndexer[i] = false
		default:
			p.errf("indexer_types[%d] is %q; want full or shared", i, t)
		}
	}
	if !c.FullIndexer[0] {
		p.errf("indexer_types[0] is shared: the first layer must run its own indexer")
	}
	if !c.Family.SharedIndexers && slices.Contains(c.FullIndexer, false) {
		p.errf("%s layers each run their own indexer; shared indexer layers are not part of this family", c.Family.Name)
	}
}

// resolveRope reads rope_parameters (transformers 5), or the legacy
// rope_scaling and top-level rope_theta: plain RoPE ("default") or YaRN.
func (p *parser) resolveRope(c *Config, r *rawConfig) {
	rp := r.RopeParameters
	if rp == nil {
		rp = r.RopeScaling
	} else if r.RopeScaling != nil {
		p.errf("both rope_parameters and rope_scaling are given")
	}
	c.RopeTheta = floatOr(r.RopeTheta, 10000)
	if v, ok := rp["rope_theta"]; ok {
		f, isNum := v.(float64)
		switch {
		case !isNum:
			p.errf("rope_parameters.rope_theta %v is not a number", v)
		case r.RopeTheta != nil && *r.RopeTheta != f:
			p.errf("rope_theta %g disagrees with rope_parameters.rope_theta %g", *r.RopeTheta, f)
		default:
			c.RopeTheta = f
		}
	}
	kind, _ := rp["rope_type"].(string)
	if kind == "" {
		kind, _ = rp["type"].(string)
	}
	switch kind {
	case "", "default":
		return
	case "yarn":
	default:
		p.errf("rope type %q is not supported (want default or yarn)", kind)
		return
	}
	num := func(key string) (float64, bool) {
		v, present := rp[key]
		if !present || v == nil {
			return 0, false
		}
		f, ok := v.(float64)
		if !ok {
			p.errf("rope_parameters.%s %v is not a number", key, v)
		}
		return f, ok
	}
	y := &Yarn{BetaFast: 32, BetaSlow: 1}
	var ok bool
	if y.OriginalMax, ok = num("original_max_position_embeddings"); !ok {
		p.errf("yarn: original_max_position_embeddings is missing")
		return
	}
	if y.Factor, ok = num("factor"); !ok {
		y.Factor = float64(c.MaxPosition) / y.OriginalMax
	}
	if v, ok := num("beta_fast"); ok && v != 0 {
		y.BetaFast = v
	}
	if v, ok := num("beta_slow"); ok && v != 0 {
		y.BetaSlow = v
	}
	mscale, _ := num("mscale")
	y.MscaleAllDim, _ = num("mscale_all_dim")
	if !(y.Factor > 0) || !(y.OriginalMax > 0) || !(y.BetaFast > 0) || !(y.BetaSlow > 0) || math.IsInf(y.Factor+y.OriginalMax+y.BetaFast+y.BetaSlow, 0) {
		p.errf("yarn: factor %g, original_max_position_embeddings %g, beta_fast %g, beta_slow %g must be positive and finite", y.Factor, y.OriginalMax, y.BetaFast, y.BetaSlow)
		return
	}
	if math.IsNaN(mscale) || math.IsInf(mscale, 0) || math.IsNaN(y.MscaleAllDim) || math.IsInf(y.MscaleAllDim, 0) {
		p.errf("yarn: mscale %g and mscale_all_dim %g must be finite", mscale, y.MscaleAllDim)
		return
	}
	// The reference multiplies RoPE's cosines and sines by an attention
	// factor; the released configs make it exactly 1 (mscale equal to
	// mscale_all_dim), and only that is supported.
	af, given := num("attention_factor")
	if !given {
		if mscale != 0 && y.MscaleAllDim != 0 {
			af = yarnMscale(y.Factor, mscale) / yarnMscale(y.Factor, y.MscaleAllDim)
		} else {
			af = yarnMscale(y.Factor, 1)
		}
	}
	if af != 1 {
		p.errf("yarn: attention factor %g (mscale %g, mscale_all_dim %g) is not supported; the released configs give 1", af, mscale, y.MscaleAllDim)
	}
	c.Yarn = y
}

func (p *parser) resolveQuant(c *Config, r *rawConfig) {
	q := r.QuantizationConfig
	if q == nil {
		return
	}
	if q.QuantMethod != "fp8" {
		p.errf("quantization_config.quant_method %q is not supported (want fp8)", q.QuantMethod)
	}
	if q.Fmt != "" && q.Fmt != "e4m3" {
		p.errf("quantization_config.fmt %q is not supported (want e4m3)", q.Fmt)
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

func (c *Config) validate(p *parser) {
	for _, s := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.Hidden}, {"num_attention_heads", c.Heads},
		{"q_lora_rank", c.QLoraRank}, {"kv_lora_rank", c.KVLoraRank}, {"qk_nope_head_dim", c.NopeDim},
		{"qk_rope_head_dim", c.RopeDim}, {"v_head_dim", c.VDim}, {"index_n_heads", c.IndexHeads},
		{"index_head_dim", c.IndexDim}, {"index_topk", c.IndexTopK}, {"max_position_embeddings", c.MaxPosition},
	} {
		if s.v <= 0 {
			p.errf("%s must be positive, got %d", s.name, s.v)
		}
	}
	if c.RopeDim%2 != 0 {
		p.errf("qk_rope_head_dim %d must be even", c.RopeDim)
	}
	if c.IndexDim < c.RopeDim {
		p.errf("index_head_dim %d is narrower than the %d RoPE channels it rotates", c.IndexDim, c.RopeDim)
	}
	if slices.Contains(c.Dense, true) && c.Intermediate <= 0 {
		p.errf("intermediate_size must be positive for the dense layers, got %d", c.Intermediate)
	}
	if slices.Contains(c.Dense, false) {
		for _, s := range []struct {
			name string
			v    int
		}{
			{"n_routed_experts", c.Experts}, {"num_experts_per_tok", c.ExpertsPerTok}, {"moe_intermediate_size", c.MoEInter},
			{"n_shared_experts", c.SharedExperts}, {"n_group", c.Groups}, {"topk_group", c.TopGroups},
		} {
			if s.v <= 0 {
				p.errf("%s must be positive for the MoE layers, got %d", s.name, s.v)
			}
		}
		if c.Experts > 0 && c.Groups > 0 {
			switch {
			case c.Experts%c.Groups != 0:
				p.errf("n_routed_experts %d is not a multiple of n_group %d", c.Experts, c.Groups)
			case c.Groups > 1 && c.Experts/c.Groups < 2:
				p.errf("n_group %d leaves fewer than 2 experts per group (%d experts); a group's score is its two best", c.Groups, c.Experts)
			case c.TopGroups > c.Groups:
				p.errf("topk_group %d exceeds n_group %d", c.TopGroups, c.Groups)
			case c.TopGroups > 0 && c.ExpertsPerTok > c.TopGroups*(c.Experts/c.Groups):
				p.errf("num_experts_per_tok %d exceeds the %d experts of the topk_group best groups", c.ExpertsPerTok, c.TopGroups*(c.Experts/c.Groups))
			}
		}
		if !(c.RoutedScale > 0) || math.IsInf(c.RoutedScale, 0) {
			p.errf("routed_scaling_factor must be positive and finite, got %g", c.RoutedScale)
		}
	}
	if !(c.RMSEps > 0) || math.IsInf(c.RMSEps, 0) {
		p.errf("rms_norm_eps must be positive and finite, got %g", c.RMSEps)
	}
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		p.errf("rope_theta must be finite and above 1, got %g", c.RopeTheta)
	}
	if c.MTPLayers < 0 || c.MTPLayers > maxLayers {
		p.errf("num_nextn_predict_layers %d is outside [0, %d]", c.MTPLayers, maxLayers)
	}
	if c.VocabSize > 0 {
		for _, t := range []struct {
			name string
			v    int
		}{{"bos_token_id", c.BOS}, {"eos_token_id", c.EOS}} {
			if t.v < -1 || t.v >= c.VocabSize {
				p.errf("%s %d is outside the vocabulary of %d", t.name, t.v, c.VocabSize)
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
		{"heads × head widths × q_lora_rank", float64(c.Heads) * float64(c.NopeDim+c.RopeDim+c.VDim) * float64(max(c.QLoraRank, c.KVLoraRank))},
		{"index heads × index_head_dim × q_lora_rank", float64(c.IndexHeads) * float64(c.IndexDim) * float64(c.QLoraRank)},
		{"experts × widths", float64(c.Experts+c.SharedExperts) * float64(c.MoEInter) * float64(c.Hidden)},
		{"intermediate × hidden", float64(c.Intermediate) * float64(c.Hidden)},
		{"kv_lora_rank + qk_rope_head_dim", float64(c.KVLoraRank+c.RopeDim) * 4 * float64(c.NumLayers)},
	} {
		if s.v > lim {
			p.errf("%s (%g) is too large", s.name, s.v)
		}
	}
}
