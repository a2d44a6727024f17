package gemma4

import (
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, constants folded once at load.

type rAttention struct {
	q, k, v, o   *compute.Matrix
	qNorm, kNorm compute.Tensor
}

type rExperts struct {
	proj *compute.Matrix
	// routerNorm is router.scale · D^(−1/2): the router's input is
	// RMSNorm_noweight(r) · scale · D^(−1/2), one weighted RMSNorm.
	routerNorm                     compute.Tensor
	args                           compute.GeluExpertsArgs
	preNorm2, postNorm1, postNorm2 compute.Tensor
}

type rPerLayer struct {
	gate, proj *compute.Matrix
	norm       compute.Tensor
}

type rLayer struct {
	inputNorm, postAttnNorm, preFFNorm, postFFNorm compute.Tensor
	attn                                           rAttention
	gate, up, down                                 *compute.Matrix
	moe                                            *rExperts
	ple                                            *rPerLayer
	scalar                                         float32
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	// embedScale is sqrt(D) rounded to the embedding's dtype, as the
	// reference casts it before multiplying; pleScale likewise sqrt(P).
	embedScale, pleScale float32
	norm                 compute.Tensor
	pleEmbed, pleProj    *compute.Matrix
	pleNorm              compute.Tensor
	layers               []rLayer
	invFreq              map[Kind]compute.Tensor
}

// uploader makes weights resident, remembering the first error.
type uploader struct {
	be  compute.Backend
	err error
}

func (u *uploader) mat(m *compute.Matrix) *compute.Matrix {
	if m != nil && u.err == nil {
		u.err = u.be.Upload(m)
	}
	return m
}

func (u *uploader) vec(v []float32) compute.Tensor {
	if v == nil || u.err != nil {
		return compute.Tensor{}
	}
	t, err := u.be.Vector(v)
	if err != nil {
		u.err = err
	}
	return t
}

// inDType rounds x to a weight dtype, as the reference casts its scalar
// factors to the weights' dtype.
func inDType(x float32, dt compute.DType) float32 {
	switch dt {
	case compute.BF16:
		return quant.BF16ToFloat32(quant.Float32ToBF16(x))
	case compute.F16:
		return quant.F16ToFloat32(quant.Float32ToF16(x))
	}
	return x
}

func makeResident(be compute.Backend, cfg *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{
		embed:      u.mat(w.Embed),
		output:     u.mat(w.Output),
		norm:       u.vec(w.Norm),
		embedScale: inDType(float32(math.Sqrt(float64(cfg.Hidden))), w.Embed.DType),
		invFreq:    map[Kind]compute.Tensor{},
	}
	if cfg.PLE > 0 {
		r.pleEmbed, r.pleProj, r.pleNorm = u.mat(w.PLEEmbed), u.mat(w.PLEProj), u.vec(w.PLENorm)
		r.pleScale = inDType(float32(math.Sqrt(float64(cfg.PLE))), w.PLEEmbed.DType)
	}
	for k, ro := range cfg.Rope {
		r.invFreq[k] = u.vec(ro.InvFreq())
	}
	rootD := float32(1 / math.Sqrt(float64(cfg.Hidden)))
	for i := range w.Layers {
		L := &w.Layers[i]
		rl := rLayer{
			inputNorm: u.vec(L.InputNorm), postAttnNorm: u.vec(L.PostAttnNorm),
			preFFNorm: u.vec(L.PreFFNorm), postFFNorm: u.vec(L.PostFFNorm),
			attn: rAttention{
				q: u.mat(L.Attn.Q), k: u.mat(L.Attn.K), v: u.mat(L.Attn.V), o: u.mat(L.Attn.O),
				qNorm: u.vec(L.Attn.QNorm), kNorm: u.vec(L.Attn.KNorm),
			},
			gate: u.mat(L.MLP.Gate), up: u.mat(L.MLP.Up), down: u.mat(L.MLP.Down),
			scalar: L.Scalar,
		}
		if e := L.MoE; e != nil {
			rn := make([]float32, len(e.RouterScale))
			for j, s := range e.RouterScale {
				rn[j] = s * rootD
			}
			re := &rExperts{
				proj: u.mat(e.RouterProj), routerNorm: u.vec(rn),
				preNorm2: u.vec(e.PreNorm2), postNorm1: u.vec(e.PostNorm1), postNorm2: u.vec(e.PostNorm2),
				args: compute.GeluExpertsArgs{PerExpertScale: u.vec(e.PerExpertScale), K: cfg.ExpertsPerTok},
			}
			for j := range e.GateUp {
				re.args.Experts = append(re.args.Experts, compute.GeluExpert{GateUp: u.mat(e.GateUp[j]), Down: u.mat(e.Down[j])})
			}
			rl.moe = re
		}
		if p := L.PLE; p != nil {
			rl.ple = &rPerLayer{gate: u.mat(p.Gate), proj: u.mat(p.Proj), norm: u.vec(p.Norm)}
		}
		r.layers = append(r.layers, rl)
	}
	return r, u.err
}
