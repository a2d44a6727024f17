package dsa

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, MLA's per-head pieces cut once
// (matrices.go), and each op's arguments assembled once at load.

type rIndexer struct {
	wqB, wk, weightsProj *compute.Matrix
	kNorm, kBias         compute.Tensor
}

type rAttention struct {
	qA, qB          *compute.Matrix
	qANorm, kvANorm compute.Tensor
	// kvLat and kvRope are kv_a_proj_with_mqa's latent rows [c, D] and
	// RoPE-key rows [r, D].
	kvLat, kvRope *compute.Matrix
	// wkbT[h] is head h's key block of kv_b_proj transposed, [c, n]: it
	// maps the head's no-RoPE query into latent space. wvb[h] is its
	// value block [dv, c].
	wkbT, wvb []*compute.Matrix
	o         *compute.Matrix
	indexer   *rIndexer
}

type rLayer struct {
	inputNorm, postNorm compute.Tensor
	attn                rAttention
	dense               *compute.SwiGLU
	moe                 *compute.MoEArgs
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	norm          compute.Tensor
	layers        []rLayer
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

func (u *uploader) mats(ms []*compute.Matrix) []*compute.Matrix {
	for _, m := range ms {
		u.mat(m)
	}
	return ms
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

func (u *uploader) swiglu(e *Expert) compute.SwiGLU {
	return compute.SwiGLU{W1: u.mat(e.Gate), W2: u.mat(e.Down), W3: u.mat(e.Up)}
}

func (u *uploader) layer(L *Layer, cfg *Config) rLayer {
	a := &L.Attn
	H, c, n, dv := cfg.Heads, cfg.KVLoraRank, cfg.NopeDim, cfg.VDim
	r := rLayer{
		inputNorm: u.vec(L.InputNorm), postNorm: u.vec(L.PostNorm),
		attn: rAttention{
			qA: u.mat(a.QA), qB: u.mat(a.QB), o: u.mat(a.O),
			qANorm: u.vec(a.QANorm), kvANorm: u.vec(a.KVANorm),
			kvLat:  u.mat(rowBlock(a.KVA, 0, c)),
			kvRope: u.mat(rowBlock(a.KVA, c, cfg.RopeDim)),
		},
	}
	for h := range H {
		// kv_b_proj's rows are, per head, n key rows then dv value rows.
		r.attn.wkbT = append(r.attn.wkbT, transposedRows(a.KVB, h*(n+dv), n))
		r.attn.wvb = append(r.attn.wvb, rowBlock(a.KVB, h*(n+dv)+n, dv))
	}
	u.mats(r.attn.wkbT)
	u.mats(r.attn.wvb)
	if x := a.Indexer; x != nil {
		r.attn.indexer = &rIndexer{wqB: u.mat(x.WqB), wk: u.mat(x.Wk), weightsProj: u.mat(x.WeightsProj), kNorm: u.vec(x.KNorm), kBias: u.vec(x.KBias)}
	}
	if L.Dense != nil {
		d := u.swiglu(L.Dense)
		r.dense = &d
		return r
	}
	f := L.MoE
	r.moe = &compute.MoEArgs{
		Gate: u.mat(f.Router), Bias: u.vec(f.Bias), Shared: u.swiglu(&f.Shared),
		K: cfg.ExpertsPerTok, Scoring: compute.Sigmoid,
		RoutedScale: float32(cfg.RoutedScale), Limit: float32(math.Inf(1)), // no clamp
	}
	for e := range f.Experts {
		r.moe.Experts = append(r.moe.Experts, u.swiglu(&f.Experts[e]))
	}
	return r
}

// makeResident uploads w to be and assembles the ops' arguments.
func makeResident(be compute.Backend, cfg *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{embed: u.mat(w.Embed), output: u.mat(w.Output), norm: u.vec(w.Norm)}
	for l := range w.Layers {
		r.layers = append(r.layers, u.layer(&w.Layers[l], cfg))
	}
	if u.err != nil {
		return nil, fmt.Errorf("%s: making weights resident on %s: %w", cfg.Family.Name, be.Name(), u.err)
	}
	return r, nil
}
