package cuda

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// moeTables are a MoE layer's experts on the device: for each of W1, W2, W3
// a table of [E][data, scale] device pointers (the kernels pick a pair's
// expert there), and the shape and format they share.
type moeTables struct {
	tab        Ptr // W1's table, then W2's, then W3's: 3·E·2 u64s
	e          int
	w1, w2, w3 *Matrix // expert 0's, for the shape and format
}

// tables returns (building once) the device tables of a's experts.
func (b *Backend) tables(a *compute.MoEArgs) *moeTables {
	key := a.Experts[0].W1
	if t, ok := b.moeTabs[key]; ok {
		return t
	}
	E := len(a.Experts)
	host := make([]uint64, 3*E*2)
	mt := &moeTables{e: E}
	for e := range a.Experts {
		for j, w := range []*compute.Matrix{a.Experts[e].W1, a.Experts[e].W2, a.Experts[e].W3} {
			m := b.mustMat(w)
			ref := [3]**Matrix{&mt.w1, &mt.w2, &mt.w3}[j]
			if *ref == nil {
				*ref = m
			} else if r := *ref; r.DType != m.DType || r.Rows != m.Rows || r.Cols != m.Cols ||
				r.BlockRows != m.BlockRows || r.BlockCols != m.BlockCols {
				panic(fmt.Sprintf("cuda: MoE expert %d's W%d is %v %d×%d, expert 0's %v %d×%d", e, j+1,
					m.DType, m.Rows, m.Cols, r.DType, r.Rows, r.Cols))
			}
			host[(j*E+e)*2] = uint64(m.Data)
			host[(j*E+e)*2+1] = uint64(m.Scale)
		}
	}
	err := b.do(func(t *Thread) error {
		p, err := t.Alloc(int64(8 * len(host)))
		if err != nil {
			return err
		}
		mt.tab = p
		return t.CopyToDevice(p, Bytes(host), t.Stream())
	})
	if err != nil {
		panic(fmt.Sprintf("cuda: MoE expert tables: %v", err))
	}
	b.moeTabs[key] = mt
	return mt
}

var moeGemvKernels = [5]string{"moe_gemv_f32", "moe_gemv_bf16", "moe_gemv_f16", "moe_gemv_fp8", "moe_gemv_fp4"}

// moeGemv records the pairs' products with the experts' matrices of m's
// shape (W1 with W3 beside it when y3 is set, else W2): y[q] = W_e·x[q /
// xDiv], one block row per tile of moe_sort's list.
func (b *Backend) moeGemv(m *Matrix, y1, y3, x Ptr, xDiv int, order, idx, chunks Ptr, tiles int, tab1, tab3 Ptr) {
	name := moeGemvKernels[m.DType]
	if !m.vec() {
		name += "_s"
	}
	z := 1
	if y3 != 0 {
		z = 2
	}
	const rowsPerBlock = 16 // 8 warps of MOE_ROWS_PER_WARP
	b.launch(name, Dim3{X: blocks(m.Rows, rowsPerBlock), Y: tiles, Z: z}, Dim3{X: 256}, 0,
		b.args().Ptr(y1).Ptr(y3).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).
			Int(m.Rows).Int(m.Cols).Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()))
}

// moeTCPairsPerExpert is the average pairs an expert must get before Fast
// mode runs the experts on the tensor cores (moe_gemm).
const moeTCPairsPerExpert = 32

// moeTile is the most pairs a tile of the grouped kernels holds for P
// pairs over E experts. With the _sx kernels (the default) it is 1 up to
// one pair an expert on average, else 4 up to 4 pairs (batch 64 of the
// Flash: 1.5 pairs an expert, of which about 19% get 3 or more and so a
// second tile, a second read of their weights, at tiles of 2), else 8:
// empty slots of a tile cost those kernels only registers, not FMAs (a
// tile's pair count is uniform over its blocks). With r8 (run 8's
// kernels) it is about the expected pairs an expert gets (1, 2, 4 or 8).
// It changes no result (each pair's sums are its own).
func moeTile(P, E int, r8 bool) int {
	switch {
	case P <= E:
		return 1
	case P <= 2*E && r8:
		return 2
	case P <= 4*E:
		return 4
	}
	return 8
}

// moeRows is the rows a block of moe.cu's grouped kernels takes: 8 warps
// of MOE_GROUPED_ENTRY's RG (gate/up) or RD (down) rows.
func moeRows(kind string, pt int, run3 bool) int {
	r := 2 // tiles of 1, 4 and 8 pairs: 2 rows of W1 and W3 a warp, 4 of W2
	if pt == 2 && !run3 {
		r = 4
	}
	if kind == "moe_down" {
		r *= 2
	}
	return 8 * r
}

// moeSXShared is the dynamic shared memory of moe.cu's _sx entries for
// tiles of pt pairs on m's columns: pt rows of activations, each chunk of
// a 16-byte weight load's columns padded to xp floats (moe_sx_body).
func moeSXShared(m *Matrix, pt int) int {
	per := int(16 * int64(m.Cols) / m.rowBytes()) // columns a chunk
	xp := per
	if (per/4)%2 == 0 {
		xp += 4
	}
	return 4 * pt * int(m.rowBytes()/16) * xp
}

// moepShared is the dynamic shared memory of moe.cu's _sxp entries for
// activations of sx bytes (moeSXShared): the ring of 4 stages of 4 rows'
// 16-byte chunks for 256 threads (64 KB), then the activations.
func moepShared(sx int) int { return 4*4*256*16 + sx }

// moepMaxShared is the most a _sxp block takes: two blocks an SM (their
// launch bounds) in an H100's or H200's 227 KB.
const moepMaxShared = 112 << 10

// moeqEntry names moe.cu's moeq entry (the integer dot products) that
// takes moeGrouped's products of m for tiles of pt pairs, its dynamic
// shared memory and the blocks an SM it allows; "" where none does: Fast
// mode with moeQ only, FP4 rows of a multiple of 128 columns (the kernel
// copies 4-byte words of scale bytes), none of run 8's kernels asked for.
func (b *Backend) moeqEntry(kind string, m *Matrix, pt int) (name string, shared, perSM int) {
	if b.mode != Fast || !b.moeQ || m.DType != compute.FP4 || m.Cols%128 != 0 || b.moeR8 || b.moeRun3 || (pt == 1 && b.moeP1R8) {
		return "", 0, 0
	}
	// The blocks an SM the entries' launch bounds allow (MOEQ_ENTRY).
	name, stages, minBlocks := fmt.Sprintf("%s_fp4_p%d_q", kind, pt), 3, 2
	switch pt {
	case 1:
		minBlocks = 3
	case 8:
		minBlocks = 1
	}
	if pt == 1 && b.moeqS4 {
		name, stages, minBlocks = name+"4", 4, 2
	}
	shared = moeqShared(m, pt, stages)
	if b.k.fns[name] == 0 || shared > b.optin {
		return "", 0, 0
	}
	// An SM's shared memory: the opt-in plus the 1 KB a block reserves
	// (each block here takes that KB and its ~400 static bytes too).
	perSM = max(1, min(minBlocks, (b.optin+2048)/(shared+1024+512)))
	return name, shared, perSM
}

// moemEntry names moem.cu's entry (the FP8 tensor cores) that takes
// moeGrouped's products of m for tiles of pt pairs where moeq's would
// (moeqEntry) on a device with wgmma (sm_90a), with moeM: the entry of kpt
// pairs (tiles of 8 pairs take the one of 4 twice, each launch its half),
// its dynamic shared memory and the blocks an SM it allows; "" where none
// does.
func (b *Backend) moemEntry(kind string, m *Matrix, pt int) (name string, kpt, shared, perSM int) {
	if !b.moeM || !b.k.fp8MMA {
		return "", 0, 0, 0
	}
	if q, _, _ := b.moeqEntry(kind, m, pt); q == "" {
		return "", 0, 0, 0
	}
	kpt = min(pt, 4)
	name = fmt.Sprintf("%s_fp4_p%d_m", kind, kpt)
	nm, minBlocks := 1, 1
	if kind == "moe_gateup" {
		nm = 2
	}
	if kpt <= 2 {
		minBlocks = 2 // MOEM_ENTRY's launch bounds
	}
	shared = moemShared(nm, kpt, m.Cols)
	if b.k.fns[name] == 0 || shared > b.optin {
		return "", 0, 0, 0
	}
	perSM = max(1, min(minBlocks, (b.optin+2048)/(shared+1024+512)))
	return name, kpt, shared, perSM
}

// moemShared is the dynamic shared memory of the moem entries for nm
// matrices (2: W1 and W3) and pt pairs on cols columns (moem_body): rings
// of 4 stages of 8 warps' nm·16·4 16-byte chunks and nm·16 scale words,
// each pair's B (64 words a 32-column block) and factors, then two
// buffers of the two column slices' partial sums of 64 rows.
func moemShared(nm, pt, cols int) int {
	const stages, warps, bs, slices = 4, 8, 4, 2
	nblk := cols / 32
	return stages*warps*nm*16*bs*16 + stages*warps*nm*16*4 + pt*nblk*64*4 + pt*nblk*4 + 2*slices*nm*pt*64*4
}

// moeqFits reports whether moeq takes the experts mt's tiles (moeqEntry:
// Fast mode, moeQ, FP4 rows of a multiple of 128 columns).
func (b *Backend) moeqFits(mt *moeTables) bool {
	gu, _, _ := b.moeqEntry("moe_gateup", mt.w1, 1)
	dn, _, _ := b.moeqEntry("moe_down", mt.w2, 1)
	return gu != "" && dn != "" && mt.w3.DType == mt.w1.DType && mt.w3.Cols == mt.w1.Cols
}

// moeqShared is the dynamic shared memory of the moeq entries: rings of
// stages of 4 rows' 16-byte chunks and 4-byte scale words for 256 threads
// (20 KB a stage), then pt pairs' activations, 112 bytes (MOEQ_REC words)
// a 32-column block.
func moeqShared(m *Matrix, pt, stages int) int { return stages*4*256*(16+4) + pt*(m.Cols/32)*28*4 }

// moeqGroups is the row groups (rowsPerGroup rows each) a block of the
// moeq entries takes: enough that the tiles' blocks fit in one wave
// (perSM blocks an SM), so that each block stages its pairs' activations
// once for as many rows as it can.
func (b *Backend) moeqGroups(rows, rowsPerGroup, tiles, perSM int) int {
	units, slots := tiles*blocks(rows, rowsPerGroup), perSM*max(b.k.sms, 1)
	return max(1, min(blocks(rows, rowsPerGroup), (units+slots-1)/slots))
}

// moeSXGroups is the row groups (of 8 warps' rows) a block of the _sx
// entries takes for tiles of pt pairs: 2·pt, so that the activations a
// block stages from L2 (pt rows) stay about 1/8 of the weights it streams
// (2·pt groups of 32 rows of 2 KB at the Flash width, gate and up) while
// a tile still spreads over 8 or more blocks.
func moeSXGroups(rows, rowsPerGroup, pt int) int {
	return max(1, min(2*pt, blocks(rows, rowsPerGroup)))
}

// moeGrouped records one of the grouped expert kernels (moe.cu): kind
// moe_gateup (W1 and W3 from tab1 and tab3, SwiGLU fused) or moe_down (W2
// from tab1), for every tile: moe_sx_body's _sx entries (unless moeR8,
// moeP1R8 for tiles of 1, or their shared memory does not fit; moe.cu's
// _sxp ones with sxp), else moe_grouped_body's, moeRows rows a block.
// All give the same bits, but for moeq's entries, which take the FP4
// experts in Fast mode where moeqEntry names one (other bits), and moem's
// (moeM). oneToken: the MoE has one token (moeq's gate/up may then stage
// its activations before its wait).
func (b *Backend) moeGrouped(kind string, m *Matrix, pt int, sxp bool, y, x Ptr, xDiv int, order, idx, chunks Ptr, tiles int, tab1, tab3 Ptr, limit float32, oneToken bool) {
	name := fmt.Sprintf("%s_%s_p%d", kind, dtypeNames[m.DType], pt)
	if entry, kpt, sh, perSM := b.moemEntry(kind, m, pt); entry != "" {
		g := b.moeqGroups(m.Rows, 64, tiles, perSM)
		if b.moemG > 0 {
			g = b.moemG
		}
		for p0 := 0; p0 < pt; p0 += kpt {
			b.moemLaunches++
			b.launch(entry, Dim3{X: blocks(m.Rows, 64*g), Y: tiles}, Dim3{X: 256}, sh,
				b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).
					Int(m.Rows).Int(m.Cols).F32(limit).Int(g).Int(p0))
		}
		return
	}
	if entry, sh, perSM := b.moeqEntry(kind, m, pt); entry != "" {
		r := 2 // rows a warp, as the _sx entries
		if kind == "moe_down" {
			r = 4
		}
		g := b.moeqGroups(m.Rows, 8*r, tiles, perSM)
		if b.moeqG > 0 {
			g = b.moeqG
		}
		b.moeqLaunches++
		// Launched early (PDL; moeq_body's early): moe_down reads the
		// routing and queues its first weights before it waits for the
		// gate/up product, which lets it launch only after its own wait
		// for moe_route_sort; the gate/up product of one token's tiles of
		// one pair stages that token's activations before that wait. Not
		// with PDL on every launch or on the small ones (the router's
		// kernels before them would launch early too).
		early := 0
		switch {
		case b.rt.pdl || b.rt.pdlSmall > 0 || !b.rt.pdlEarly:
		case kind == "moe_down" && b.moeDownEarly:
			early = 1
		case kind == "moe_gateup" && b.moeGateupEarly && oneToken && pt == 1:
			early = 2
		}
		b.launchAs(entry, Dim3{X: blocks(m.Rows, 8*r*g), Y: tiles}, Dim3{X: 256}, sh,
			b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).
				Int(m.Rows).Int(m.Cols).F32(limit).Int(g).Int(early).Int(map[bool]int{true: 1}[b.moeqPF]), early != 0)
		return
	}
	if sh := moeSXShared(m, pt); (pt >= 2 || !b.moeP1R8) && !b.moeR8 && !b.moeRun3 && sh <= b.optin {
		r := 2 // rows a warp: 2 of W1 and 2 of W3, or 4 of W2
		if kind == "moe_down" {
			r = 4
		}
		g := moeSXGroups(m.Rows, 8*r, pt)
		entry := name + "_sx"
		if shp := moepShared(sh); sxp && pt <= 2 && (m.DType == compute.FP4 || m.DType == compute.FP8) && shp <= moepMaxShared {
			entry, sh = name+"_sxp", shp
		}
		b.launch(entry, Dim3{X: blocks(m.Rows, 8*r*g), Y: tiles}, Dim3{X: 256}, sh,
			b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).
				Int(m.Rows).Int(m.Cols).Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()).F32(limit).Int(g))
		return
	}
	run3 := b.moeRun3 && pt == 2
	if run3 {
		name += "_r3"
	} else if b.moeOcc > 0 && pt == 1 && m.DType == compute.FP4 {
		name += fmt.Sprintf("_o%d", b.moeOcc)
	}
	b.launch(name, Dim3{X: blocks(m.Rows, moeRows(kind, pt, run3)), Y: tiles}, Dim3{X: 256}, 0,
		b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).
			Int(m.Rows).Int(m.Cols).Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()).F32(limit))
}

// gemvxMoeFits reports whether gemvx_moe_fp4 takes the experts mt: FP4,
// both widths multiples of 128, on a device with bfloat16 tensor cores.
func (b *Backend) gemvxMoeFits(mt *moeTables) bool {
	for _, m := range []*Matrix{mt.w1, mt.w2, mt.w3} {
		if m.DType != compute.FP4 || m.Cols%128 != 0 {
			return false
		}
	}
	return b.k.tensorCores && b.k.fns["gemvx_moe_fp4"] != 0
}

// gemvxMoe records gemvx_moe_fp4 for every tile (at most 8 pairs): with
// tab3, y[pair] = SwiGLU(W1·x, W3·x) (W1 from tab1, W3 from tab3, limit);
// else y[pair] = W·x (tab1), x row pair / xDiv.
func (b *Backend) gemvxMoe(m *Matrix, y, x Ptr, xDiv int, order, idx, chunks Ptr, tiles int, tab1, tab3 Ptr, limit float32) {
	if st := gvxrStages[b.gvxrV]; st > 0 && b.k.fns[gvxrEntry(st)] != 0 {
		rowsPerItem := 16 // gate and up: 16 rows of W1 and of W3; down: 32 of W2
		if tab3 == 0 {
			rowsPerItem = 32
		}
		grid := max(1, min(tiles*blocks(m.Rows, rowsPerItem), gvxrBlocksPerSM*max(b.k.sms, 1)))
		b.launch(gvxrEntry(st), Dim3{X: grid}, Dim3{X: 256}, gvxrShared(st),
			b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Int(tiles).Ptr(tab1).Ptr(tab3).
				Int(m.Rows).Int(m.Cols).F32(limit))
		return
	}
	name := "gemvx_moe_fp4"
	if b.gemvxMoeU4 {
		name += "_u4"
	}
	b.launch(name, Dim3{X: blocks(m.Rows, 16), Y: tiles}, Dim3{X: 256}, 0,
		b.args().Ptr(y).Ptr(x).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Ptr(tab1).Ptr(tab3).Int(m.Rows).Int(m.Cols).F32(limit))
}

// moeHMinT is the fewest tokens for which moeH takes the FP4 experts in
// tiles of one pair where moeq does not take them (below it the float32
// _sx kernels, as fast there).
const moeHMinT = 16

// gvxhSplit records gvxh_split: x's rows as gemvx_moe_fp4_h reads them
// (xs, one 4-byte word a value) and their factors (xsc).
func (b *Backend) gvxhSplit(xs, xsc, x compute.Tensor) {
	b.launch("gvxh_split", Dim3{X: x.Rows}, Dim3{X: 256}, 0,
		b.args().Ptr(b.ptr(xs)).Ptr(b.ptr(xsc)).Ptr(b.ptr(x)).Int(x.Cols))
}

// gvxh records gemvx_moe_fp4_h for every tile: gemvxMoe's products from
// gvxhSplit's rows (row pair / xDiv), on the float16 tensor cores; its
// ring has gemvx_moe_fp4_ring's layout at 4 stages.
func (b *Backend) gvxh(m *Matrix, y Ptr, xs, xsc compute.Tensor, xDiv int, order, idx, chunks Ptr, tiles int, tab1, tab3 Ptr, limit float32) {
	rowsPerItem := 16
	if tab3 == 0 {
		rowsPerItem = 32
	}
	grid := max(1, min(tiles*blocks(m.Rows, rowsPerItem), gvxrBlocksPerSM*max(b.k.sms, 1)))
	b.launch("gemvx_moe_fp4_h", Dim3{X: grid}, Dim3{X: 256}, gvxrShared(4),
		b.args().Ptr(y).Ptr(b.ptr(xs)).Ptr(b.ptr(xsc)).Int(xDiv).Ptr(order).Ptr(idx).Ptr(chunks).Int(tiles).Ptr(tab1).Ptr(tab3).
			Int(m.Rows).Int(m.Cols).F32(limit))
}

// gvxrStages are the ring depths of gemvx_moe_fp4_ring's entries
// (Backend.gvxrV indexes them; 0: gemvx_moe_fp4 itself, the same bits).
var gvxrStages = []int{0, 4, 3}

// gvxrVDefault is the default gvxrV: the ring of 4 stages.
const gvxrVDefault = 1

// gvxrBlocksPerSM is gemvx_moe_fp4_ring's persistent grid an SM (its
// launch bounds).
const gvxrBlocksPerSM = 2

func gvxrEntry(stages int) string {
	if stages == 4 {
		return "gemvx_moe_fp4_ring"
	}
	return fmt.Sprintf("gemvx_moe_fp4_ring%d", stages)
}

// gvxrShared is gemvx_moe_fp4_ring's dynamic shared memory: a ring of
// stages of 256 threads' four 16-byte chunks and one 16-byte word of scale
// bytes, then the sums of the 8 warps' fragments for two items (16 KB).
func gvxrShared(stages int) int { return stages*5*256*16 + 2*8*8*32*4 }

// moeGEMM records y[q] = W_e·x[q / xDiv] for every tile's pairs on the
// tensor cores (gemm.cu's moe_gemm), x split into hi + lo (both bf16, the
// two products added in float32): error ~2^-17 of x, as the dense fast
// products.
func (b *Backend) moeGEMM(m *Matrix, y Ptr, x compute.Tensor, xDiv int, order, idx, chunks compute.Tensor, tiles int, tab Ptr) {
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	n := x.Len()
	hi, lo := b.Scratch(compute.F32, x.Rows, x.Cols), b.Scratch(compute.F32, x.Rows, x.Cols)
	b.launch("split_bf16", Dim3{X: blocks(n, opThreads)}, Dim3{X: opThreads}, 0,
		b.args().Ptr(b.ptr(hi)).Ptr(b.ptr(lo)).Ptr(b.ptr(x)).Int(n))
	wvec, xvec := 0, 0
	if m.vec() {
		wvec = 1
	}
	if m.Cols%4 == 0 {
		xvec = 1
	}
	for accum, part := range []compute.Tensor{hi, lo} {
		b.launch("moe_gemm_"+dtypeNames[m.DType], Dim3{X: blocks(m.Rows, 128), Y: tiles}, Dim3{X: 256}, 0,
			b.args().Ptr(y).Ptr(b.ptr(part)).Int(xDiv).Ptr(b.ptr(order)).Ptr(b.ptr(idx)).Ptr(b.ptr(chunks)).Ptr(tab).Int(accum).
				Int(m.Rows).Int(m.Cols).Int(x.Rows).Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()).Int(wvec).Int(xvec))
	}
}

// moeXFits reports whether gemmx_moe takes the experts' matrices of m's
// format and shape.
func (b *Backend) moeXFits(m *Matrix) bool {
	return b.k.gemmxFits(m) && b.k.fns["gemmx_moe_"+dtypeNames[m.DType]] != 0
}

// moeX records gemmx_moe: y[q] (rows ldy apart) = W_e·x[q / xDiv] for the
// pairs of every tile, x split (splitX, rows ldx apart).
func (b *Backend) moeX(m *Matrix, y Ptr, ldy int, xh, xl Ptr, ldx, xDiv int, order, idx, chunks compute.Tensor, tiles int, tab Ptr) {
	b.launch("gemmx_moe_"+dtypeNames[m.DType], Dim3{X: blocks(m.Rows, gemmxRows), Y: tiles}, Dim3{X: 256}, gemmxShared(m.DType),
		b.args().Ptr(y).Ptr(xh).Ptr(xl).Ptr(b.ptr(order)).Ptr(b.ptr(idx)).Ptr(b.ptr(chunks)).Ptr(tab).Int(xDiv).
			Int(m.Rows).Int(m.Cols).Int(ldx).Int(ldy).Int(max(m.BlockRows, 1)).Int(max(m.BlockCols, 1)).Int(m.scaleCols()))
}

// swiglu records g = silu(min(g, L))·clamp(u, ±L) over n values.
func (b *Backend) swiglu(g, u Ptr, n int, limit float32) {
	if n == 0 {
		return
	}
	b.launch("swiglu_act", Dim3{X: blocks(n, 256)}, Dim3{X: 256}, 0, b.args().Ptr(g).Ptr(u).Int(n).F32(limit))
}

// MoE implements compute.Experts: the router's product (float32 always,
// the choice must not flip), routing one warp a token, the pairs sorted by
// expert into tiles of one expert, the grouped expert products (gate and
// up with SwiGLU fused, then down: moe_gateup and moe_down, float32, one
// launch each for all the tiles; in Fast mode above FastGEMVMaxT tokens
// and moeTCPairsPerExpert pairs an expert the tensor cores, moe_gemm with
// split-bf16 activations), then the
// weighted sum per token in the CPU's order plus the shared expert.
func (b *Backend) MoE(y, x, tokens compute.Tensor, a *compute.MoEArgs) {
	T, D := x.Rows, x.Cols
	E, K := a.Gate.Rows, a.K
	checkShape("MoE y", y, T, D)
	if tokens.Len() != T {
		panic(fmt.Sprintf("cuda: MoE of %d rows with %d tokens", T, tokens.Len()))
	}
	if E > 1024 || K > 16 || len(a.Experts) != E {
		panic(fmt.Sprintf("cuda: MoE of %d experts (%d given), top %d (at most 1024, 16)", E, len(a.Experts), K))
	}
	if T == 0 {
		return
	}
	mt := b.tables(a)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	P := T * K
	// The shared expert first, on its own lane where the op may fork one:
	// it needs x only, and runs beside the routing (launches of a block or
	// a few at batch 1) and the routed experts.
	var shared Ptr
	if s := a.Shared; s.W1 != nil {
		lane := !b.sharedOnMain && b.opBranch(laneShared)
		shared = b.moeShared(x, &s, a.Limit)
		if lane {
			b.opMain()
		}
	}
	scores := b.Scratch(compute.F32, T, E)
	b.matMul(scores, x, a.Gate, Strict)
	idx := b.Scratch(compute.I32, T, K)
	wt := b.Scratch(compute.F32, T, K)
	// Tiles of at most pt pairs of one expert: at most P/pt + E of them,
	// and at most P.
	grouped := mt.w1.vec() && mt.w2.vec()
	I := mt.w1.Rows
	// Fast, experts averaging moeTCPairsPerExpert pairs or more
	// (prefill): the tensor cores, gemmx's experts' form with tiles of up
	// to 64 pairs of one expert (run 8's moe_gemm, tiles of 128, behind
	// gemmR8). Only worth it with many pairs an expert: run 3's tensor
	// cores decoded batch 64 (1.5 pairs an expert) in 115 ms, and run 9's
	// gemmx_moe in 36.5 ms against 21.6 with the float32 kernels (76.2
	// against 73.6 at batch 256, 6 pairs an expert).
	many := b.mode == Fast && T > b.k.gemvMaxT && (P >= moeTCPairsPerExpert*E || b.moeXAll)
	tcx := many && !b.gemmR8 && !b.moeXOff && b.moeXFits(mt.w1) && b.moeXFits(mt.w2) && b.moeXFits(mt.w3) &&
		D%8 == 0 && I%8 == 0
	tc := many && !tcx && b.k.tensorCores && bf16Exact(mt.w1.DType) && bf16Exact(mt.w2.DType)
	pt := moeTile(P, E, b.moeR8 || b.moeRun3)
	if b.moePT > 0 {
		pt = b.moePT
	}
	// Fast, FP4 experts from half a pair an expert on average (batch 22
	// and up at the Flash width), and with moeH from moeHMinT tokens: the
	// tensor cores, tiles of up to 8 pairs, their cost flat in them
	// (gemvx_moe_fp4_h with moeH, the default; else gemvx's experts' form).
	// Run 10 (A/B gemvx-moe-all, tiles of 1 pair): batch 32 8.6% faster
	// with gemvx's form, 16 even (-0.9%), 8 and 1 3.3% and 1.3% slower;
	// run 12 (call 6, A/B gvxh-off and gvxh-all): without gemvx_moe_fp4_h
	// batch 16 is 2.8% slower, 32, 64 and 256 10.0-10.4%; with it at
	// batches 1 and 8 too, +1.1% and -0.5% (so below moeHMinT the float32
	// kernels kept tiles of one pair).
	// Run 14: moeq (the integer dot products) takes the tiles of one pair
	// below half a pair an expert (A/B moeq-off: batch 1 5.0% and batch 8
	// 19.7% slower without it; gvxh-16: batch 16 15.6% slower with
	// gemvx_moe_fp4_h; moeq-gx: moeq for tiles of several pairs even at
	// batch 32, 41% and 53% slower at 64 and 256), so moeHMinT applies
	// only where moeq does not fit.
	q := b.moeqFits(mt)
	gx := b.mode == Fast && !many && ((pt >= b.gemvxMoeMinPT || 2*P >= E) && !(q && b.moeQGX) || (b.moeH && T >= moeHMinT && (!q || b.moeHTiles))) && b.moePT == 0 &&
		!b.gemvxMoeOff && b.gemvxMoeFits(mt)
	switch {
	case gx:
		pt = 8
	case tcx:
		pt = gemmxTokens
	case tc:
		pt = 128 // moe_gemm's tile of pairs
	case !grouped:
		pt = 8 // MOE_TILE, moe_gemv's
	}
	order := b.Scratch(compute.I32, 1, P)
	tiles := min(P, P/pt+E)
	chunks := b.Scratch(compute.I32, 1, 2*tiles+1) // moe_sort's list, then its count
	routeArgs := func() *Args {
		return b.args().Ptr(b.ptr(idx)).Ptr(b.ptr(wt)).Ptr(b.ptr(scores)).Ptr(b.ptr(a.Bias)).Ptr(b.ptr(a.Tid2Eid)).
			Ptr(b.ptr(tokens)).Int(E).Int(K).Int(int(a.Scoring)).F32(a.RoutedScale)
	}
	if T == 1 && !b.routeR8 && !b.routeSortOff && b.k.fns["moe_route_sort"] != 0 {
		// One token: routing and sort in one block (the same results).
		b.launch("moe_route_sort", Dim3{X: 1}, Dim3{X: 1024}, 8*E,
			routeArgs().Ptr(b.ptr(order)).Ptr(b.ptr(chunks)).Int(tiles).Int(pt))
	} else {
		route, threads := "moe_route_b", 256
		if b.routeR8 || b.k.fns[route] == 0 {
			route, threads = "moe_route", 32
		}
		b.launch(route, Dim3{X: T}, Dim3{X: threads}, 0, routeArgs())
		b.launch("moe_sort", Dim3{X: 1}, Dim3{X: 1024}, 8*E,
			b.args().Ptr(b.ptr(order)).Ptr(b.ptr(chunks)).Ptr(b.ptr(idx)).Int(P).Int(E).Int(tiles).Int(pt))
	}

	if mt.w1.Cols != D || mt.w2.Rows != D || mt.w2.Cols != I || mt.w3.Rows != I {
		panic(fmt.Sprintf("cuda: MoE experts W1 %d×%d, W2 %d×%d for width %d", mt.w1.Rows, mt.w1.Cols, mt.w2.Rows, mt.w2.Cols, D))
	}
	g := b.Scratch(compute.F32, P, I)
	tab := mt.tab
	tab1, tab2, tab3 := tab, tab.Add(int64(16*E)), tab.Add(int64(32*E))
	ye := b.Scratch(compute.F32, P, D)
	if gx && b.moeH && b.k.fns["gemvx_moe_fp4_h"] != 0 {
		// Fast: the float16 tensor cores (gemvx.cu's gvxh), each input
		// row split once.
		xs, xsc := b.Scratch(compute.F32, T, D), b.Scratch(compute.F32, 1, T)
		b.gvxhSplit(xs, xsc, x)
		b.gvxh(mt.w1, b.ptr(g), xs, xsc, K, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab1, tab3, a.Limit)
		gs, gsc := b.Scratch(compute.F32, P, I), b.Scratch(compute.F32, 1, P)
		b.gvxhSplit(gs, gsc, g)
		b.gvxh(mt.w2, b.ptr(ye), gs, gsc, 1, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab2, 0, a.Limit)
	} else if gx {
		b.gemvxMoe(mt.w1, b.ptr(g), b.ptr(x), K, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab1, tab3, a.Limit)
		b.gemvxMoe(mt.w2, b.ptr(ye), b.ptr(g), 1, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab2, 0, a.Limit)
	} else if tcx {
		u := b.Scratch(compute.F32, P, I)
		xh, xl := b.splitX(b.ptr(x), T*D)
		b.moeX(mt.w1, b.ptr(g), I, xh, xl, D, K, order, idx, chunks, tiles, tab1)
		b.moeX(mt.w3, b.ptr(u), I, xh, xl, D, K, order, idx, chunks, tiles, tab3)
		b.swiglu(b.ptr(g), b.ptr(u), P*I, a.Limit)
		gh, gl := b.splitX(b.ptr(g), P*I)
		b.moeX(mt.w2, b.ptr(ye), D, gh, gl, I, 1, order, idx, chunks, tiles, tab2)
	} else if tc {
		// Fast, many tokens: the tensor cores, each product split as
		// x = hi + lo (both bf16) like the dense fast products.
		u := b.Scratch(compute.F32, P, I)
		b.moeGEMM(mt.w1, b.ptr(g), x, K, order, idx, chunks, tiles, tab1)
		b.moeGEMM(mt.w3, b.ptr(u), x, K, order, idx, chunks, tiles, tab3)
		b.swiglu(b.ptr(g), b.ptr(u), P*I, a.Limit)
		b.moeGEMM(mt.w2, b.ptr(ye), g, 1, order, idx, chunks, tiles, tab2)
	} else if grouped {
		sxp := b.moeSXP && P > K // more than one token's pairs (moeSXP)
		b.moeGrouped("moe_gateup", mt.w1, pt, sxp, b.ptr(g), b.ptr(x), K, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab1, tab3, a.Limit, T == 1)
		b.moeGrouped("moe_down", mt.w2, pt, sxp, b.ptr(ye), b.ptr(g), 1, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab2, 0, a.Limit, T == 1)
	} else {
		u := b.Scratch(compute.F32, P, I)
		b.moeGemv(mt.w1, b.ptr(g), b.ptr(u), b.ptr(x), K, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab1, tab3)
		b.swiglu(b.ptr(g), b.ptr(u), P*I, a.Limit)
		b.moeGemv(mt.w2, b.ptr(ye), 0, b.ptr(g), 1, b.ptr(order), b.ptr(idx), b.ptr(chunks), tiles, tab2, 0)
	}

	b.opJoin(laneShared)
	b.launch("moe_combine", Dim3{X: T, Y: blocks(D, 256)}, Dim3{X: 256}, 0,
		b.args().Ptr(b.ptr(y)).Ptr(b.ptr(ye)).Ptr(b.ptr(wt)).Ptr(b.ptr(idx)).Ptr(shared).Int(K).Int(D))
}

// moeShared queues the shared expert s on x [T, D] (SwiGLU with limit) and
// returns its output [T, D], in scratch.
func (b *Backend) moeShared(x compute.Tensor, s *compute.SwiGLU, limit float32) Ptr {
	T, D := x.Rows, x.Cols
	Is := s.W1.Rows
	sh := b.Scratch(compute.F32, T, D)
	gu := b.Scratch(compute.F32, 2*T, Is)
	gs, us := gu.Slice(0, T), gu.Slice(T, 2*T)
	if tab, w0, ok := b.groupTable([]*compute.Matrix{s.W1, s.W3}); ok && b.useGEMVX(w0, T, b.mode) {
		b.fail(b.gemvx(b.ptr(gu), Is, T*Is, b.ptr(x), D, 0, T, w0, 2, tab))
	} else if tab, w0, ok := b.groupTable([]*compute.Matrix{s.W1, s.W3}); ok && !b.k.groupedR5 && (b.mode == Strict || T <= b.k.gemvMaxT || !bf16Exact(w0.DType) || !b.k.tensorCores) {
		// W1 and W3 in one grouped launch on the same input (the
		// split chosen for their 2·Is rows together).
		b.fail(b.k.groupedGEMVStrided(b.rt, 0, b.ptr(gu), Is, T*Is, b.ptr(x), D, 0, T, w0, 2, tab))
	} else {
		b.MatMul(gs, x, s.W1)
		b.MatMul(us, x, s.W3)
	}
	b.swiglu(b.ptr(gs), b.ptr(us), T*Is, limit)
	b.MatMul(sh, gs, s.W2)
	return b.ptr(sh)
}
