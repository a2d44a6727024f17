package qwen35

import (
	"fmt"
	"math"
)

// AttnShape gives the sizes of one sequence's causal attention step: N new
// tokens after Past cached ones, Hq query heads and Hkv key/value heads
// (Hq a multiple of Hkv: query head h reads KV head h/(Hq/Hkv)) of width D.
type AttnShape struct {
	N, Past, Hq, Hkv, D int
}

// Attend is the softmax attention inside gated attention (spec §3) for one
// sequence: q is [N, Hq, D] for positions Past..Past+N-1; K and V are
// [Past+N, Hkv, D], the sequence's keys and values including the new ones;
// o is [N, Hq, D]. Token t attends to positions 0..Past+t:
//
//	o = softmax(q·Kᵀ · D^(-1/2)) V
//
// with the scores dotted in float32 and the softmax on the backend (one
// call per token, over all heads). scores is scratch of Hq·(Past+N).
func Attend(be hostOps, o, q, K, V []float32, sh AttnShape, scores []float32) {
	N, P, Hq, Hkv, d := sh.N, sh.Past, sh.Hq, sh.Hkv, sh.D
	L := P + N
	if Hkv <= 0 || Hq%Hkv != 0 || len(q) < N*Hq*d || len(o) < N*Hq*d || len(K) < L*Hkv*d || len(V) < L*Hkv*d || len(scores) < Hq*L {
		panic(fmt.Sprintf("qwen35: Attend: shape %+v with q %d, K %d, V %d, o %d, scores %d", sh, len(q), len(K), len(V), len(o), len(scores)))
	}
	group := Hq / Hkv
	sc := float32(1 / math.Sqrt(float64(d)))
	for t := range N {
		n := P + t + 1
		s := scores[:Hq*n]
		for h := range Hq {
			qh := q[(t*Hq+h)*d : (t*Hq+h+1)*d]
			kv := h / group
			for j := range n {
				s[h*n+j] = dot(qh, K[(j*Hkv+kv)*d:(j*Hkv+kv+1)*d]) * sc
			}
		}
		be.SoftmaxF32(s, Hq, n)
		for h := range Hq {
			oh := o[(t*Hq+h)*d : (t*Hq+h+1)*d]
			clear(oh)
			kv := h / group
			for j := range n {
				axpy(oh, s[h*n+j], V[(j*Hkv+kv)*d:(j*Hkv+kv+1)*d])
			}
		}
	}
}
