package cuda

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// gemvhStages are gemvh.cu's ring depths, in the order of Kernels.gemvh.
var gemvhStages = [2]int{3, 4}

// gemvhMaxShared is the most dynamic shared memory a gemvh block takes:
// two blocks an SM, as gemvp.
const gemvhMaxShared = gemvpMaxShared

// gemvhShared is the dynamic shared memory of gemvh's entries of S stages
// for rows of K FP8 weights: the ring (S · 4 chunks · 256 threads · 16
// bytes), the activations' 33 units of 16 bytes a 128-column block and
// one zero unit, then a float a block.
func gemvhShared(S, K int) int {
	nkb := K / 128
	return S*4*256*16 + (nkb*33+1)*16 + 4*nkb
}

// gemvhName is the entry of S stages and split sp (1, 2, 4, 8).
func gemvhName(S, sp int) string { return fmt.Sprintf("gemvh_fp8_s%d_p%d", S, sp) }

// gemvhFits reports whether gemvh takes the one-token product of w: FP8
// rows of whole 128-column blocks, scale blocks of a power of two of at
// least 16 rows and of 128 columns or a power-of-two multiple (each
// 16-row tile and 128-column block under one scale), two blocks' shared
// memory an SM, and the kernels loaded.
func (k *Kernels) gemvhFits(w *Matrix) bool {
	if w.DType != compute.FP8 || w.Cols%128 != 0 || w.Cols == 0 || !k.tensorCores || k.gemvh[k.gemvhS][0] == 0 {
		return false
	}
	br, bc := w.BlockRows, w.BlockCols
	if br < 16 || br&(br-1) != 0 || bc < 128 || bc&(bc-1) != 0 {
		return false
	}
	return gemvhShared(gemvhStages[k.gemvhS], w.Cols) <= gemvhMaxShared
}

// gemvhSplit is the split gemvh takes for G matrices of R rows of K
// columns: the fewest warps a tile (1, 2, 4 or 8; at most the 128-column
// blocks of a row) whose units (8/split tiles of 16 rows) fill 7/8 of the
// persistent grid (run 17: wq_b's 256 units of split 1 on 264 blocks in
// 10.8 us, its 512 of split 2 in 11.1). It depends on the shape and the
// device alone, and so does every sum.
func (k *Kernels) gemvhSplit(G, R, K int) (si int) {
	tiles := (R + 15) / 16
	grid := gemvpBlocksPerSM * max(k.sms, 1)
	nkb := K / 128
	for si = 0; si < 3; si++ {
		sp := 1 << si
		if 2*sp > nkb || G*tiles*sp >= 7*grid { // units = G·tiles·sp/8 >= 7/8 of the grid
			break
		}
	}
	return si
}

// gemvhAt queues gemvh's product of one token (Fast numerics, gemvh.cu):
// y = W·x for tab 0, else y + g·ygs = W_g·(x + g·xgs) for the G matrices of
// tab, all of w's shape; split index si < 0 takes gemvhSplit's; grid 0
// the persistent grid (tests pass others: every grid and ring depth give
// the same bits at a split).
func (k *Kernels) gemvhAt(t *Thread, s Stream, y Ptr, ygs int, x Ptr, xgs int, w *Matrix, G int, tab Ptr, si, grid int) error {
	if !k.gemvhFits(w) {
		return fmt.Errorf("cuda: gemvh of a %v %dx%d matrix (scale blocks %dx%d)", w.DType, w.Rows, w.Cols, w.BlockRows, w.BlockCols)
	}
	rs, cs, _ := fp8Shifts(w)
	if si < 0 {
		si = k.gemvhSplit(G, w.Rows, w.Cols)
	}
	tilesPerUnit := 8 >> si
	units := ((w.Rows+15)/16 + tilesPerUnit - 1) / tilesPerUnit
	f := k.gemvh[k.gemvhS][si]
	a := t.Args().Ptr(y).Ptr(x).Ptr(w.Data).Ptr(w.Scale).Int(units)
	if tab != 0 {
		f = k.gemvhG[k.gemvhS][si]
		a = t.Args().Ptr(y).Int(ygs).Ptr(x).Int(xgs).Ptr(tab).Int(units).Int(G)
	} else if G != 1 {
		return fmt.Errorf("cuda: gemvh of %d matrices without their table", G)
	}
	if f == 0 {
		return fmt.Errorf("cuda: kernel unavailable: %v", k.unavailable)
	}
	a = a.Int(w.Rows).Int(w.Cols).Int(rs).Int(cs).Int(w.scaleCols())
	if grid <= 0 {
		grid = k.gemvpGrid(units*G, gemvhShared(gemvhStages[k.gemvhS], w.Cols))
	}
	return t.LaunchEarly(f, Dim3{X: grid}, Dim3{X: 256}, gemvhShared(gemvhStages[k.gemvhS], w.Cols), s, a)
}
