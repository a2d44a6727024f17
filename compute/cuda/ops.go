package cuda

import (
	"cmp"
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// The Linear and Mixing ops of Backend. Each checks its shapes (a mismatch
// is a caller's bug: it panics, as the CPU backend does) and records its
// launches.

const opThreads = 256

func blocks(n, per int) int { return (n + per - 1) / per }

func checkShape(op string, t compute.Tensor, rows, cols int) {
	if t.Rows != rows || t.Cols != cols {
		panic(fmt.Sprintf("cuda: %s: tensor is %d×%d, want %d×%d", op, t.Rows, t.Cols, rows, cols))
	}
}

// launch records kernel name with a's parameters.
func (b *Backend) launch(name string, grid, block Dim3, shared int, a *Args) {
	b.launchAs(name, grid, block, shared, a, false)
}

// launchAs is launch, through Thread.LaunchEarly when early (a kernel that
// reads only weights before its PDL_WAIT_LATE).
func (b *Backend) launchAs(name string, grid, block Dim3, shared int, a *Args, early bool) {
	f := b.k.fns[name]
	if f == 0 {
		b.fail(fmt.Errorf("cuda: kernel %s unavailable: %v", name, b.k.unavailable))
		return
	}
	if early {
		b.fail(b.rt.LaunchEarly(f, grid, block, shared, 0, a))
		return
	}
	b.fail(b.rt.Launch(f, grid, block, shared, 0, a))
}

// args returns the recorder's emptied parameter block.
func (b *Backend) args() *Args { return b.rt.Args() }

// MatMul implements compute.Linear.
func (b *Backend) MatMul(y, x compute.Tensor, w *compute.Matrix) {
	b.matMul(y, x, w, b.mode)
}

func (b *Backend) matMul(y, x compute.Tensor, w *compute.Matrix, mode Mode) {
	if x.Cols != w.Cols || y.Cols != w.Rows || y.Rows != x.Rows {
		panic(fmt.Sprintf("cuda: MatMul of x %d×%d by W %d×%d into y %d×%d", x.Rows, x.Cols, w.Rows, w.Cols, y.Rows, y.Cols))
	}
	m := b.mustMat(w)
	T := x.Rows
	if b.useGEMVX(m, T, mode) {
		b.fail(b.gemvx(b.ptr(y), w.Rows, 0, b.ptr(x), x.Cols, 0, T, m, 1, 0))
		return
	}
	if mode != Fast || T <= b.k.gemvMaxT || !bf16Exact(m.DType) || !b.k.tensorCores {
		b.fail(b.k.MatMul(b.rt, 0, b.ptr(y), b.ptr(x), T, m, Strict))
		return
	}
	if !b.gemmR8 && b.k.gemmxFits(m) && x.Cols%8 == 0 {
		b.matMulX(b.ptr(y), w.Rows, 0, b.ptr(x), x.Cols, 0, T, m, 1, 0)
		return
	}
	// Fast, run 8's way: x = hi + lo, both bf16-exact, each through the
	// tensor cores (gemm.cu), the two products added in float32.
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	hi, lo := b.Scratch(compute.F32, T, x.Cols), b.Scratch(compute.F32, T, x.Cols)
	part := b.Scratch(compute.F32, T, w.Rows)
	n := T * x.Cols
	b.launch("split_bf16", Dim3{X: blocks(n, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(hi)).Ptr(b.ptr(lo)).Ptr(b.ptr(x)).Int(n))
	b.fail(b.k.MatMul(b.rt, 0, b.ptr(part), b.ptr(hi), T, m, Fast))
	b.fail(b.k.MatMul(b.rt, 0, b.ptr(y), b.ptr(lo), T, m, Fast))
	b.AddRepeated(y, part, 1)
}

// matMulX records gemmx's product (Kernels.matMulX) of G matrices of m's
// shape (tab, or m alone) on x (T rows of ldx floats), x split once by
// split_bf16x into scratch: when a tile of tokens leaves the device short
// of blocks, the parts of K run in separate blocks through a scratch
// buffer (the same bits as one block running them all).
func (b *Backend) matMulX(y Ptr, ldy, ygs int, x Ptr, ldx, xgs, T int, m *Matrix, G int, tab Ptr) {
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	xh, xl := b.splitX(x, T*ldx)
	b.matMulXSplit(y, ldy, ygs, xh, xl, ldx, xgs, T, m, G, tab)
}

// matMulXSplit is matMulX on x already split (splitX).
func (b *Backend) matMulXSplit(y Ptr, ldy, ygs int, xh, xl Ptr, ldx, xgs, T int, m *Matrix, G int, tab Ptr) {
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	var part Ptr
	if S := gemmxPartsApart(G*blocks(m.Rows, gemmxRows), m.Cols, T); S > 0 {
		part = b.ptr(b.Scratch(compute.F32, G*S*T, m.Rows))
	}
	b.fail(b.k.matMulX(b.rt, 0, y, ldy, ygs, xh, xl, ldx, xgs, T, m, G, tab, part))
}

// splitX records split_bf16x of the n floats at x into scratch (the
// caller's mark releases it): hi and lo, n bfloat16s each, 16-byte aligned.
func (b *Backend) splitX(x Ptr, n int) (xh, xl Ptr) {
	half := (2*n + 255) &^ 255 // bytes of hi, rounded up so that lo stays aligned
	xs := b.ptr(b.Scratch(compute.F32, 1, half/2))
	xh, xl = xs, xs.Add(int64(half))
	b.fail(b.k.splitX(b.rt, 0, xh, xl, x, n))
	return xh, xl
}

// useGEMVX reports whether a product of T tokens by m takes the Fast
// products of few tokens (Backend.gemvx): Fast mode and either gemvx
// (GEMVXMinT to FastGEMVMaxT, at most 8, tokens, an FP8 or BF16 matrix
// gemvx fits) or gemvh (one token, an FP8 matrix gemvh fits).
func (b *Backend) useGEMVX(m *Matrix, T int, mode Mode) bool {
	if mode == Fast && T == 1 && b.useGEMVH(m) {
		return true
	}
	return mode == Fast && !b.gemvxOff && T >= b.k.gemvxMinT && T <= min(b.k.gemvMaxT, 8) && b.k.gemvxFits(m) &&
		!(b.gemvxNoBF16 && m.DType == compute.BF16)
}

// useGEMVH reports whether gemvh takes Fast products of one token by m.
func (b *Backend) useGEMVH(m *Matrix) bool { return b.gemvh && b.k.gemvhFits(m) }

// gemvx records the Fast product of T ≤ 8 tokens that useGEMVX chose, with
// Kernels.gemvx's arguments: gemvh's at one token where it takes m, else
// gemvx's.
func (b *Backend) gemvx(y Ptr, ldy, ygs int, x Ptr, ldx, xgs, T int, m *Matrix, G int, tab Ptr) error {
	if T == 1 && b.useGEMVH(m) {
		if G*((m.Rows+15)/16) < b.gemvhMinTiles {
			// Too few tiles of 16 rows to fill the device: the float32
			// GEMV's rows of 2 (gemvp).
			if tab == 0 {
				return b.k.matMulGEMV(b.rt, 0, y, x, 1, m)
			}
			return b.k.groupedGEMVStrided(b.rt, 0, y, ldy, ygs, x, ldx, xgs, 1, m, G, tab)
		}
		b.gemvhLaunches++
		return b.k.gemvhAt(b.rt, 0, y, ygs, x, xgs, m, G, tab, -1, 0)
	}
	return b.k.gemvx(b.rt, 0, y, ldy, ygs, x, ldx, xgs, T, m, G, tab)
}

// bf16Exact reports whether every weight of a format is a bfloat16 value
// (the fast products take the tensor cores only for those: F32 and F16
// weights would be rounded).
func bf16Exact(dt compute.DType) bool {
	return dt == compute.BF16 || dt == compute.FP8 || dt == compute.FP4
}

// copyCols records dst[r][:cols] = src[r][:cols] for rows rows of the given
// row strides (in floats).
func (b *Backend) copyCols(dst Ptr, ldd int, src Ptr, lds int, rows, cols int) {
	if rows == 0 || cols == 0 {
		return
	}
	b.launch("copy_cols", Dim3{X: rows, Y: blocks(cols, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(dst).Int(ldd).Ptr(src).Int(lds).Int(cols))
}

// GroupedMatMul implements compute.Linear: in one launch of gemv2.cu's
// grouped entries (strided inputs and outputs, each group reduced as
// MatMul reduces it) where the float32 kernel runs and the matrices share
// a shape and format that allows 16-byte loads; else each group's inputs
// are copied out, multiplied, and copied into place, as on the CPU.
func (b *Backend) GroupedMatMul(y, x compute.Tensor, ws []*compute.Matrix) {
	G, T := len(ws), x.Rows
	R, n := ws[0].Rows, ws[0].Cols
	checkShape("GroupedMatMul x", x, T, G*n)
	checkShape("GroupedMatMul y", y, T, G*R)
	if G == 1 {
		b.MatMul(y, x, ws[0])
		return
	}
	if tab, w0, ok := b.groupTable(ws); ok && b.useGEMVX(w0, T, b.mode) {
		b.fail(b.gemvx(b.ptr(y), G*R, R, b.ptr(x), G*n, n, T, w0, G, tab))
		return
	}
	if tab, w0, ok := b.groupTable(ws); ok && (b.mode == Strict || T <= b.k.gemvMaxT || !bf16Exact(w0.DType) || !b.k.tensorCores) {
		b.fail(b.k.groupedGEMV(b.rt, 0, b.ptr(y), b.ptr(x), T, w0, G, tab))
		return
	}
	if tab, w0, ok := b.groupTable(ws); ok && !b.gemmR8 && b.k.gemmxFits(w0) && n%8 == 0 {
		// Fast above FastGEMVMaxT: gemmx reads the groups in place.
		b.matMulX(b.ptr(y), G*R, R, b.ptr(x), G*n, n, T, w0, G, tab)
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	xg, yg := b.Scratch(compute.F32, T, n), b.Scratch(compute.F32, T, R)
	px, py := b.ptr(x), b.ptr(y)
	for g, w := range ws {
		b.copyCols(b.ptr(xg), n, px.Add(int64(4*g*n)), G*n, T, n)
		b.MatMul(yg, xg, w)
		b.copyCols(py.Add(int64(4*g*R)), G*R, b.ptr(yg), R, T, R)
	}
}

// GroupedMatMulThen implements compute.ChainedLinear: with gemvpChainOn,
// one token's two products in one launch where gemvp takes both
// (chainGEMVP: the same bits), else GroupedMatMul then MatMul.
func (b *Backend) GroupedMatMulThen(y, u, x compute.Tensor, ws []*compute.Matrix, w *compute.Matrix) {
	G, T := len(ws), x.Rows
	checkShape("GroupedMatMulThen x", x, T, G*ws[0].Cols)
	checkShape("GroupedMatMulThen u", u, T, G*ws[0].Rows)
	checkShape("GroupedMatMulThen y", y, T, w.Rows)
	if b.gemvpChainOn && T == 1 && G > 1 && w.Cols == u.Cols {
		if tab, w0, ok := b.groupTable(ws); ok {
			wb := b.mustMat(w)
			if !b.useGEMVX(w0, T, b.mode) && !b.useGEMVX(wb, T, b.mode) {
				if ctr := b.counters(&b.chainCtr, 4, "gemvp_fp8_u2s3_chain"); ctr != 0 {
					ok, err := b.k.chainGEMVP(b.rt, 0, b.ptr(y), b.ptr(u), b.ptr(x), w0, G, tab, wb, ctr)
					b.fail(err)
					if ok || err != nil {
						b.chainLaunches++
						return
					}
				}
			}
		}
	}
	b.GroupedMatMul(u, x, ws)
	b.MatMul(y, u, w)
}

// groupTable returns (building once) the device table of the matrices'
// [data, scale] pointers and the first one's device copy, if they share a
// shape and format that gemv2 reads with 16-byte loads.
func (b *Backend) groupTable(ws []*compute.Matrix) (Ptr, *Matrix, bool) {
	if gt, ok := b.groupTabs[ws[0]]; ok {
		return gt.tab, gt.w0, gt.tab != 0
	}
	w0 := b.mustMat(ws[0])
	host := make([]uint64, 2*len(ws))
	ok := w0.vec()
	for g, w := range ws {
		m := b.mustMat(w)
		if m.DType != w0.DType || m.Rows != w0.Rows || m.Cols != w0.Cols || m.BlockRows != w0.BlockRows || m.BlockCols != w0.BlockCols {
			ok = false
		}
		host[2*g], host[2*g+1] = uint64(m.Data), uint64(m.Scale)
	}
	gt := groupTab{w0: w0}
	if ok {
		err := b.do(func(t *Thread) error {
			p, err := t.Alloc(int64(8 * len(host)))
			if err != nil {
				return err
			}
			gt.tab = p
			return t.CopyToDevice(p, Bytes(host), t.Stream())
		})
		if err != nil {
			panic(fmt.Sprintf("cuda: grouped matrix table: %v", err))
		}
	}
	b.groupTabs[ws[0]] = gt
	return gt.tab, w0, gt.tab != 0
}

// groupTab is a GroupedMatMul's device table (0 when the float32 grouped
// kernel does not take its matrices).
type groupTab struct {
	tab Ptr
	w0  *Matrix
}

// gemvmMax is the most products one gemvm launch takes.
const gemvmMax = 4

// MatMuls implements compute.MultiMatMul: ys[i] = ws[i]·x. Products of the
// same format, width, scale blocks and GEMV split go up to gemvmMax a
// launch (gemvm_*: each block computes as the product's own launch
// would, the same bits); the rest as MatMul.
func (b *Backend) MatMuls(ys []compute.Tensor, x compute.Tensor, ws []*compute.Matrix) {
	if len(ys) != len(ws) {
		panic(fmt.Sprintf("cuda: MatMuls of %d outputs for %d matrices", len(ys), len(ws)))
	}
	T := x.Rows
	if b.mode == Fast && T > b.k.gemvMaxT && !b.gemmR8 && !b.unmulti && x.Cols%8 == 0 && b.allGemmx(ws) {
		// gemmx for every product: x split once for all of them (the
		// same bits as a MatMul each, which splits it each time).
		mark := b.ScratchMark()
		defer b.ResetScratch(mark)
		xh, xl := b.splitX(b.ptr(x), T*x.Cols)
		for i, w := range ws {
			if x.Cols != w.Cols || ys[i].Cols != w.Rows || ys[i].Rows != T {
				panic(fmt.Sprintf("cuda: MatMuls of x %d×%d by W %d×%d into y %d×%d", T, x.Cols, w.Rows, w.Cols, ys[i].Rows, ys[i].Cols))
			}
			b.matMulXSplit(b.ptr(ys[i]), w.Rows, 0, xh, xl, x.Cols, 0, T, b.mustMat(w), 1, 0)
		}
		return
	}
	var done uint64
	for i := range ws {
		if done&(1<<i) != 0 {
			continue
		}
		done |= 1 << i
		g, si, ok := b.multiKey(ws[i], T)
		if !ok || b.unmulti || i >= 64 || b.useGEMVX(b.mustMat(ws[i]), T, b.mode) {
			// gemvx's products a launch each: MatMul's bits.
			b.MatMul(ys[i], x, ws[i])
			continue
		}
		m0 := b.mustMat(ws[i])
		grp := [gemvmMax]int{i}
		n := 1
		for j := i + 1; j < len(ws) && j < 64 && n < gemvmMax; j++ {
			if done&(1<<j) != 0 {
				continue
			}
			if _, sj, okj := b.multiKey(ws[j], T); okj && sj == si && !b.useGEMVX(b.mustMat(ws[j]), T, b.mode) {
				mj := b.mustMat(ws[j])
				if mj.DType == m0.DType && mj.Cols == m0.Cols && mj.BlockRows == m0.BlockRows && mj.BlockCols == m0.BlockCols {
					grp[n] = j
					n++
					done |= 1 << j
				}
			}
		}
		if n == 1 {
			b.MatMul(ys[i], x, ws[i])
			continue
		}
		rowsPerWarp := 2
		if g == 3 {
			rowsPerWarp = 4 // gemv5's rows
		}
		rowsPerBlock := (8 >> si) * rowsPerWarp
		a := b.args().Ptr(b.ptr(x)).Int(m0.Cols).Int(T).Int(max(m0.BlockRows, 1)).Int(max(m0.BlockCols, 1)).Int(m0.scaleCols())
		var starts [gemvmMax + 1]int
		for k := range gemvmMax {
			if k < n {
				w := ws[grp[k]]
				y := ys[grp[k]]
				if x.Cols != w.Cols || y.Cols != w.Rows || y.Rows != T {
					panic(fmt.Sprintf("cuda: MatMuls of x %d×%d by W %d×%d into y %d×%d", x.Rows, x.Cols, w.Rows, w.Cols, y.Rows, y.Cols))
				}
				m := b.mustMat(w)
				a.Ptr(b.ptr(y)).Ptr(m.Data).Ptr(m.Scale).Int(m.Rows)
				starts[k+1] = starts[k] + blocks(m.Rows, rowsPerBlock)
			} else {
				a.Ptr(0).Ptr(0).Ptr(0).Int(0)
				starts[k+1] = starts[k]
			}
		}
		for k := 1; k < gemvmMax; k++ {
			if k < n {
				a.Int(starts[k])
			} else {
				a.Int(1 << 30)
			}
		}
		name := fmt.Sprintf("gemvm_%s_t%d_s%d", dtypeNames[m0.DType], 1<<g, 1<<si)
		b.launch(name, Dim3{X: starts[n]}, Dim3{X: opThreads}, 0, a)
	}
}

// allGemmx reports whether gemmx takes the products of every matrix of ws.
func (b *Backend) allGemmx(ws []*compute.Matrix) bool {
	for _, w := range ws {
		if !b.k.gemmxFits(b.mustMat(w)) {
			return false
		}
	}
	return true
}

// multiKey says whether MatMul would run w over T tokens through gemv2 (T
// < 8) or gemv5 (T >= 8) in float32, and then its token group and split.
func (b *Backend) multiKey(w *compute.Matrix, T int) (g, si int, ok bool) {
	m := b.mustMat(w)
	if T == 0 || (m.DType != compute.BF16 && m.DType != compute.FP8) || !m.vec() || m.Rows <= 0 {
		return 0, 0, false
	}
	if b.mode == Fast && T > b.k.gemvMaxT {
		return 0, 0, false
	}
	g = gemv2Group(T)
	if g == 3 && !b.k.t8R4 {
		return 0, 0, false
	}
	if checkMatMul(T, m) != nil {
		return 0, 0, false
	}
	si, _ = gemv2Split(m.Rows, int(m.rowBytes()/16))
	return g, si, true
}

// RMSNorm implements compute.Linear.
func (b *Backend) RMSNorm(y, x, w compute.Tensor, eps float32) {
	checkShape("RMSNorm y", y, x.Rows, x.Cols)
	if w.Valid() && w.Len() != x.Cols {
		panic(fmt.Sprintf("cuda: RMSNorm weight of %d for rows of %d", w.Len(), x.Cols))
	}
	b.fail(b.k.RMSNorm(b.rt, 0, b.ptr(y), b.ptr(x), b.ptr(w), x.Rows, x.Cols, eps))
}

// rmsRegs is rows.cu's RMS_REGS: rmsnorm_rope's rows are at most
// rmsRegs·opThreads wide.
const rmsRegs = 16

// RMSNormRoPE implements compute.NormedRoPE: rmsnorm_rope (RMSNorm's and
// RoPE's operations in one launch, the same bits) for rows of up to
// rmsRegs·opThreads values and up to opThreads pairs, unless
// Backend.normRoPEOff; else the two ops.
func (b *Backend) RMSNormRoPE(x, w compute.Tensor, eps float32, pos compute.Tensor, heads int, invFreq compute.Tensor) {
	nf := invFreq.Len()
	if b.normRoPEOff || x.Cols > rmsRegs*opThreads || nf > opThreads || nf == 0 || x.Rows == 0 {
		b.RMSNorm(x, x, w, eps)
		b.RoPE(x, pos, heads, invFreq, false)
		return
	}
	if w.Valid() && w.Len() != x.Cols {
		panic(fmt.Sprintf("cuda: RMSNormRoPE weight of %d for rows of %d", w.Len(), x.Cols))
	}
	if heads <= 0 || pos.Len()*heads < x.Rows {
		panic(fmt.Sprintf("cuda: RMSNormRoPE has %d positions of %d heads for %d rows", pos.Len(), heads, x.Rows))
	}
	if 2*nf > x.Cols {
		panic(fmt.Sprintf("cuda: RMSNormRoPE rotates %d channels of rows of width %d", 2*nf, x.Cols))
	}
	b.launch("rmsnorm_rope", Dim3{X: x.Rows}, Dim3{X: opThreads}, 8*nf,
		b.args().Ptr(b.ptr(x)).Ptr(b.ptr(x)).Ptr(b.ptr(w)).Int(x.Cols).F32(eps).Ptr(b.ptr(pos)).Int(heads).Ptr(b.ptr(invFreq)).Int(nf))
}

// RoPE implements compute.Linear.
func (b *Backend) RoPE(x, pos compute.Tensor, heads int, invFreq compute.Tensor, inverse bool) {
	nf := invFreq.Len()
	if heads <= 0 || pos.Len()*heads < x.Rows {
		panic(fmt.Sprintf("cuda: RoPE has %d positions of %d heads for %d rows", pos.Len(), heads, x.Rows))
	}
	if 2*nf > x.Cols {
		panic(fmt.Sprintf("cuda: RoPE rotates %d channels of rows of width %d", 2*nf, x.Cols))
	}
	if x.Rows == 0 || nf == 0 {
		return
	}
	inv := 0
	if inverse {
		inv = 1
	}
	b.launch("rope_heads", Dim3{X: x.Rows, Y: blocks(nf, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(x)).Int(x.Cols).Ptr(b.ptr(pos)).Int(heads).Ptr(b.ptr(invFreq)).Int(nf).Int(inv))
}

var embedKernels = [5]string{"embed_f32", "embed_bf16", "embed_f16", "embed_fp8", "embed_fp4"}

// Embed implements compute.Linear. A token outside the table gives NaNs
// (the CPU panics).
func (b *Backend) Embed(h compute.Tensor, table *compute.Matrix, tokens compute.Tensor, copies int) {
	D, T := table.Cols, tokens.Len()
	checkShape("Embed h", h, T, copies*D)
	if T == 0 {
		return
	}
	m := b.mustMat(table)
	b.launch(embedKernels[m.DType], Dim3{X: T, Y: blocks(D, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(h)).Ptr(m.Data).Ptr(m.Scale).Ptr(b.ptr(tokens)).Int(m.Rows).Int(D).Int(copies).
			Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()))
}

// GatherRows implements compute.Linear.
func (b *Backend) GatherRows(dst, src, rows compute.Tensor) {
	checkShape("GatherRows dst", dst, rows.Len(), src.Cols)
	b.fail(b.k.Gather(b.rt, 0, b.ptr(dst), b.ptr(src), src.Rows, src.Cols, b.ptr(rows), rows.Len()))
}

// AddRepeated implements compute.Linear.
func (b *Backend) AddRepeated(h, e compute.Tensor, n int) {
	if e.Cols != h.Cols || e.Rows*n != h.Rows {
		panic(fmt.Sprintf("cuda: AddRepeated of %d×%d, %d times, into %d×%d", e.Rows, e.Cols, n, h.Rows, h.Cols))
	}
	if h.Rows == 0 {
		return
	}
	b.launch("add_repeated", Dim3{X: h.Rows, Y: blocks(h.Cols, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(h)).Ptr(b.ptr(e)).Int(h.Cols).Int(n))
}

// hcMax is the most streams the mixing kernels take (HC_MAX).
const hcMax = 16

// HCPre implements compute.Mixing: the streams' RMS norm and mix products
// are the regular kernels (the mix always in float32: the Sinkhorn weights
// are sensitive), the rest one block per token.
func (b *Backend) HCPre(x, post, comb, h compute.Tensor, w *compute.HC, p compute.HCParams) {
	hc, D, T := p.HC, p.D, h.Rows
	nMix := (2 + hc) * hc
	checkShape("HCPre h", h, T, hc*D)
	checkShape("HCPre x", x, T, D)
	checkShape("HCPre post", post, T, hc)
	checkShape("HCPre comb", comb, T, hc*hc)
	if hc > hcMax {
		panic(fmt.Sprintf("cuda: HCPre of %d streams (at most %d)", hc, hcMax))
	}
	if T == 0 {
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	if part, S, ok := b.hcMix(h, w.Fn, nMix, hc, D); ok {
		// Column slices of at least opThreads: enough blocks at small T
		// (each recomputes the token's small algebra; no value depends on
		// the split).
		Y := min(blocks(D, opThreads), max(1, blocks(hcPreBlocks, T)))
		cw := blocks(D, Y)
		b.launch("hc_pre_split", Dim3{X: T, Y: blocks(D, cw)}, Dim3{X: opThreads}, 0,
			b.args().Ptr(b.ptr(x)).Ptr(b.ptr(post)).Ptr(b.ptr(comb)).Ptr(b.ptr(h)).Ptr(part).Int(S).Int(hc*D).F32(p.NormEps).
				Ptr(b.ptr(w.Base)).Ptr(b.ptr(w.Scale)).Int(hc).Int(D).F32(p.Eps).Int(p.SinkhornIters).Int(cw))
		return
	}
	flat := b.Scratch(compute.F32, T, hc*D)
	b.RMSNorm(flat, h, compute.Tensor{}, p.NormEps)
	mix := b.Scratch(compute.F32, T, nMix)
	b.matMul(mix, flat, w.Fn, Strict)
	b.launch("hc_pre_finish", Dim3{X: T}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(x)).Ptr(b.ptr(post)).Ptr(b.ptr(comb)).Ptr(b.ptr(h)).Ptr(b.ptr(mix)).
			Ptr(b.ptr(w.Base)).Ptr(b.ptr(w.Scale)).Int(hc).Int(D).F32(p.Eps).Int(p.SinkhornIters))
}

// hcMixSeg is the most elements of the streams one block of
// hc_mix_partial sums, one a thread (run 3 had 1024: 16 blocks at T = 1
// on the Flash width, 19 us a launch): the columns [s·w, (s+1)·w) of every
// stream, w = hcMixSeg/hc (hcMixCols).
const hcMixSeg = opThreads

// hcMixCols returns the columns w of a segment of hc streams and the
// segments S of D columns.
func hcMixCols(hc, D int) (w, S int) {
	w = max(1, hcMixSeg/max(hc, 1))
	return w, blocks(D, w)
}

// hcPreBlocks is the fewest blocks hc_pre_split is given (while the
// column slices stay at least opThreads wide).
const hcPreBlocks = 128

// hcMix records hc_mix_partial for a float32 fn of nMix rows (at most
// HC_MIX_MAX) over rows of hc·D: the partial sums (scratch of the caller's
// mark) and their segment count; ok is false for other fns (the caller
// then normalizes and multiplies as the CPU does).
func (b *Backend) hcMix(h compute.Tensor, fn *compute.Matrix, nMix, hc, D int) (part Ptr, S int, ok bool) {
	m := b.mustMat(fn)
	if m.DType != compute.F32 || m.Rows != nMix || m.Cols != hc*D || nMix > (2+hcMax)*hcMax {
		return 0, 0, false
	}
	T := h.Rows
	w, S := hcMixCols(hc, D)
	pt := b.Scratch(compute.F32, T*S, nMix+1)
	b.launch("hc_mix_partial", Dim3{X: T, Y: S}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(pt)).Ptr(b.ptr(h)).Ptr(m.Data).Int(nMix).Int(hc).Int(D).Int(w))
	return b.ptr(pt), S, true
}

// HCPost implements compute.Mixing.
func (b *Backend) HCPost(h, y, post, comb compute.Tensor, p compute.HCParams) {
	hc, D, T := p.HC, p.D, h.Rows
	checkShape("HCPost h", h, T, hc*D)
	checkShape("HCPost y", y, T, D)
	if hc > hcMax {
		panic(fmt.Sprintf("cuda: HCPost of %d streams (at most %d)", hc, hcMax))
	}
	if T == 0 {
		return
	}
	b.launch("hc_post", Dim3{X: T, Y: blocks(D, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(h)).Ptr(b.ptr(y)).Ptr(b.ptr(post)).Ptr(b.ptr(comb)).Int(hc).Int(D))
}

// hcFusedMaxT bounds the tokens hc_post_pre takes (its counters, one a
// token; larger batches take the three ops, the same bits).
const hcFusedMaxT = 256

// Limits of hc_post_pre (model.cu): HC_FUSED streams, HC_STAGE partial
// sums, RMS_REGS·MT columns.
const (
	hcFused       = 4
	hcStage       = 4096
	hcFusedMaxCol = 16 * opThreads
)

// HCPostPreNorm implements compute.FusedMixing: hc_post_pre, one launch,
// where its limits allow (the streams' float32 mix, at most hcFused
// streams of hcFusedMaxCol columns, hcFusedMaxT tokens and fewer than the
// kernel's resident blocks, Backend.hcSlots; not Backend.hcFusedOff),
// else the three ops.
func (b *Backend) HCPostPreNorm(h, y, postIn, combIn, x, post, comb compute.Tensor, w *compute.HC, p compute.HCParams, norm compute.Tensor, eps float32) {
	hc, D, T := p.HC, p.D, h.Rows
	nMix := (2 + hc) * hc
	wc, S := hcMixCols(hc, D)
	m := b.mustMat(w.Fn)
	name, slots := "hc_post_pre", b.hcSlots
	if minT := cmp.Or(b.hcO4MinT, hcO4MinT); T >= minT && !b.hcO2 && T < b.hcSlotsO4 {
		name, slots = "hc_post_pre_o4", b.hcSlotsO4
	}
	if b.hcFusedOff || T == 0 || T > hcFusedMaxT || T >= slots || hc > hcFused || D > hcFusedMaxCol || S*(nMix+1) > hcStage ||
		m.DType != compute.F32 || m.Rows != nMix || m.Cols != hc*D {
		if y.Valid() {
			b.HCPost(h, y, postIn, combIn, p)
		}
		b.HCPre(x, post, comb, h, w, p)
		b.RMSNorm(x, x, norm, eps)
		return
	}
	checkShape("HCPostPreNorm h", h, T, hc*D)
	checkShape("HCPostPreNorm x", x, T, D)
	checkShape("HCPostPreNorm post", post, T, hc)
	checkShape("HCPostPreNorm comb", comb, T, hc*hc)
	var yp, pip, cip Ptr
	if y.Valid() {
		checkShape("HCPostPreNorm y", y, T, D)
		checkShape("HCPostPreNorm postIn", postIn, T, hc)
		checkShape("HCPostPreNorm combIn", combIn, T, hc*hc)
		yp, pip, cip = b.ptr(y), b.ptr(postIn), b.ptr(combIn)
	}
	var nw Ptr
	if norm.Valid() {
		checkShape("HCPostPreNorm norm", norm, 1, D)
		nw = b.ptr(norm)
	}
	cnt := b.hcCounters()
	if cnt == 0 {
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	part := b.Scratch(compute.F32, T*S, nMix+1)
	b.hcFusedLaunches++
	gy, diag := S, b.hcDiag
	if b.hcWarm {
		gy, diag = S+2, diag|hcWarm
	}
	var clk Ptr
	if b.hcClock != 0 && b.hcClockSlots > 0 {
		clk = b.hcClock + Ptr(8*hcClockStride*(b.hcClockN%b.hcClockSlots))
		b.hcClockN++
	}
	// Its mix weights' loads come before its wait (hc_fn_load): it may
	// start early, as the weight products do (SetPDLEarly), unless hcLate.
	b.launchAs(name, Dim3{X: T, Y: gy}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(h)).Ptr(yp).Ptr(pip).Ptr(cip).Ptr(b.ptr(x)).Ptr(b.ptr(post)).Ptr(b.ptr(comb)).
			Ptr(b.ptr(part)).Ptr(cnt).Ptr(m.Data).Ptr(b.ptr(w.Base)).Ptr(b.ptr(w.Scale)).Ptr(nw).
			Int(hc).Int(D).Int(wc).F32(p.NormEps).F32(p.Eps).Int(p.SinkhornIters).F32(eps).Int(diag).Ptr(clk), !b.hcLate)
}

// hcWarm is model.cu's HC_WARM (Backend.hcWarm).
const hcWarm = 16

// hcClockStride, hcClockTail and hcClockComb are model.cu's
// HC_CLK_STRIDE, HC_CLK_TAIL and HC_CLK_COMB: the uint64 stamps of one
// hc_post_pre launch's timeline (Backend.hcClock), and where its last
// block's and its comb block's points start.
const (
	hcClockStride = 256
	hcClockTail   = 128
	hcClockComb   = 160
)

// hcO4MinT is the batch from which HCPostPreNorm takes hc_post_pre_o4
// unless Backend.hcO2 is set (four blocks an SM rather than two: its
// (token, segment) blocks run in waves).
const hcO4MinT = 16

// hcCounters returns hc_post_pre's counters (hcFusedMaxT uint32s, zero
// between launches: each launch's last blocks reset theirs), allocated and
// zeroed on first use; 0 after a failure (recorded in b.err).
func (b *Backend) hcCounters() Ptr { return b.counters(&b.hcCnt, hcFusedMaxT, "hc_post_pre") }

// counters returns *p, first allocating n uint32 counters there, zeroed,
// for the kernel named what (whose last blocks reset the counters they
// use); 0 after a failure (recorded in b.err).
func (b *Backend) counters(p *Ptr, n int, what string) Ptr {
	if *p != 0 {
		return *p
	}
	err := b.do(func(t *Thread) error {
		q, err := t.Alloc(4 * int64(n))
		if err != nil {
			return err
		}
		if err := t.Memset32(q, 0, int64(n), t.Stream()); err != nil {
			t.Free(q)
			return err
		}
		if err := t.Sync(t.Stream()); err != nil {
			t.Free(q)
			return err
		}
		*p = q
		return nil
	})
	if err != nil {
		b.fail(fmt.Errorf("cuda: %s counters: %w", what, err))
		return 0
	}
	return *p
}

// HCHead implements compute.Mixing.
func (b *Backend) HCHead(x, h compute.Tensor, w *compute.HC, p compute.HCParams) {
	hc, D, R := p.HC, p.D, h.Rows
	checkShape("HCHead h", h, R, hc*D)
	checkShape("HCHead x", x, R, D)
	if w.Fn.Rows != hc {
		panic(fmt.Sprintf("cuda: HCHead: fn has %d rows for %d streams", w.Fn.Rows, hc))
	}
	if R == 0 {
		return
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	mix := b.Scratch(compute.F32, R, hc)
	if part, S, ok := b.hcMix(h, w.Fn, hc, hc, D); ok {
		stage := 1 // the partials staged at once (hc_mix_reduce)
		if b.hcReduceApart {
			stage = 0
		}
		b.launch("hc_mix_reduce", Dim3{X: R}, Dim3{X: 32}, 0,
			b.args().Ptr(b.ptr(mix)).Ptr(part).Int(S).Int(hc).Int(hc*D).F32(p.NormEps).Int(stage))
	} else {
		flat := b.Scratch(compute.F32, R, hc*D)
		b.RMSNorm(flat, h, compute.Tensor{}, p.NormEps)
		b.matMul(mix, flat, w.Fn, Strict)
	}
	b.launch("hc_head_finish", Dim3{X: R, Y: blocks(D, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(x)).Ptr(b.ptr(h)).Ptr(b.ptr(mix)).Ptr(b.ptr(w.Base)).Ptr(b.ptr(w.Scale)).
			Int(hc).Int(D).F32(p.Eps))
}
