package gemma4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// Attention holds one layer's attention weights (spec §4, §6).
type Attention struct {
	Q *compute.Matrix // [Hq·dl, D]
	// K is [Hl·dl, D] and V [Hs·d, D]; both nil in KV-shared layers, V nil
	// in K=V layers.
	K, V  *compute.Matrix
	O     *compute.Matrix // [D, Hq·dl]
	QNorm []float32       // [dl]
	KNorm []float32       // [dl]; nil in KV-shared layers
}

// MLP is the dense feed-forward: Down·(gelu(Gate·x) ⊙ Up·x).
type MLP struct {
	Gate, Up *compute.Matrix // [I', D]
	Down     *compute.Matrix // [D, I']
}

// Experts is the routed-experts block beside the dense MLP (spec §5).
type Experts struct {
	RouterProj     *compute.Matrix // [E, D]
	RouterScale    []float32       // [D]
	PerExpertScale []float32       // [E]
	// GateUp[e] is [2Ie, D] (gate rows, then up rows), Down[e] [D, Ie].
	GateUp, Down []*compute.Matrix
	// PreNorm2 norms the experts' input, PostNorm1 the dense MLP's output,
	// PostNorm2 the experts' output.
	PreNorm2, PostNorm1, PostNorm2 []float32
}

// PerLayer is a layer's use of the per-layer embeddings.
type PerLayer struct {
	Gate *compute.Matrix // per_layer_input_gate [P, D]
	Proj *compute.Matrix // per_layer_projection [D, P]
	Norm []float32       // post_per_layer_input_norm [D]
}

// LayerWeights holds one decoder layer's weights.
type LayerWeights struct {
	InputNorm, PostAttnNorm, PreFFNorm, PostFFNorm []float32 // [D]
	Attn                                           Attention
	MLP                                            MLP
	MoE                                            *Experts  // nil without enable_moe_block
	PLE                                            *PerLayer // nil without per-layer embeddings
	// Scalar is layer_scalar: it scales the layer's whole output stream.
	Scalar float32
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's memory
// map; vectors are converted to float32.
type Weights struct {
	Embed  *compute.Matrix // [V, D]
	Output *compute.Matrix // [V, D]; Embed when the embeddings are tied
	Norm   []float32       // [D]
	// Per-layer embeddings (nil without): the token table [V_ple, L·P],
	// the projection of the embedding [L·P, D] and its norm [P].
	PLEEmbed, PLEProj *compute.Matrix
	PLENorm           []float32
	Layers            []LayerWeights
}

// textPrefix is where the text model's tensors live.
func (c *Config) textPrefix() string {
	if c.Multimodal {
		return "model.language_model."
	}
	return "model."
}

// binder looks tensors up by name and records every problem.
type binder struct {
	cfg  *Config
	ck   *safetensors.Checkpoint
	pre  string
	used map[string]bool
	errs []error
}

// Bind maps a checkpoint's tensors onto the model's weights, in the naming
// of the config's spelling (model.* for Gemma4ForCausalLM, the Hub's
// model.language_model.* for the multimodal checkpoint, whose vision and
// audio tensors are left alone). It checks names, shapes, dtypes and that
// every value is finite, and reports every missing, unexpected, mis-shaped
// or non-finite tensor at once. Matrices may be F32, BF16 or F16. KV-shared
// layers' k_proj, v_proj and k_norm, which the reference ignores when a
// checkpoint has them, are ignored too.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, pre: cfg.textPrefix(), used: map[string]bool{}}
	D, V := cfg.Hidden, cfg.VocabSize
	L, P := len(cfg.Layers), cfg.PLE
	w := &Weights{
		Embed: b.matrix(b.pre+"embed_tokens.weight", V, D),
		Norm:  b.vector(b.pre+"norm.weight", D),
	}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix("lm_head.weight", V, D)
	}
	if P > 0 {
		w.PLEEmbed = b.matrix(b.pre+"embed_tokens_per_layer.weight", cfg.PLEVocab, L*P)
		w.PLEProj = b.matrix(b.pre+"per_layer_model_projection.weight", L*P, D)
		w.PLENorm = b.vector(b.pre+"per_layer_projection_norm.weight", P)
	}
	w.Layers = make([]LayerWeights, L)
	for i := range cfg.Layers {
		w.Layers[i] = b.layer(i)
	}
	var unexpected []string
	for _, n := range ck.Names() {
		if b.used[n] || b.ignored(n) {
			continue
		}
		unexpected = append(unexpected, n)
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		b.errf("unexpected tensor %q", n)
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("gemma4: binding %s: %d problems:\n%w", strings.Join(ck.Files(), ", "), len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

// ignored reports whether a tensor the text model does not read belongs
// to what the reference ignores: the multimodal checkpoint's other towers,
// and the K/V weights of KV-shared layers.
func (b *binder) ignored(name string) bool {
	if b.cfg.Multimodal && !strings.HasPrefix(name, b.pre) && name != "lm_head.weight" {
		return true
	}
	for i, l := range b.cfg.Layers {
		if !l.Shared {
			continue
		}
		p := fmt.Sprintf("%slayers.%d.self_attn.", b.pre, i)
		for _, s := range []string{"k_proj.weight", "v_proj.weight", "k_norm.weight"} {
			if name == p+s {
				return true
			}
		}
	}
	return false
}

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

// lookup finds a tensor, recording it as used, or records it as missing.
func (b *binder) lookup(name string) (safetensors.Tensor, bool) {
	t, ok := b.ck.Tensor(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return safetensors.Tensor{}, false
	}
	b.used[name] = true
	return t, true
}

func (b *binder) layer(i int) LayerWeights {
	cfg := b.cfg
	spec := cfg.Layers[i]
	D, Hq, dl, Hl := cfg.Hidden, cfg.Heads, spec.HeadDim, spec.KVHeads
	p := fmt.Sprintf("%slayers.%d.", b.pre, i)
	a := p + "self_attn."
	L := LayerWeights{
		InputNorm:    b.vector(p+"input_layernorm.weight", D),
		PostAttnNorm: b.vector(p+"post_attention_layernorm.weight", D),
		PreFFNorm:    b.vector(p+"pre_feedforward_layernorm.weight", D),
		PostFFNorm:   b.vector(p+"post_feedforward_layernorm.weight", D),
		Attn: Attention{
			Q:     b.matrix(a+"q_proj.weight", Hq*dl, D),
			O:     b.matrix(a+"o_proj.weight", D, Hq*dl),
			QNorm: b.vector(a+"q_norm.weight", dl),
		},
		MLP: MLP{
			Gate: b.matrix(p+"mlp.gate_proj.weight", spec.Intermediate, D),
			Up:   b.matrix(p+"mlp.up_proj.weight", spec.Intermediate, D),
			Down: b.matrix(p+"mlp.down_proj.weight", D, spec.Intermediate),
		},
		Scalar: 1,
	}
	if s := b.vector(p+"layer_scalar", 1); s != nil {
		L.Scalar = s[0]
	}
	if !spec.Shared {
		L.Attn.K = b.matrix(a+"k_proj.weight", Hl*dl, D)
		L.Attn.KNorm = b.vector(a+"k_norm.weight", dl)
		if !spec.KEqV {
			L.Attn.V = b.matrix(a+"v_proj.weight", Hl*dl, D)
		}
	}
	if cfg.MoE {
		E, Ie := cfg.Experts, cfg.MoEInter
		L.MoE = &Experts{
			RouterProj:     b.matrix(p+"router.proj.weight", E, D),
			RouterScale:    b.vector(p+"router.scale", D),
			PerExpertScale: b.vector(p+"router.per_expert_scale", E),
			GateUp:         b.stacked(p+"experts.gate_up_proj", E, 2*Ie, D),
			Down:           b.stacked(p+"experts.down_proj", E, D, Ie),
			PreNorm2:       b.vector(p+"pre_feedforward_layernorm_2.weight", D),
			PostNorm1:      b.vector(p+"post_feedforward_layernorm_1.weight", D),
			PostNorm2:      b.vector(p+"post_feedforward_layernorm_2.weight", D),
		}
	}
	if P := cfg.PLE; P > 0 {
		L.PLE = &PerLayer{
			Gate: b.matrix(p+"per_layer_input_gate.weight", P, D),
			Proj: b.matrix(p+"per_layer_projection.weight", D, P),
			Norm: b.vector(p+"post_per_layer_input_norm.weight", D),
		}
	}
	return L
}

// matrix binds a [rows, cols] weight stored as F32, BF16 or F16.
func (b *binder) matrix(name string, rows, cols int) *compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok {
		b.errf("tensor %q: dtype %s is not a supported weight format (want F32, BF16 or F16)", name, t.DType)
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("tensor %q: shape %v, want [%d %d]", name, t.Shape, rows, cols)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
}

// stacked splits an [E, rows, cols] tensor into per-expert matrices.
func (b *binder) stacked(name string, E, rows, cols int) []*compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok || len(t.Shape) != 3 || t.Shape[0] != E || t.Shape[1] != rows || t.Shape[2] != cols {
		b.errf("tensor %q: %s %v, want an F32/BF16/F16 [%d %d %d]", name, t.DType, t.Shape, E, rows, cols)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	per := len(t.Data) / E
	out := make([]*compute.Matrix, E)
	for e := range E {
		out[e] = &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data[e*per : (e+1)*per]}
	}
	return out
}

// vector binds a float tensor of n elements (any shape with n elements),
// converted to float32.
func (b *binder) vector(name string, n int) []float32 {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	if t.NumElements() != n {
		b.errf("tensor %q: shape %v has %d elements, want %d", name, t.Shape, t.NumElements(), n)
		return nil
	}
	v, err := t.Float32s()
	if err != nil {
		b.errf("tensor %q: %v", name, err)
		return nil
	}
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf
			b.errf("tensor %q: element %d is %v", name, i, x)
			return nil
		}
	}
	return v
}

// finite reports whether every element of a float tensor is finite,
// recording an error naming the first that is not.
func (b *binder) finite(name string, t safetensors.Tensor) bool {
	if i := nonFinite(t.DType, t.Data); i >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", name, i)
		return false
	}
	return true
}

// nonFinite returns the index of the first NaN or ±Inf element of F32,
// BF16 or F16 data, or -1: an element is non-finite exactly when its
// exponent bits are all ones.
func nonFinite(dt safetensors.DType, data []byte) int {
	le := binary.LittleEndian
	switch dt {
	case safetensors.F32:
		for i := 0; i+4 <= len(data); i += 4 {
			if le.Uint32(data[i:])&0x7F800000 == 0x7F800000 {
				return i / 4
			}
		}
	case safetensors.BF16:
		for i := 0; i+2 <= len(data); i += 2 {
			if le.Uint16(data[i:])&0x7F80 == 0x7F80 {
				return i / 2
			}
		}
	case safetensors.F16:
		for i := 0; i+2 <= len(data); i += 2 {
			if le.Uint16(data[i:])&0x7C00 == 0x7C00 {
				return i / 2
			}
		}
	}
	return -1
}

func plainDType(d safetensors.DType) (compute.DType, bool) {
	switch d {
	case safetensors.F32:
		return compute.F32, true
	case safetensors.BF16:
		return compute.BF16, true
	case safetensors.F16:
		return compute.F16, true
	}
	return 0, false
}
