package cuda

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/quant"
)

// indexerRef is the CPU's index score of one entry, computed here from its
// definition: for each head, the dot product in four partial sums (index
// mod 4) paired at the end, relu, times 1/sqrt(dim), times the head's
// weight scaled by 1/sqrt(heads); the heads summed in order. Each float32
// operation rounds on its own (explicit conversions: no fused multiply-add).
func indexerRef(q, w, key []float32, heads, dim int) float32 {
	sscale := float32(1 / math.Sqrt(float64(dim)))
	wscale := float32(1 / math.Sqrt(float64(heads)))
	var s float32
	for h := range heads {
		var p [4]float32
		for i := range dim {
			p[i%4] = float32(p[i%4] + float32(q[h*dim+i]*key[i]))
		}
		v := float32(float32(p[0]+p[1]) + float32(p[2]+p[3]))
		c := float32(0)
		if v > 0 {
			c = float32(float32(v*sscale) * float32(w[h]*wscale))
		}
		s = float32(s + c)
	}
	return s
}

// TestBackendIndexerSelect checks the index scores at the Flash indexer's
// width (64 heads of 128) against indexerRef bit for bit (-Inf past each
// token's closed entries), from the three kernels (indexer_scores, run 21's
// indexer_scores_r21 and run 25's indexer_scores_r25), for keys stored as float32 and as
// fp8-key, at a batch of one token (two entries a warp) and of 17 (eight),
// and with one and eight entries a warp at every batch (indexerIPW);
// and IndexerSelect's selection and counts against the CPU's TopK of those
// scores (the tokens with at most TopK entries: all of them in order), by
// topk_reg4 and topk, each followed by indexer_fix or with its step inside
// (topkFix: topk_sel), over garbage left in the outputs.
func TestBackendIndexerSelect(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(1)
	const heads, dim, rate, K, perPage, pagesPer = 64, 128, 4, 48, 16, 14
	const maxE = perPage * pagesPer
	for _, format := range []compute.SlotFormat{compute.SlotF32, compute.SlotFP8Key} {
		for _, T := range []int{1, 3, 17} {
			name := fmt.Sprintf("%v T=%d", format, T)
			rng := rand.New(rand.NewPCG(uint64(T), uint64(format)))
			pos := make([]int32, T)
			for s := range T {
				// n = (pos+1)/rate closed entries: 40 (at most K: indexer_fix's) on
				// the second token, up to maxE elsewhere.
				n := K + 1 + rng.IntN(maxE-K)
				if s == 1 {
					n = 40
				}
				if s == 0 {
					n = maxE
				}
				pos[s] = int32(rate*n - 1 + rng.IntN(rate))
			}
			q, w := randFloats(rng, T*heads*dim), randFloats(rng, T*heads)
			sb := dim * 4
			if format == compute.SlotFP8Key {
				sb = quant.FP8KeyBytes(dim)
			}
			// Each token's entries as their slots hold them, and the values
			// they decode to.
			keys := make([][][]float32, T)
			pool := make([]byte, T*pagesPer*perPage*sb)
			table := make([]int32, T*pagesPer)
			for s := range T {
				for i := range pagesPer {
					table[s*pagesPer+i] = int32(T*pagesPer - 1 - (s*pagesPer + i)) // pages in reverse order
				}
				for e := range maxE {
					x := randFloats(rng, dim)
					sl := pool[int(table[s*pagesPer+e/perPage])*perPage*sb+(e%perPage)*sb:][:sb]
					v := make([]float32, dim)
					if format == compute.SlotF32 {
						for i, f := range x {
							binary.LittleEndian.PutUint32(sl[4*i:], math.Float32bits(f))
						}
						copy(v, x)
					} else {
						quant.EncodeFP8Key(sl, x)
						quant.DecodeFP8Key(v, sl)
					}
					keys[s] = append(keys[s], v)
				}
			}
			want := make([]float32, T*maxE)
			for s := range T {
				n := (int(pos[s]) + 1) / rate
				for e := range maxE {
					want[s*maxE+e] = float32(math.Inf(-1))
					if e < n {
						want[s*maxE+e] = indexerRef(q[s*heads*dim:], w[s*heads:], keys[s][e], heads, dim)
					}
				}
			}

			mark := be.ScratchMark()
			up := func(v []float32, rows, cols int) compute.Tensor {
				x := be.Scratch(compute.F32, rows, cols)
				be.Write(x, v)
				return x
			}
			upI := func(v []int32, rows, cols int) compute.Tensor {
				x := be.Scratch(compute.I32, rows, cols)
				be.Write(x, v)
				return x
			}
			pt := be.Scratch(compute.U8, T*pagesPer, perPage*sb)
			be.Write(pt, pool)
			tab := make([]int32, 0, 3*T)
			for s, p := range pos {
				tab = append(tab, int32(s), 1, p)
			}
			sp := compute.Spans{Tab: upI(tab, T, 3), Pos: upI(pos, T, 1)}
			a := &compute.IndexerArgs{Q: up(q, T, heads*dim), W: up(w, T, heads),
				Keys: compute.Paged{Pool: pt, Pages: upI(table, T, pagesPer), PerPage: perPage, SlotBytes: sb,
					Format: format, Width: dim},
				Heads: heads, Dim: dim, Rate: rate, TopK: K,
				Sel: be.Scratch(compute.I32, T, K), N: be.Scratch(compute.I32, T, 1)}
			for _, v := range []struct {
				r21, r25 bool
				ipw      int
			}{{false, false, 0}, {true, false, 0}, {false, true, 0}, {false, false, 8}, {false, false, 1}, {false, true, 8}, {false, false, 3}} {
				r21 := v.r21
				be.indexerR21, be.indexerR25, be.indexerIPW = r21, v.r25, v.ipw
				scores := be.Scratch(compute.F32, T, maxE)
				be.StartProfile()
				be.indexerScores(scores, a, sp)
				p, err := be.StopProfile()
				if err != nil {
					t.Fatal(err)
				}
				kern := map[bool]string{true: "indexer_scores_r21", false: map[bool]string{true: "indexer_scores_r25", false: "indexer_scores"}[v.r25]}[r21]
				if p.Kernels[kern] == nil || len(p.Kernels) != 1 {
					t.Fatalf("%s (r21 %v, r25 %v, ipw %d): launched %v, not %s", name, r21, v.r25, v.ipw, slices.Collect(maps.Keys(p.Kernels)), kern)
				}
				got := make([]float32, T*maxE)
				if err := be.Read(got, scores); err != nil {
					t.Fatal(err)
				}
				for s := range T {
					if (int(pos[s])+1)/rate <= K {
						continue // not scored: indexer_fix takes every entry
					}
					for e := range maxE {
						g, x := got[s*maxE+e], want[s*maxE+e]
						if math.Float32bits(g) != math.Float32bits(x) {
							t.Fatalf("%s (r21 %v, r25 %v, ipw %d): token %d entry %d: score %v, reference %v", name, r21, v.r25, v.ipw, s, e, g, x)
						}
					}
				}
			}
			be.indexerR21, be.indexerR25, be.indexerIPW = false, false, 0
			// The top-k kernel then indexer_fix, or both in topk_sel; each
			// over topk_reg4 and (topkR26) topk. Sel and N start as garbage.
			for _, v := range []struct{ fix, r26 bool }{{false, false}, {true, false}, {true, true}, {false, true}} {
				be.topkFix, be.topkR26 = v.fix, v.r26
				be.Write(a.Sel, slices.Repeat([]int32{-7}, T*K))
				be.Write(a.N, slices.Repeat([]int32{-7}, T))
				be.IndexerSelect(a, sp)
				sel, cnt := make([]int32, T*K), make([]int32, T)
				if err := be.Read(sel, a.Sel); err != nil {
					t.Fatal(err)
				}
				if err := be.Read(cnt, a.N); err != nil {
					t.Fatal(err)
				}
				for s := range T {
					n := (int(pos[s]) + 1) / rate
					wantSel := make([]int32, K)
					if n > K {
						ref.TopK(wantSel, want[s*maxE:(s+1)*maxE], K)
					} else {
						for i := range wantSel {
							wantSel[i] = -1
							if i < n {
								wantSel[i] = int32(i)
							}
						}
					}
					if g := sel[s*K : (s+1)*K]; !slices.Equal(g, wantSel) {
						t.Fatalf("%s (topkFix %v, topkR26 %v): token %d (%d entries): selection %v, want %v", name, v.fix, v.r26, s, n, g, wantSel)
					}
					if wantN := int32(min(n, K)); cnt[s] != wantN {
						t.Fatalf("%s (topkFix %v, topkR26 %v): token %d: count %d, want %d", name, v.fix, v.r26, s, cnt[s], wantN)
					}
				}
			}
			be.topkFix, be.topkR26 = false, false
			be.ResetScratch(mark)
		}
	}
}
