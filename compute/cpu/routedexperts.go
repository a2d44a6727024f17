package cpu

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

var _ compute.RoutedExperts = (*Backend)(nil)

// Route implements compute.RoutedExperts with MoE's routing (moe.go): the
// router's product and scoring, then per token its Tid2Eid row or the top
// K biased scores, and the chosen scores normalized.
func (b *Backend) Route(idx, wt, x, tokens compute.Tensor, a *compute.MoEArgs) {
	T := x.Rows
	E, K := a.Gate.Rows, a.K
	checkShape("Route idx", idx, T, K)
	checkShape("Route wt", wt, T, K)
	toks := I32(tokens)
	if len(toks) != T {
		panic(fmt.Sprintf("cpu: Route of %d rows with %d tokens", T, len(toks)))
	}
	if T == 0 {
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	scores := b.scratchF32(T * E)
	b.MatMulF32(scores, F32(x), T, a.Gate)
	for t := range T {
		score(scores[t*E:(t+1)*E], a.Scoring)
	}
	iv, wv := I32(idx), F32(wt)
	biased := make([]float32, E)
	var bias []float32
	var tid []int32
	if a.Tid2Eid.Valid() {
		tid = I32(a.Tid2Eid)
	} else if a.Bias.Valid() {
		bias = F32(a.Bias)
	}
	for t := range T {
		s := scores[t*E : (t+1)*E]
		it := iv[t*K : (t+1)*K]
		switch {
		case tid != nil:
			copy(it, tid[int(toks[t])*K:(int(toks[t])+1)*K])
		case bias == nil:
			b.TopK(it, s, K)
		default:
			for e := range biased {
				biased[e] = s[e] + bias[e]
			}
			b.TopK(it, biased, K)
		}
		var sum float32
		for k, e := range it {
			wv[t*K+k] = s[e]
			sum += s[e]
		}
		for k := range K {
			wv[t*K+k] = wv[t*K+k] / (sum + 1e-20) * a.RoutedScale
		}
	}
}

// RunExperts implements compute.RoutedExperts: rows grouped by expert in
// row order, each group through the expert's SwiGLU as MoE runs it.
func (b *Backend) RunExperts(y, x, eid compute.Tensor, a *compute.MoEArgs) {
	R, D := x.Rows, x.Cols
	checkShape("RunExperts y", y, R, D)
	ids := I32(eid)
	if len(ids) != R {
		panic(fmt.Sprintf("cpu: RunExperts of %d rows with %d expert ids", R, len(ids)))
	}
	if R == 0 {
		return
	}
	byExpert := map[int32][]int32{}
	var order []int32
	for i, e := range ids {
		if e < 0 || int(e) >= len(a.Experts) {
			panic(fmt.Sprintf("cpu: RunExperts row %d names expert %d of %d", i, e, len(a.Experts)))
		}
		if a.Experts[e].W1 == nil {
			panic(fmt.Sprintf("cpu: RunExperts row %d names expert %d, whose weights are not on this backend", i, e))
		}
		if byExpert[e] == nil {
			order = append(order, e)
		}
		byExpert[e] = append(byExpert[e], int32(i))
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	xv, yv := F32(x), F32(y)
	xe := b.scratchF32(R * D)
	ye := b.scratchF32(R * D)
	for _, e := range order {
		rows := byExpert[e]
		n := len(rows)
		for i, r := range rows {
			copy(xe[i*D:(i+1)*D], xv[int(r)*D:int(r+1)*D])
		}
		b.swiglu(&a.Experts[e], ye[:n*D], xe[:n*D], n, a.Limit)
		for i, r := range rows {
			copy(yv[int(r)*D:int(r+1)*D], ye[i*D:(i+1)*D])
		}
	}
}

// Combine implements compute.RoutedExperts with MoE's sums: from zero,
// the weighted expert outputs by expert id (then k), then the shared
// expert.
func (b *Backend) Combine(y, x, ye, idx, wt, slot compute.Tensor, a *compute.MoEArgs) {
	T, D, K := x.Rows, x.Cols, a.K
	checkShape("Combine y", y, T, D)
	checkShape("Combine idx", idx, T, K)
	checkShape("Combine wt", wt, T, K)
	checkShape("Combine slot", slot, T, K)
	if ye.Cols != D {
		panic(fmt.Sprintf("cpu: Combine of expert rows %d wide into %d", ye.Cols, D))
	}
	if T == 0 {
		return
	}
	yv, xv, ev := F32(y), F32(x), F32(ye)
	iv, wv, sv := I32(idx), F32(wt), I32(slot)
	ord := make([]int, K)
	for t := range T {
		it := iv[t*K : (t+1)*K]
		for k := range ord {
			ord[k] = k
		}
		// Insertion sort by (expert, k): K is small.
		for i := 1; i < K; i++ {
			for j := i; j > 0 && it[ord[j]] < it[ord[j-1]]; j-- {
				ord[j], ord[j-1] = ord[j-1], ord[j]
			}
		}
		row := yv[t*D : (t+1)*D]
		clear(row)
		for _, k := range ord {
			s := int(sv[t*K+k])
			if s < 0 || s >= ye.Rows {
				panic(fmt.Sprintf("cpu: Combine token %d's expert %d is at row %d of %d", t, k, s, ye.Rows))
			}
			axpy(row, wv[t*K+k], ev[s*D:(s+1)*D])
		}
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	shared := b.scratchF32(T * D)
	b.swiglu(&a.Shared, shared, xv, T, a.Limit)
	if a.SharedGate == nil {
		for i := range yv {
			yv[i] += shared[i]
		}
		return
	}
	gate := b.scratchF32(T)
	b.MatMulF32(gate, xv, T, a.SharedGate)
	for t := range T {
		axpy(yv[t*D:(t+1)*D], sigmoid(gate[t]), shared[t*D:(t+1)*D])
	}
}
