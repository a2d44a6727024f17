package deepseekv4

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, and each op's arguments assembled
// once at load.

type rCompressor struct {
	wkv, wgate *compute.Matrix
	ape, norm  compute.Tensor
}

type rIndexer struct {
	comp             rCompressor
	wqB, weightsProj *compute.Matrix
}

type rAttention struct {
	wqA, wqB, wkv, woB  *compute.Matrix
	woA                 []*compute.Matrix
	qNorm, kvNorm, sink compute.Tensor
	comp                *rCompressor
	indexer             *rIndexer
}

type rLayer struct {
	attnNorm, ffnNorm compute.Tensor
	hcAttn, hcFFN     compute.HC
	attn              rAttention
	moe               compute.MoEArgs
	// ahead are the matrices a Prefetcher backend loads ahead of their
	// products, by stretch of the layer (branches.go).
	ahead [stretches][]*compute.Matrix
}

type rHead struct {
	hc   compute.HC
	norm compute.Tensor
}

type rMTP struct {
	block        rLayer
	eProj, hProj *compute.Matrix
	eNorm, hNorm compute.Tensor
	head         rHead
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	head          rHead
	layers        []rLayer
	mtp           []rMTP
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

func (u *uploader) ints(v []int32) compute.Tensor {
	if v == nil || u.err != nil {
		return compute.Tensor{}
	}
	t, err := u.be.Alloc(compute.I32, 1, len(v))
	if err != nil {
		u.err = err
		return t
	}
	u.be.Write(t, v)
	return t
}

func (u *uploader) hc(w *HC) compute.HC {
	return compute.HC{Fn: u.mat(w.Fn), Base: u.vec(w.Base), Scale: u.vec(w.Scale)}
}

func (u *uploader) head(h *Head) rHead {
	return rHead{hc: compute.HC{Fn: u.mat(h.HCFn), Base: u.vec(h.HCBase), Scale: u.vec(h.HCScale)}, norm: u.vec(h.Norm)}
}

func (u *uploader) compressor(c *Compressor) rCompressor {
	return rCompressor{wkv: u.mat(c.Wkv), wgate: u.mat(c.Wgate), ape: u.vec(c.Ape), norm: u.vec(c.Norm)}
}

func (u *uploader) swiglu(e *Expert) compute.SwiGLU {
	return compute.SwiGLU{W1: u.mat(e.W1), W2: u.mat(e.W2), W3: u.mat(e.W3)}
}

func (u *uploader) layer(L *Layer, cfg *Config) rLayer {
	a := &L.Attn
	r := rLayer{
		attnNorm: u.vec(L.AttnNorm), ffnNorm: u.vec(L.FFNNorm),
		hcAttn: u.hc(&L.HCAttn), hcFFN: u.hc(&L.HCFFN),
		attn: rAttention{
			wqA: u.mat(a.WqA), wqB: u.mat(a.WqB), wkv: u.mat(a.Wkv), woB: u.mat(a.WoB), woA: u.mats(a.WoA),
			qNorm: u.vec(a.QNorm), kvNorm: u.vec(a.KVNorm), sink: u.vec(a.Sink),
		},
	}
	if a.Comp != nil {
		c := u.compressor(a.Comp)
		r.attn.comp = &c
	}
	if a.Indexer != nil {
		r.attn.indexer = &rIndexer{comp: u.compressor(&a.Indexer.Comp), wqB: u.mat(a.Indexer.WqB), weightsProj: u.mat(a.Indexer.WeightsProj)}
	}
	f := &L.FFN
	r.moe = compute.MoEArgs{
		Gate: u.mat(f.Gate), Bias: u.vec(f.Bias), Tid2Eid: u.ints(f.Tid2Eid), Shared: u.swiglu(&f.Shared),
		K: cfg.ExpertsPerTok, RoutedScale: float32(cfg.RoutedScale), Limit: float32(cfg.SwigluLimit),
	}
	switch cfg.Scoring {
	case "sqrtsoftplus":
		r.moe.Scoring = compute.SqrtSoftplus
	case "sigmoid":
		r.moe.Scoring = compute.Sigmoid
	case "softmax":
		r.moe.Scoring = compute.Softmax
	}
	for e := range f.Experts {
		r.moe.Experts = append(r.moe.Experts, u.swiglu(&f.Experts[e]))
	}
	r.ahead = aheadOf(&r)
	return r
}

// makeResident uploads w to be and assembles the ops' arguments.
func makeResident(be compute.Backend, cfg *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{embed: u.mat(w.Embed), output: u.mat(w.Output), head: u.head(&w.Head)}
	for l := range w.Layers {
		r.layers = append(r.layers, u.layer(&w.Layers[l], cfg))
	}
	for k := range w.MTP {
		t := &w.MTP[k]
		r.mtp = append(r.mtp, rMTP{block: u.layer(&t.Block, cfg), eProj: u.mat(t.EProj), hProj: u.mat(t.HProj),
			eNorm: u.vec(t.ENorm), hNorm: u.vec(t.HNorm), head: u.head(&t.Head)})
	}
	if u.err != nil {
		return nil, fmt.Errorf("deepseekv4: making weights resident on %s: %w", be.Name(), u.err)
	}
	return r, nil
}
