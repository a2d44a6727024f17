package cuda

import (
	"fmt"
	"math/bits"

	"github.com/strata-inference/strata/compute"
)

// gemvpRing is one of gemvp.cu's entries: U chunks of each of 2 rows a
// step per lane, in a ring of S stages of shared memory.
type gemvpRing struct{ U, S int }

// gemvpRings are gemvp.cu's entries, in its order.
var gemvpRings = [2]gemvpRing{{2, 4}, {2, 3}}

// gemvpBlocksPerSM is the persistent grid's blocks a multiprocessor: what
// the entries' launch bounds promise (256 threads, at most 128 registers)
// and what gemvpMaxShared leaves room for.
const gemvpBlocksPerSM = 2

// gemvpMaxShared is the most dynamic shared memory a gemvp block takes:
// two blocks and their static arrays in an H100's or H200's 227 KB.
const gemvpMaxShared = 112 << 10

// gemvpShared is the dynamic shared memory of gemvp's entries of index ri
// (gemvpRings) for rows of K FP8 weights: the ring (S · U · 2 rows · 256
// threads · 16 bytes: 64 or 48 KB), then the activations (K/16 chunks of
// 20 floats).
func gemvpShared(ri, K int) int {
	r := gemvpRings[ri]
	return r.S*r.U*2*256*16 + K/16*20*4
}

func (r gemvpRing) name(split int) string {
	return fmt.Sprintf("gemvp_fp8_u%ds%d_s%d", r.U, r.S, split)
}

// gemvpIndex returns the index in gemvpRings of the entries gemvpV
// selects, -1 when gemvp is off.
func (k *Kernels) gemvpIndex() int {
	if k.gemvpV < 1 || k.gemvpV > len(gemvpRings) {
		return -1
	}
	return k.gemvpV - 1
}

// gemvpShifts returns fp8Shifts(w) and whether gemvp computes w: one
// token, FP8 rows that leave two blocks an SM their shared memory (K up
// to 9830: the Flash width's largest is 8192).
func gemvpShifts(T int, w *Matrix) (rs, cs int, ok bool) {
	if T != 1 || gemvpShared(0, w.Cols) > gemvpMaxShared {
		return 0, 0, false
	}
	return fp8Shifts(w)
}

// fp8Shifts returns log2 of w's scale block rows and of its columns in
// 16-byte chunks, and whether the ring kernels take w: FP8 with 16-byte
// rows and power-of-two scale blocks of 16 columns or more (the released
// checkpoints' 128x128).
func fp8Shifts(w *Matrix) (rs, cs int, ok bool) {
	if w.DType != compute.FP8 || !w.vec() {
		return 0, 0, false
	}
	br, bc := w.BlockRows, w.BlockCols
	if br <= 0 || bc < 16 || br&(br-1) != 0 || bc&(bc-1) != 0 {
		return 0, 0, false
	}
	return bits.TrailingZeros(uint(br)), bits.TrailingZeros(uint(bc / 16)), true
}

// gemvpMaxBlocksPerSM bounds gemvpOcc's blocks an SM: four blocks of 256
// threads at 64 registers fill an SM's 64K registers (the _g entries
// take 64, the plain ones 54).
const gemvpMaxBlocksPerSM = 4

// gemvpGrid is the persistent grid for n units (gemv2's blocks), each
// block taking shared bytes of dynamic shared memory: at most the blocks
// the device holds at once (gemvpBlocksPerSM an SM, or with gemvpOcc as
// many as the SM's shared memory holds, each with 2 KB beside its dynamic
// memory for the system's reserve and the static arrays).
func (k *Kernels) gemvpGrid(n, shared int) int {
	per := gemvpBlocksPerSM
	if k.gemvpOcc && k.sharedPerSM > 0 {
		per = max(per, min(gemvpMaxBlocksPerSM, k.sharedPerSM/(shared+2048)))
	}
	return max(1, min(n, per*max(k.sms, 1)))
}

// matMulGEMVP queues y = W·x for one token through gemvp at gemv2's split
// for the shape (gemv2's bits), and reports false when gemvp is off or
// does not take w (the caller then launches gemv2).
func (k *Kernels) matMulGEMVP(t *Thread, s Stream, y, x Ptr, T int, w *Matrix) (bool, error) {
	ui := k.gemvpIndex()
	if _, _, ok := gemvpShifts(T, w); ui < 0 || !ok {
		return false, nil
	}
	si, rowsPerBlock := gemv2Split(w.Rows, int(w.rowBytes()/16))
	return true, k.gemvpAt(t, s, y, 0, x, 0, w, 1, 0, ui, si, rowsPerBlock, 0)
}

// groupedGEMVP is groupedGEMVStrided for one token through gemvp's
// grouped entries, at the split groupedGEMVStrided takes (its bits); it
// reports false when gemvp does not take the product.
func (k *Kernels) groupedGEMVP(t *Thread, s Stream, y Ptr, ygs int, x Ptr, xgs, T int, w *Matrix, G int, tab Ptr, si, rowsPerBlock int) (bool, error) {
	ui := k.gemvpIndex()
	if _, _, ok := gemvpShifts(T, w); ui < 0 || !ok {
		return false, nil
	}
	return true, k.gemvpAt(t, s, y, ygs, x, xgs, w, G, tab, ui, si, rowsPerBlock, 0)
}

// chainGEMVP queues, for one token, u = the grouped product of x by the
// G matrices of tab (wa their first, as groupedGEMV) and y = wb·u in one
// launch of gemvp_fp8_u2s3_chain (ctr: its 4 counters, zeroed once; the
// launch leaves them zero), with the two launches' bits. It reports
// false, queuing nothing, where the two would not both take the split-1
// entries of gemvp's 3-stage ring.
func (k *Kernels) chainGEMVP(t *Thread, s Stream, y, u, x Ptr, wa *Matrix, G int, tab Ptr, wb *Matrix, ctr Ptr) (bool, error) {
	rsA, csA, okA := gemvpShifts(1, wa)
	rsB, csB, okB := gemvpShifts(1, wb)
	if k.gemvpChain == 0 || k.gemvpIndex() != 1 || !okA || !okB || k.groupedR5 || G < 2 || wb.Cols != G*wa.Rows {
		return false, nil
	}
	siA, rpbA := gemv2Split(G*wa.Rows, int(wa.rowBytes()/16))
	siB, rpbB := gemv2Split(wb.Rows, int(wb.rowBytes()/16))
	if siA != 0 || siB != 0 {
		return false, nil
	}
	unitsA, unitsB := (wa.Rows+rpbA-1)/rpbA, (wb.Rows+rpbB-1)/rpbB
	shared := max(gemvpShared(1, wa.Cols), gemvpShared(1, wb.Cols))
	// The blocks claim their units, so none waits for one that is not
	// resident; gemvpBlocksPerSM an SM as gemvp's own grids.
	grid := max(1, min(max(unitsA*G, unitsB), gemvpBlocksPerSM*max(k.sms, 1)))
	a := t.Args().Ptr(u).Int(wa.Rows).Ptr(x).Int(wa.Cols).Ptr(tab).Int(unitsA).Int(G).Int(wa.Rows).Int(wa.Cols).
		Int(rsA).Int(csA).Int(wa.scaleCols()).
		Ptr(y).Ptr(wb.Data).Ptr(wb.Scale).Int(unitsB).Int(wb.Rows).Int(wb.Cols).Int(rsB).Int(csB).Int(wb.scaleCols()).Ptr(ctr)
	return true, t.LaunchEarly(k.gemvpChain, Dim3{X: grid}, Dim3{X: 256}, shared, s, a)
}

// gemvpPFAll as Kernels.gemvpPF: every unit of a block asks the L2 for
// its rows before the block's wait.
const gemvpPFAll = 1 << 20

// gemvpAt queues gemvp's entries ui (gemvpRings) at split index si (rowsPerBlock rows a
// unit): the plain entry for tab 0, else the grouped one over the G
// matrices of tab (group g's input at x + g·xgs, its output at y + g·ygs);
// grid 0 takes gemvpGrid's (tests pass others: every grid gives the
// same bits).
func (k *Kernels) gemvpAt(t *Thread, s Stream, y Ptr, ygs int, x Ptr, xgs int, w *Matrix, G int, tab Ptr, ui, si, rowsPerBlock, grid int) error {
	rs, cs, ok := gemvpShifts(1, w)
	if !ok {
		return fmt.Errorf("cuda: gemvp of a %v %dx%d matrix (scale blocks %dx%d)", w.DType, w.Rows, w.Cols, w.BlockRows, w.BlockCols)
	}
	f, units := k.gemvp[ui][si], (w.Rows+rowsPerBlock-1)/rowsPerBlock
	a := t.Args().Ptr(y).Ptr(x).Ptr(w.Data).Ptr(w.Scale).Int(units)
	if tab != 0 {
		f = k.gemvpG[ui][si]
		a = t.Args().Ptr(y).Int(ygs).Ptr(x).Int(xgs).Ptr(tab).Int(units).Int(G)
	} else if G != 1 {
		return fmt.Errorf("cuda: gemvp of %d matrices without their table", G)
	}
	if f == 0 {
		return fmt.Errorf("cuda: kernel unavailable: %v", k.unavailable)
	}
	a = a.Int(w.Rows).Int(w.Cols).Int(rs).Int(cs).Int(w.scaleCols()).Int(k.gemvpPF)
	if grid <= 0 {
		grid = k.gemvpGrid(units*G, gemvpShared(ui, w.Cols))
	}
	return t.LaunchEarly(f, Dim3{X: grid}, Dim3{X: 256}, gemvpShared(ui, w.Cols), s, a)
}

// gemvxpShared is gemvxp_fp8's dynamic shared memory: a ring of 4 stages
// of 4 rows' 16-byte chunks for 256 threads.
const gemvxpShared = 4 * 4 * 256 * 16

// gemvxpAt queues gemvxp_fp8 (gemvx's FP8 product of T ≤ 8 tokens with its
// loads in a ring, the same bits) with gemvx's arguments; grid 0 takes
// gemvpBlocksPerSM blocks an SM (tests pass others: every grid gives the
// same bits).
func (k *Kernels) gemvxpAt(t *Thread, s Stream, y Ptr, ldy, ygs int, x Ptr, ldx, xgs, T int, w *Matrix, G int, tab Ptr, grid int) error {
	rs, cs, ok := fp8Shifts(w)
	if !ok || T < 1 || T > 8 || w.Cols%64 != 0 {
		return fmt.Errorf("cuda: gemvxp of %d tokens of a %v %dx%d matrix (scale blocks %dx%d)", T, w.DType, w.Rows, w.Cols, w.BlockRows, w.BlockCols)
	}
	f := k.fns["gemvxp_fp8"]
	if f == 0 {
		return fmt.Errorf("cuda: kernel unavailable: %v", k.unavailable)
	}
	var data, scale Ptr
	if tab == 0 {
		data, scale = w.Data, w.Scale
	}
	units := (w.Rows + 31) / 32
	a := t.Args().Ptr(y).Int(ldy).Int(ygs).Ptr(x).Int(ldx).Int(xgs).Ptr(data).Ptr(scale).Ptr(tab).Int(units).Int(G).
		Int(w.Rows).Int(w.Cols).Int(T).Int(rs).Int(cs).Int(w.scaleCols()).Int(map[bool]int{true: 1}[w.NaNFree])
	if grid <= 0 {
		grid = max(1, min(units*G, gemvpBlocksPerSM*max(k.sms, 1)))
	}
	return t.Launch(f, Dim3{X: grid}, Dim3{X: 256}, gemvxpShared, s, a)
}
