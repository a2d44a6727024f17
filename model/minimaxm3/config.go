// Package minimaxm3 implements the MiniMax-M3 text model
// (spec/models/minimax-m3.md; transformers' MiniMaxM3VLForCausalLM on
// MiniMaxM3VLTextConfig, the text model of the Hub's
// MiniMaxM3SparseForConditionalGeneration): GQA attention with Gemma-style
// q/k norms and partial rotate-half RoPE, whose sparse ("MSA") layers see
// only the key blocks a lightning indexer chooses per query, and a
// sigmoid-routed MoE with a shared expert, every FFN on the clamped
// SwiGLU-OAI activation. Its configuration is read in both spellings (the
// text config save_pretrained writes and the Hub's multimodal one), its
// weights in both namings; the per-request state is two append cache
// kinds (every layer's K and V, the sparse layers' indexer keys), and the
// forward pass is composed of backend ops (compute.Causal for the full
// layers, compute.MSA for block selection, block-sparse attention and the
// SwiGLU-OAI feed-forwards).
package minimaxm3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
)

// Config is the resolved architecture of a MiniMax-M3 text model.
type Config struct {
	// Multimodal is set when the config is the Hub's (text model under
	// text_config); the checkpoint then nests the text model's tensors.
	Multimodal bool

	VocabSize int
	Hidden    int // D
	// Sparse[l] is set for the MSA layers (layer type "minimax_m3_sparse");
	// the others are full attention.
	Sparse []bool
	// MoE[l] is set for the layers whose FFN is the MoE (mlp layer type
	// "sparse"); the others have the dense FFN.
	MoE []bool

	Heads     int // Hq
	KVHeads   int // Hkv
	HeadDim   int // d
	RopeDim   int // R = d · partial_rotary_factor: the rotated leading channels
	RopeTheta float64

	IndexHeads int // Hi
	IndexDim   int // di
	IndexBlock int // B
	IndexTopK  int // kb: blocks kept per query
	IndexLocal int // lb: the query's own block and the lb−1 before it, always kept

	DenseInter    int // dense FFN width
	MoEInter      int // Ie, per routed expert
	SharedInter   int // Is, the shared expert
	Experts       int // E
	ExpertsPerTok int // k
	RoutedScale   float64
	SwigluAlpha   float64
	SwigluLimit   float64

	RMSEps        float64
	TieEmbeddings bool
	MaxPosition   int
	BOS           int   // -1 when the config names none
	EOS           []int // empty when the config names none
}

// NumLayers is the number of decoder layers.
func (c *Config) NumLayers() int { return len(c.Sparse) }

// SparseLayers lists the MSA layers.
func (c *Config) SparseLayers() []int {
	var out []int
	for l, s := range c.Sparse {
		if s {
			out = append(out, l)
		}
	}
	return out
}

// defaults are transformers 5.17's MiniMaxM3VLTextConfig defaults: the
// released MiniMax-M3's shapes.
var defaults = Config{
	VocabSize: 200064, Hidden: 6144, Heads: 64, KVHeads: 4, HeadDim: 128, RopeTheta: 5e6,
	IndexHeads: 4, IndexDim: 128, IndexBlock: 128, IndexTopK: 16, IndexLocal: 1,
	DenseInter: 12288, MoEInter: 3072, SharedInter: 3072, Experts: 128, ExpertsPerTok: 4,
	RoutedScale: 2, SwigluAlpha: 1.702, SwigluLimit: 7, RMSEps: 1e-6, MaxPosition: 524288,
}

const defaultLayers = 60

// rawSparse is the Hub's sparse_attention_config.
type rawSparse struct {
	Freq       []int `json:"sparse_attention_freq"`
	IndexHeads *int  `json:"sparse_num_index_heads"`
	IndexDim   *int  `json:"sparse_index_dim"`
	Block      *int  `json:"sparse_block_size"`
	TopK       *int  `json:"sparse_topk_blocks"`
	Local      *int  `json:"sparse_local_block"`
}

type rawRope struct {
	RopeType            *string  `json:"rope_type"`
	Type                *string  `json:"type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// rawText is a text config as either spelling writes it.
type rawText struct {
	ModelType              string          `json:"model_type"`
	VocabSize              *int            `json:"vocab_size"`
	HiddenSize             *int            `json:"hidden_size"`
	NumHiddenLayers        *int            `json:"num_hidden_layers"`
	NumAttentionHeads      *int            `json:"num_attention_heads"`
	NumKeyValueHeads       *int            `json:"num_key_value_heads"`
	HeadDim                *int            `json:"head_dim"`
	LayerTypes             []string        `json:"layer_types"`
	MLPLayerTypes          []string        `json:"mlp_layer_types"`
	MoELayerFreq           []int           `json:"moe_layer_freq"`
	SparseAttentionConfig  *rawSparse      `json:"sparse_attention_config"`
	IndexNHeads            *int            `json:"index_n_heads"`
	IndexHeadDim           *int            `json:"index_head_dim"`
	IndexBlockSize         *int            `json:"index_block_size"`
	IndexTopKBlocks        *int            `json:"index_topk_blocks"`
	IndexLocalBlocks       *int            `json:"index_local_blocks"`
	DenseIntermediateSize  *int            `json:"dense_intermediate_size"`
	IntermediateSize       *int            `json:"intermediate_size"`
	SharedIntermediateSize *int            `json:"shared_intermediate_size"`
	NSharedExperts         *int            `json:"n_shared_experts"`
	NumLocalExperts        *int            `json:"num_local_experts"`
	NumExpertsPerTok       *int            `json:"num_experts_per_tok"`
	RoutedScalingFactor    *float64        `json:"routed_scaling_factor"`
	SwigluAlpha            *float64        `json:"swiglu_alpha"`
	SwigluLimit            *float64        `json:"swiglu_limit"`
	ScoringFunc            *string         `json:"scoring_func"`
	UseRoutingBias         *bool           `json:"use_routing_bias"`
	UseQKNorm              *bool           `json:"use_qk_norm"`
	UseGemmaNorm           *bool           `json:"use_gemma_norm"`
	AttentionBias          *bool           `json:"attention_bias"`
	RMSNormEps             *float64        `json:"rms_norm_eps"`
	RopeParameters         *rawRope        `json:"rope_parameters"`
	RopeScaling            *rawRope        `json:"rope_scaling"`
	RopeTheta              *float64        `json:"rope_theta"`
	PartialRotaryFactor    *float64        `json:"partial_rotary_factor"`
	RotaryDim              *int            `json:"rotary_dim"`
	TieWordEmbeddings      *bool           `json:"tie_word_embeddings"`
	MaxPositionEmbeddings  *int            `json:"max_position_embeddings"`
	BOSTokenID             json.RawMessage `json:"bos_token_id"`
	EOSTokenID             json.RawMessage `json:"eos_token_id"`
}

// rawTop is the part of the Hub's multimodal config outside text_config.
type rawTop struct {
	ModelType         string          `json:"model_type"`
	Architectures     []string        `json:"architectures"`
	TextConfig        json.RawMessage `json:"text_config"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	BOSTokenID        json.RawMessage `json:"bos_token_id"`
}

// Model types and architectures of the two spellings.
var (
	ModelTypes    = []string{"minimax_m3_vl", "minimax_m3_vl_text", "minimax_m3"}
	Architectures = []string{"MiniMaxM3VLForCausalLM", "MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3VLForConditionalGeneration", "MiniMaxM3ForCausalLM"}
)

const (
	maxConfigBytes = 1 << 20
	maxLayers      = 1 << 12
	maxDim         = 1 << 20 // widths, heads, experts, vocabulary: bounded so a hostile config cannot ask for absurd allocations
)

// LoadConfig reads and validates a config.json in either spelling.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("minimaxm3: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("minimaxm3: %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses and validates config.json bytes in either spelling:
// the text config (MiniMaxM3VLForCausalLM, model_type minimax_m3_vl_text)
// or the Hub's multimodal one (model_type minimax_m3_vl, the text model
// under text_config, with the legacy names sparse_attention_config,
// moe_layer_freq and flat rope fields that transformers maps). Missing
// fields take the reference's defaults (the released shapes); every
// problem found is reported, joined into one error.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("minimaxm3: config: %d bytes exceeds the %d-byte limit", len(data), maxConfigBytes)
	}
	var top rawTop
	if err := decodeOne(data, &top); err != nil {
		return nil, fmt.Errorf("minimaxm3: config: %w", err)
	}
	multimodal := len(top.TextConfig) > 0 && string(top.TextConfig) != "null"
	text := data
	if multimodal {
		text = top.TextConfig
	}
	var r rawText
	if err := decodeOne(text, &r); err != nil {
		return nil, fmt.Errorf("minimaxm3: config: text_config: %w", err)
	}
	p := &parser{}
	c := defaults // a copy (defaults leaves the slices nil)
	c.Multimodal = multimodal
	p.family(&top, &r, multimodal)

	p.size("vocab_size", r.VocabSize, &c.VocabSize)
	p.size("hidden_size", r.HiddenSize, &c.Hidden)
	layers := defaultLayers
	p.size("num_hidden_layers", r.NumHiddenLayers, &layers)
	if layers > maxLayers {
		p.errf("num_hidden_layers %d exceeds %d", layers, maxLayers)
		layers = 0
	}
	p.size("num_attention_heads", r.NumAttentionHeads, &c.Heads)
	p.size("num_key_value_heads", r.NumKeyValueHeads, &c.KVHeads)
	p.size("head_dim", r.HeadDim, &c.HeadDim)
	sp := r.SparseAttentionConfig
	if sp == nil {
		sp = &rawSparse{}
	}
	p.size2("index_n_heads", r.IndexNHeads, "sparse_num_index_heads", sp.IndexHeads, &c.IndexHeads)
	p.size2("index_head_dim", r.IndexHeadDim, "sparse_index_dim", sp.IndexDim, &c.IndexDim)
	p.size2("index_block_size", r.IndexBlockSize, "sparse_block_size", sp.Block, &c.IndexBlock)
	p.size2("index_topk_blocks", r.IndexTopKBlocks, "sparse_topk_blocks", sp.TopK, &c.IndexTopK)
	if v := first(r.IndexLocalBlocks, sp.Local); v != nil {
		c.IndexLocal = *v
		if *v < 0 || *v > maxDim {
			p.errf("index_local_blocks %d is outside [0, %d]", *v, maxDim)
			c.IndexLocal = 1
		}
	}
	p.size("dense_intermediate_size", r.DenseIntermediateSize, &c.DenseInter)
	p.size("intermediate_size", r.IntermediateSize, &c.MoEInter)
	p.size("shared_intermediate_size", r.SharedIntermediateSize, &c.SharedInter)
	if r.NSharedExperts != nil {
		// transformers sizes the one shared MLP shared_intermediate_size · n_shared_experts wide.
		if n := *r.NSharedExperts; n < 1 || n > 64 {
			p.errf("n_shared_experts %d is outside [1, 64]", n)
		} else {
			c.SharedInter *= n
		}
	}
	p.size("num_local_experts", r.NumLocalExperts, &c.Experts)
	p.size("num_experts_per_tok", r.NumExpertsPerTok, &c.ExpertsPerTok)
	p.float("routed_scaling_factor", r.RoutedScalingFactor, &c.RoutedScale, false)
	p.float("swiglu_alpha", r.SwigluAlpha, &c.SwigluAlpha, false)
	p.float("swiglu_limit", r.SwigluLimit, &c.SwigluLimit, true)
	p.float("rms_norm_eps", r.RMSNormEps, &c.RMSEps, false)
	p.size("max_position_embeddings", r.MaxPositionEmbeddings, &c.MaxPosition)
	if r.ScoringFunc != nil && *r.ScoringFunc != "sigmoid" {
		p.errf("scoring_func %q is not supported (MiniMax-M3 routes by sigmoid)", *r.ScoringFunc)
	}
	for _, f := range []struct {
		name string
		v    *bool
		want bool
	}{{"use_routing_bias", r.UseRoutingBias, true}, {"use_qk_norm", r.UseQKNorm, true}, {"use_gemma_norm", r.UseGemmaNorm, true}, {"attention_bias", r.AttentionBias, false}} {
		if f.v != nil && *f.v != f.want {
			p.errf("%s %v is not supported (MiniMax-M3 has %v)", f.name, *f.v, f.want)
		}
	}
	c.TieEmbeddings = r.TieWordEmbeddings != nil && *r.TieWordEmbeddings
	if multimodal && top.TieWordEmbeddings != nil && *top.TieWordEmbeddings {
		c.TieEmbeddings = true
	}
	bos, eos := r.BOSTokenID, r.EOSTokenID
	if len(bos) == 0 {
		bos = top.BOSTokenID
	}
	if len(eos) == 0 || string(eos) == "null" {
		eos = top.EOSTokenID
	}
	// The reference's default ids (the released tokenizer's) apply only
	// to vocabularies that hold them.
	defBOS, defEOS := -1, []int(nil)
	if c.VocabSize > 200034 {
		defBOS, defEOS = 200034, []int{200020}
	}
	c.BOS = p.tokenID("bos_token_id", bos, defBOS)
	c.EOS = p.tokenIDs("eos_token_id", eos, defEOS)

	p.resolveLayers(&c, &r, sp, layers)
	p.resolveRope(&c, &r)
	c.validate(p)
	if len(p.errs) > 0 {
		return nil, fmt.Errorf("minimaxm3: config: %w", errors.Join(p.errs...))
	}
	return &c, nil
}

// decodeOne decodes one JSON object, rejecting trailing data.
func decodeOne(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON object")
	}
	return nil
}

type parser struct{ errs []error }

func (p *parser) errf(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

// size reads a positive size into dst when present.
func (p *parser) size(name string, v *int, dst *int) {
	if v == nil {
		return
	}
	if *v <= 0 || *v > maxDim {
		p.errf("%s %d is outside [1, %d]", name, *v, maxDim)
		return
	}
	*dst = *v
}

// size2 reads a size given by its transformers name or the Hub's legacy
// one, which must agree when both are present.
func (p *parser) size2(name string, v *int, legacy string, lv *int, dst *int) {
	if v != nil && lv != nil && *v != *lv {
		p.errf("%s %d and sparse_attention_config.%s %d disagree", name, *v, legacy, *lv)
	}
	if v == nil {
		name, v = "sparse_attention_config."+legacy, lv
	}
	p.size(name, v, dst)
}

func first(a, b *int) *int {
	if a != nil {
		return a
	}
	return b
}

// float reads a finite positive (or, with zeroOK, non-negative) number.
func (p *parser) float(name string, v *float64, dst *float64, zeroOK bool) {
	if v == nil {
		return
	}
	x := *v
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x == 0 && !zeroOK {
		p.errf("%s %v is not a positive finite number", name, x)
		return
	}
	*dst = x
}

func (p *parser) family(top *rawTop, r *rawText, multimodal bool) {
	check := func(where, t string) {
		if t == "" {
			return
		}
		for _, m := range ModelTypes {
			if t == m {
				return
			}
		}
		p.errf("%s %q is not a MiniMax-M3 model type (want one of %v)", where, t, ModelTypes)
	}
	if multimodal {
		check("model_type", top.ModelType)
		check("text_config.model_type", r.ModelType)
	} else {
		check("model_type", r.ModelType)
	}
	for _, a := range top.Architectures {
		ok := false
		for _, m := range Architectures {
			ok = ok || a == m
		}
		if !ok {
			p.errf("architecture %q is not a MiniMax-M3 architecture (want one of %v)", a, Architectures)
		}
	}
}

// tokenID reads a token id that may be a number, null or a list (first entry).
func (p *parser) tokenID(name string, raw json.RawMessage, def int) int {
	if len(raw) == 0 {
		return def
	}
	ids := p.tokenIDs(name, raw, nil)
	if len(ids) == 0 {
		return -1
	}
	return ids[0]
}

// tokenIDs reads a token id or a list of them; def when absent, none when null.
func (p *parser) tokenIDs(name string, raw json.RawMessage, def []int) []int {
	if len(raw) == 0 {
		return def
	}
	if string(raw) == "null" {
		return []int{}
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil {
		if n < 0 {
			p.errf("%s %d is negative", name, n)
			return []int{}
		}
		return []int{n}
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil {
		for _, v := range list {
			if v < 0 {
				p.errf("%s %v holds a negative id", name, list)
				return []int{}
			}
		}
		return list
	}
	p.errf("%s: %.40s is not a token id or a list of them", name, raw)
	return []int{}
}

// resolveLayers reads each layer's attention from layer_types (or the
// Hub's sparse_attention_freq; default all full) and FFN from
// mlp_layer_types (or moe_layer_freq; default all MoE).
func (p *parser) resolveLayers(c *Config, r *rawText, sp *rawSparse, n int) {
	c.Sparse, c.MoE = make([]bool, n), make([]bool, n)
	for i := range c.MoE {
		c.MoE[i] = true
	}
	switch {
	case r.LayerTypes != nil:
		if len(r.LayerTypes) != n {
			p.errf("layer_types has %d entries for %d layers", len(r.LayerTypes), n)
			break
		}
		for i, t := range r.LayerTypes {
			switch t {
			case "full_attention":
			case "minimax_m3_sparse":
				c.Sparse[i] = true
			default:
				p.errf("layer_types[%d] %q is not full_attention or minimax_m3_sparse", i, t)
			}
		}
	case sp.Freq != nil:
		if len(sp.Freq) != n {
			p.errf("sparse_attention_config.sparse_attention_freq has %d entries for %d layers", len(sp.Freq), n)
			break
		}
		for i, f := range sp.Freq {
			if f != 0 && f != 1 {
				p.errf("sparse_attention_config.sparse_attention_freq[%d] is %d, not 0 or 1", i, f)
			}
			c.Sparse[i] = f == 1
		}
	}
	switch {
	case r.MLPLayerTypes != nil:
		if len(r.MLPLayerTypes) != n {
			p.errf("mlp_layer_types has %d entries for %d layers", len(r.MLPLayerTypes), n)
			break
		}
		for i, t := range r.MLPLayerTypes {
			switch t {
			case "dense":
				c.MoE[i] = false
			case "sparse":
			default:
				p.errf("mlp_layer_types[%d] %q is not dense or sparse", i, t)
			}
		}
	case r.MoELayerFreq != nil:
		if len(r.MoELayerFreq) != n {
			p.errf("moe_layer_freq has %d entries for %d layers", len(r.MoELayerFreq), n)
			break
		}
		for i, f := range r.MoELayerFreq {
			if f != 0 && f != 1 {
				p.errf("moe_layer_freq[%d] is %d, not 0 or 1", i, f)
			}
			c.MoE[i] = f == 1
		}
	}
}

// resolveRope reads the RoPE base and rotated width from rope_parameters
// (or the legacy rope_scaling and flat fields). The rotated width is
// head_dim · partial_rotary_factor; without a factor anywhere, rotary_dim
// (64 by default) gives it. Only the default rope type is supported.
func (p *parser) resolveRope(c *Config, r *rawText) {
	rp := r.RopeParameters
	if rp == nil {
		rp = r.RopeScaling
	}
	if rp == nil {
		rp = &rawRope{}
	}
	kind := "default"
	if rp.RopeType != nil {
		kind = *rp.RopeType
	} else if rp.Type != nil {
		kind = *rp.Type
	}
	if kind != "default" {
		p.errf("rope_type %q is not supported (MiniMax-M3 uses default RoPE)", kind)
	}
	theta := rp.RopeTheta
	if theta == nil {
		theta = r.RopeTheta
	}
	if theta != nil {
		if t := *theta; !(t > 1) || math.IsInf(t, 0) {
			p.errf("rope_theta %v is not a finite number above 1", t)
		} else {
			c.RopeTheta = t
		}
	}
	factor := rp.PartialRotaryFactor
	if factor == nil {
		factor = r.PartialRotaryFactor
	}
	rot := 64
	if r.RotaryDim != nil {
		rot = *r.RotaryDim
	}
	switch {
	case factor != nil:
		f := *factor
		if !(f > 0 && f <= 1) {
			p.errf("partial_rotary_factor %v is outside (0, 1]", f)
			return
		}
		c.RopeDim = int(float64(c.HeadDim) * f)
	default:
		c.RopeDim = rot
	}
}

// validate checks the relations between the resolved sizes.
func (c *Config) validate(p *parser) {
	if c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		p.errf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.Heads, c.KVHeads)
	}
	if c.RopeDim <= 0 || c.RopeDim%2 != 0 || c.RopeDim > c.HeadDim {
		p.errf("the rotated width %d (head_dim %d · partial_rotary_factor) is not an even number in [2, head_dim]", c.RopeDim, c.HeadDim)
	}
	if len(c.SparseLayers()) > 0 {
		if c.IndexHeads > 0 && c.Heads%c.IndexHeads != 0 {
			p.errf("index_n_heads %d does not divide num_attention_heads %d", c.IndexHeads, c.Heads)
		}
		if c.IndexDim < c.RopeDim {
			p.errf("index_head_dim %d is narrower than the rotated width %d", c.IndexDim, c.RopeDim)
		}
		if c.IndexLocal > c.IndexTopK {
			p.errf("index_local_blocks %d exceeds index_topk_blocks %d", c.IndexLocal, c.IndexTopK)
		}
	}
	if c.ExpertsPerTok > c.Experts {
		p.errf("num_experts_per_tok %d exceeds num_local_experts %d", c.ExpertsPerTok, c.Experts)
	}
	if c.BOS >= c.VocabSize {
		p.errf("bos_token_id %d is outside the vocabulary of %d", c.BOS, c.VocabSize)
	}
	for _, e := range c.EOS {
		if e >= c.VocabSize {
			p.errf("eos_token_id %d is outside the vocabulary of %d", e, c.VocabSize)
		}
	}
}
