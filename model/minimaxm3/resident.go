package minimaxm3

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// The bound weights (Weights) point into the checkpoint's memory map. The
// forward pass reads them through the backend: matrices made resident
// (Upload), the norms' factors 1+w as backend vectors, and each op's
// arguments assembled once at load.

type rLayer struct {
	inputNorm, postNorm compute.Tensor // 1+w
	q, k, v, o          *compute.Matrix
	qNorm, kNorm        compute.Tensor
	// The indexer (sparse layers).
	iq, ik         *compute.Matrix
	iqNorm, ikNorm compute.Tensor
	dense          *compute.SwiGLU
	moe            *compute.MoEArgs
}

// resident is the weights as the forward pass uses them.
type resident struct {
	embed, output *compute.Matrix
	norm          compute.Tensor
	layers        []rLayer
	invFreq       compute.Tensor // RoPE inverse frequencies [R/2]
}

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

// norm is the factor of a Gemma-style norm, 1+w in float32 (as the
// reference computes 1.0 + weight.float()).
func (u *uploader) norm(w []float32) compute.Tensor {
	v := make([]float32, len(w))
	for i, x := range w {
		v[i] = 1 + x
	}
	return u.vec(v)
}

func (u *uploader) glu(g *GLU) compute.SwiGLU {
	return compute.SwiGLU{W1: u.mat(g.Gate), W3: u.mat(g.Up), W2: u.mat(g.Down)}
}

// ropeInvFreq is the default RoPE's inverse frequencies for R rotated
// channels, computed as the reference does: base^(2i/R) in float32.
func ropeInvFreq(R int, theta float64) []float32 {
	inv := make([]float32, R/2)
	for j := range inv {
		e := float32(2*j) / float32(R)
		inv[j] = 1 / float32(math.Pow(float64(float32(theta)), float64(e)))
	}
	return inv
}

// makeResident uploads w to be and assembles the ops' arguments.
func makeResident(be compute.Backend, c *Config, w *Weights) (*resident, error) {
	u := &uploader{be: be}
	r := &resident{embed: u.mat(w.Embed), output: u.mat(w.Output), norm: u.norm(w.Norm), invFreq: u.vec(ropeInvFreq(c.RopeDim, c.RopeTheta))}
	for l := range w.Layers {
		L := &w.Layers[l]
		a := &L.Attn
		rl := rLayer{inputNorm: u.norm(L.InputNorm), postNorm: u.norm(L.PostNorm),
			q: u.mat(a.Q), k: u.mat(a.K), v: u.mat(a.V), o: u.mat(a.O), qNorm: u.norm(a.QNorm), kNorm: u.norm(a.KNorm)}
		if x := a.Indexer; x != nil {
			rl.iq, rl.ik, rl.iqNorm, rl.ikNorm = u.mat(x.Q), u.mat(x.K), u.norm(x.QNorm), u.norm(x.KNorm)
		}
		if L.Dense != nil {
			g := u.glu(L.Dense)
			rl.dense = &g
		} else {
			m := L.MoE
			a := &compute.MoEArgs{Gate: u.mat(m.Router), Bias: u.vec(m.Bias), Shared: u.glu(&m.Shared), K: c.ExpertsPerTok,
				Scoring: compute.Sigmoid, RoutedScale: float32(c.RoutedScale), Limit: float32(c.SwigluLimit)}
			for e := range m.Experts {
				a.Experts = append(a.Experts, u.glu(&m.Experts[e]))
			}
			rl.moe = a
		}
		r.layers = append(r.layers, rl)
	}
	if u.err != nil {
		return nil, fmt.Errorf("minimaxm3: making weights resident on %s: %w", be.Name(), u.err)
	}
	return r, nil
}
