package hy4

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model/dsa"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, MLA's per-head pieces and the
// RoPE-reordered rows cut once (matrices.go), each op's arguments
// assembled once at load.

type rIndexer struct {
	wqB, wk, weightsProj *compute.Matrix
	kNorm, kBias         compute.Tensor
}

type rAttention struct {
	qA, qB          *compute.Matrix // qB's RoPE rows reordered
	qANorm, kvANorm compute.Tensor
	// kvLat and kvRope are kv_a_proj_with_mqa's latent rows [c, D] and
	// RoPE-key rows [r, D] (reordered).
	kvLat, kvRope *compute.Matrix
	// wkbT[h] is head h's key block of kv_b_proj transposed, [c, n];
	// wvb[h] its value block [dv, c].
	wkbT, wvb []*compute.Matrix
	o, gate   *compute.Matrix
	sinks     compute.Tensor
	indexer   *rIndexer
}

type rLayer struct {
	attnHC, ffnHC       compute.HC
	inputNorm, postNorm compute.Tensor
	attn                rAttention
	dense               *compute.SwiGLU
	moe                 *compute.MoEArgs
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	norm          compute.Tensor
	head          compute.HC
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

func (u *uploader) hc(h *HC) compute.HC {
	return compute.HC{Fn: u.mat(h.Fn), Base: u.vec(h.Base), Scale: u.vec(h.Scale)}
}

func (u *uploader) swiglu(e *dsa.Expert) compute.SwiGLU {
	return compute.SwiGLU{W1: u.mat(e.Gate), W2: u.mat(e.Down), W3: u.mat(e.Up)}
}

func (u *uploader) layer(L *Layer, cfg *Config) rLayer {
	a := &L.Attn
	H, c, n, r, dv := cfg.Heads, cfg.KVLoraRank, cfg.NopeDim, cfg.RopeDim, cfg.VDim
	ropeRows := ropeOrder(1, r, r)
	R := rLayer{
		attnHC: u.hc(&L.AttnHC), ffnHC: u.hc(&L.FFNHC),
		inputNorm: u.vec(L.InputNorm), postNorm: u.vec(L.PostNorm),
		attn: rAttention{
			qA: u.mat(a.QA), qB: u.mat(permutedRows(a.QB, ropeOrder(H, n+r, r))),
			o: u.mat(a.O), gate: u.mat(a.Gate), sinks: u.vec(a.Sinks),
			qANorm: u.vec(a.QANorm), kvANorm: u.vec(a.KVANorm),
			kvLat:  u.mat(rowBlock(a.KVA, 0, c)),
			kvRope: u.mat(permutedRows(rowBlock(a.KVA, c, r), ropeRows)),
		},
	}
	for h := range H {
		// kv_b_proj's rows are, per head, n key rows then dv value rows.
		R.attn.wkbT = append(R.attn.wkbT, u.mat(transposedRows(a.KVB, h*(n+dv), n)))
		R.attn.wvb = append(R.attn.wvb, u.mat(rowBlock(a.KVB, h*(n+dv)+n, dv)))
	}
	if x := a.Indexer; x != nil {
		Hi, di := cfg.IndexHeads, cfg.IndexDim
		kp := ropeOrder(1, di, r)
		R.attn.indexer = &rIndexer{
			wqB: u.mat(permutedRows(x.WqB, ropeOrder(Hi, di, r))), wk: u.mat(permutedRows(x.Wk, kp)),
			weightsProj: u.mat(x.WeightsProj),
			kNorm:       u.vec(permuted(x.KNorm, kp)), kBias: u.vec(permuted(x.KBias, kp)),
		}
	}
	if L.Dense != nil {
		d := u.swiglu(L.Dense)
		R.dense = &d
		return R
	}
	f := L.MoE
	R.moe = &compute.MoEArgs{
		Gate: u.mat(f.Router), Bias: u.vec(f.Bias), Shared: u.swiglu(&f.Shared),
		K: cfg.ExpertsPerTok, Scoring: compute.Sigmoid,
		RoutedScale: float32(cfg.RoutedScale), Limit: float32(cfg.SwigluLimit),
		SharedUnclamped: true, // spec §4: the clamp is on routed experts only
	}
	for e := range f.Experts {
		R.moe.Experts = append(R.moe.Experts, u.swiglu(&f.Experts[e]))
	}
	return R
}

// makeResident uploads w to be and assembles the ops' arguments.
func makeResident(be compute.Backend, cfg *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{embed: u.mat(w.Embed), output: u.mat(w.Output), norm: u.vec(w.Norm), head: u.hc(&w.Head)}
	for l := range w.Layers {
		r.layers = append(r.layers, u.layer(&w.Layers[l], cfg))
	}
	if u.err != nil {
		return nil, fmt.Errorf("hy4: making weights resident on %s: %w", be.Name(), u.err)
	}
	return r, nil
}

// invFreqs returns the RoPE inverse frequencies of the r rotated channels,
// θ^(-2j/r), in the reference's float32 steps.
func invFreqs(r int, theta float64) []float32 {
	inv := make([]float32, r/2)
	for i := range inv {
		e := float32(2*i) / float32(r)
		inv[i] = 1 / float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	return inv
}
