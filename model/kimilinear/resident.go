package kimilinear

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), vectors as backend tensors, a few matrices rearranged once
// (KDA's q|k|v projections stacked into one; MLA's kv_a rows split into the
// latent and key parts, kv_b split per head), each op's arguments
// assembled once at load.

type rKDA struct {
	qkv                *compute.Matrix // [3·Hl·dk, D]: q_proj, k_proj, v_proj rows
	fa, fb, bProj      *compute.Matrix
	ga, gb, oProj      *compute.Matrix
	conv               compute.Tensor // F32 [K, 3·Hl·dk]
	negA, dtBias, norm compute.Tensor
}

type rMLA struct {
	q, qA, qB *compute.Matrix
	qANorm    compute.Tensor
	// kvLat and kvRope are kv_a_proj_with_mqa's latent rows [c, D] and
	// key-part rows [r, D].
	kvLat, kvRope *compute.Matrix
	kvANorm       compute.Tensor
	// wkbT[h] is head h's key block of kv_b_proj transposed, [c, n]: it
	// maps the head's no-RoPE query into latent space. wvb[h] is its
	// value block [dv, c].
	wkbT, wvb []*compute.Matrix
	o         *compute.Matrix
}

type rLayer struct {
	kind                LayerKind
	inputNorm, postNorm compute.Tensor
	kda                 *rKDA
	mla                 *rMLA
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
	r := rLayer{inputNorm: u.vec(L.InputNorm), postNorm: u.vec(L.PostNorm)}
	if k := L.KDA; k != nil {
		r.kind = KDA
		r.kda = &rKDA{
			qkv: u.mat(stackRows(k.QProj, k.KProj, k.VProj)),
			fa:  u.mat(k.FA), fb: u.mat(k.FB), bProj: u.mat(k.BProj),
			ga: u.mat(k.GA), gb: u.mat(k.GB), oProj: u.mat(k.OProj),
			conv: u.vec(k.Conv).Reshape(cfg.ConvKernel, cfg.ConvDim()),
			negA: u.vec(k.NegA), dtBias: u.vec(k.DtBias), norm: u.vec(k.ONorm),
		}
	} else {
		a := L.MLA
		H, c, n, dv := cfg.Heads, cfg.KVLoraRank, cfg.NopeDim, cfg.VDim
		m := &rMLA{
			q: u.mat(a.Q), qA: u.mat(a.QA), qB: u.mat(a.QB), qANorm: u.vec(a.QANorm),
			kvLat:   u.mat(rowBlock(a.KVA, 0, c)),
			kvRope:  u.mat(rowBlock(a.KVA, c, cfg.RopeDim)),
			kvANorm: u.vec(a.KVANorm), o: u.mat(a.O),
		}
		for h := range H {
			// kv_b_proj's rows are, per head, n key rows then dv value rows.
			m.wkbT = append(m.wkbT, u.mat(transposedRows(a.KVB, h*(n+dv), n)))
			m.wvb = append(m.wvb, u.mat(rowBlock(a.KVB, h*(n+dv)+n, dv)))
		}
		r.kind, r.mla = MLA, m
	}
	if L.Dense != nil {
		d := u.swiglu(L.Dense)
		r.dense = &d
		return r
	}
	f := L.MoE
	r.moe = &compute.MoEArgs{
		Gate: u.mat(f.Router), Bias: u.vec(f.Bias), Shared: u.swiglu(f.Shared),
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
		return nil, fmt.Errorf("kimilinear: making weights resident on %s: %w", be.Name(), u.err)
	}
	return r, nil
}

// elemBytes is the size of one element of an unquantized matrix.
func elemBytes(m *compute.Matrix) int { return len(m.Data) / (m.Rows * m.Cols) }

// rowBlock returns rows [lo, lo+n) of m, sharing its memory.
func rowBlock(m *compute.Matrix, lo, n int) *compute.Matrix {
	rb := len(m.Data) / m.Rows
	return &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rb : (lo+n)*rb]}
}

// transposedRows returns rows [lo, lo+n) of m transposed, an m.Cols×n
// matrix of the same dtype (its elements moved, not converted).
func transposedRows(m *compute.Matrix, lo, n int) *compute.Matrix {
	es, cols := elemBytes(m), m.Cols
	out := make([]byte, n*cols*es)
	for i := range n {
		for j := range cols {
			copy(out[(j*n+i)*es:(j*n+i+1)*es], m.Data[((lo+i)*cols+j)*es:])
		}
	}
	return &compute.Matrix{DType: m.DType, Rows: cols, Cols: n, Data: out}
}

// stackRows returns the matrices' rows one after the other (they share
// dtype and width), in a new matrix.
func stackRows(ms ...*compute.Matrix) *compute.Matrix {
	out := &compute.Matrix{DType: ms[0].DType, Cols: ms[0].Cols}
	for _, m := range ms {
		out.Rows += m.Rows
		out.Data = append(out.Data, m.Data...)
	}
	return out
}
