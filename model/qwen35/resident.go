package qwen35

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, and each op's arguments assembled
// once at load.

type rAttention struct {
	qProj, kProj, vProj, oProj *compute.Matrix
	qNorm, kNorm               compute.Tensor
}

type rDeltaNet struct {
	inQKV, inZ, inB, inA, outProj *compute.Matrix
	conv                          compute.Tensor // F32 [K, ConvDim]
	negA, dtBias, norm            compute.Tensor
}

type rLayer struct {
	kind                LayerKind
	inputNorm, postNorm compute.Tensor
	attn                *rAttention
	gdn                 *rDeltaNet
	mlp                 *compute.SwiGLU  // dense FFN
	moe                 *compute.MoEArgs // MoE FFN
}

type rMTP struct {
	fc                    *compute.Matrix
	normEmbed, normHidden compute.Tensor
	layers                []rLayer
	norm                  compute.Tensor
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	norm          compute.Tensor
	layers        []rLayer
	mtp           *rMTP
	invFreq       compute.Tensor // the partial RoPE's inverse frequencies, [R/2]
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

func (u *uploader) swiglu(m *MLP) compute.SwiGLU {
	return compute.SwiGLU{W1: u.mat(m.Gate), W2: u.mat(m.Down), W3: u.mat(m.Up)}
}

func (u *uploader) layer(L *Layer, cfg *Config) rLayer {
	r := rLayer{kind: L.Kind, inputNorm: u.vec(L.InputNorm), postNorm: u.vec(L.PostNorm)}
	switch L.Kind {
	case Full:
		a := L.Attn
		r.attn = &rAttention{qProj: u.mat(a.QProj), kProj: u.mat(a.KProj), vProj: u.mat(a.VProj), oProj: u.mat(a.OProj),
			qNorm: u.vec(a.QNorm), kNorm: u.vec(a.KNorm)}
	case Linear:
		g := L.GDN
		conv := u.vec(g.Conv)
		if conv.Valid() {
			conv = conv.Reshape(cfg.ConvKernel, cfg.ConvDim())
		}
		r.gdn = &rDeltaNet{inQKV: u.mat(g.InQKV), inZ: u.mat(g.InZ), inB: u.mat(g.InB), inA: u.mat(g.InA), outProj: u.mat(g.OutProj),
			conv: conv, negA: u.vec(g.NegA), dtBias: u.vec(g.DtBias), norm: u.vec(g.Norm)}
	}
	if L.MoE != nil {
		m := L.MoE
		a := &compute.MoEArgs{
			Gate: u.mat(m.Router), Shared: u.swiglu(&m.Shared), SharedGate: u.mat(m.SharedGate),
			K: cfg.ExpertsPerTok, Scoring: compute.Softmax, RoutedScale: 1, Limit: float32(math.Inf(1)),
		}
		for e := range m.Experts {
			a.Experts = append(a.Experts, u.swiglu(&m.Experts[e]))
		}
		r.moe = a
	} else {
		s := u.swiglu(L.MLP)
		r.mlp = &s
	}
	return r
}

// makeResident uploads w to be and assembles the ops' arguments.
func makeResident(be compute.Backend, cfg *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{embed: u.mat(w.Embed), output: u.mat(w.Output), norm: u.vec(w.Norm),
		invFreq: u.vec(ropeInvFreq(cfg.RopeDim, cfg.RopeTheta))}
	for l := range w.Layers {
		r.layers = append(r.layers, u.layer(&w.Layers[l], cfg))
	}
	if t := w.MTP; t != nil {
		m := &rMTP{fc: u.mat(t.FC), normEmbed: u.vec(t.PreFCNormEmbed), normHidden: u.vec(t.PreFCNormHidden), norm: u.vec(t.Norm)}
		for l := range t.Layers {
			m.layers = append(m.layers, u.layer(&t.Layers[l], cfg))
		}
		r.mtp = m
	}
	if u.err != nil {
		return nil, fmt.Errorf("qwen35: making weights resident on %s: %w", be.Name(), u.err)
	}
	return r, nil
}
