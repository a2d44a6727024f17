package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// RoutedMoE implements compute.MLA: the routing of compute.Routing, then,
// as MoE does, each expert's SwiGLU once over the tokens routed to it, the
// weighted outputs added in expert order, and the shared expert.
func (b *Backend) RoutedMoE(y, x, tokens compute.Tensor, a *compute.MoEArgs, r compute.Routing) {
	T, D := x.Rows, x.Cols
	E, K := a.Gate.Rows, a.K
	G, TG := r.Groups, r.TopGroups
	checkShape("RoutedMoE y", y, T, D)
	if a.Tid2Eid.Valid() {
		panic("cpu: RoutedMoE with hash routing")
	}
	if G <= 0 || E%G != 0 || TG <= 0 || TG > G || K <= 0 || K > TG*(E/G) || G > 1 && E/G < 2 {
		panic(fmt.Sprintf("cpu: RoutedMoE: %d experts in %d groups keeping %d, top %d", E, G, TG, K))
	}
	xv, yv := F32(x), F32(y)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	scores := b.scratchF32(T * E)
	b.MatMulF32(scores, xv, T, a.Gate)
	for t := range T {
		score(scores[t*E:(t+1)*E], a.Scoring)
	}
	var bias []float32
	if a.Bias.Valid() {
		bias = F32(a.Bias)
	}
	idx := make([]int32, T*K)
	wt := make([]float32, T*K)
	choice := make([]float32, E)
	group := make([]float32, G)
	keep := make([]int32, TG)
	per := E / G
	negInf := float32(math.Inf(-1))
	for t := range T {
		s := scores[t*E : (t+1)*E]
		for e := range choice {
			choice[e] = s[e]
			if bias != nil {
				choice[e] += bias[e]
			}
		}
		if G > 1 {
			// A group's score is the sum of its two best choice scores;
			// experts outside the TopGroups best groups cannot be chosen.
			for g := range G {
				best, second := negInf, negInf
				for _, v := range choice[g*per : (g+1)*per] {
					if v > best {
						best, second = v, best
					} else if v > second {
						second = v
					}
				}
				group[g] = best + second
			}
			b.TopK(keep, group, TG)
			for g := range G {
				kept := false
				for _, k := range keep {
					kept = kept || int(k) == g
				}
				if !kept {
					for e := g * per; e < (g+1)*per; e++ {
						choice[e] = negInf
					}
				}
			}
		}
		it := idx[t*K : (t+1)*K]
		b.TopK(it, choice, K)
		var sum float32
		for k, e := range it {
			wt[t*K+k] = s[e]
			sum += s[e]
		}
		for k := range K {
			if !r.Unnormalized {
				wt[t*K+k] /= sum + 1e-20
			}
			wt[t*K+k] *= a.RoutedScale
		}
	}

	byExpert := make([][]int32, E) // entries t*K+k
	for i, e := range idx {
		byExpert[e] = append(byExpert[e], int32(i))
	}
	clear(yv)
	xe := b.scratchF32(T * D)
	ye := b.scratchF32(T * D)
	for e, list := range byExpert {
		if len(list) == 0 {
			continue
		}
		n := len(list)
		for i, tk := range list {
			t := int(tk) / K
			copy(xe[i*D:(i+1)*D], xv[t*D:(t+1)*D])
		}
		b.swiglu(&a.Experts[e], ye[:n*D], xe[:n*D], n, a.Limit)
		for i, tk := range list {
			t := int(tk) / K
			axpy(yv[t*D:(t+1)*D], wt[tk], ye[i*D:(i+1)*D])
		}
	}
	shared := b.scratchF32(T * D)
	b.swiglu(&a.Shared, shared, xv, T, a.Limit)
	for i := range yv {
		yv[i] += shared[i]
	}
}
