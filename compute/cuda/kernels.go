package cuda

import (
	"errors"
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// Mode selects the numerics of matrix products.
type Mode int

const (
	// Strict computes in float32 on the CUDA cores, batch-invariant.
	Strict Mode = iota
	// Fast uses the float32 kernel up to FastGEMVMaxT tokens and the
	// bfloat16 tensor-core kernel above (see the package documentation).
	Fast
)

// FastGEMVMaxT is the largest T for which Fast products use the float32
// kernel. Run 9's BenchmarkCrossover on the H200: the float32 GEMV is the
// faster up to T=8 (FP8 4096x4096 29.2 against gemmx's 38.3 µs, BF16
// 23.3 against 29.3), gemmx from T=12 (38.7 against 53.6, 30.2 against
// 43.2); run 8's gemm.cu had kept the GEMV up to T=32.
const FastGEMVMaxT = 8

// GEMVXMinT is the fewest tokens for which Fast products of FP8 and BF16
// weights take gemvx (the tensor cores) instead of the float32 GEMV, up to
// FastGEMVMaxT. Run 10 on the H200 (BenchmarkGEMVX, graph replays): at
// one token the float32 GEMV is as fast or faster on most Flash shapes
// (FP8 4096x8192 16.8 against 20.6 us, 4096x4096 10.0 against 11.8; wq_b
// 21.7 against 19.0), and a decode step of batch 1 was 6.3% slower with
// gemvx; from two tokens gemvx wins (4096x8192 at T=2: 27.6 against 21.1
// us) and stays flat to T=8 (22.0 against 51.8).
const GEMVXMinT = 2

// Kernels are the compiled kernels of a device. Their methods queue work
// on a stream and return without waiting for it; they take the Thread of
// the Device.Do call they run in.
type Kernels struct {
	mods  []module
	gemv  [5][3][2]Func // [dtype][token group 1, 2, 4][scalar, vector]
	gemv2 [5][4][4]Func // [dtype][token group 1, 2, 4, 8][split 1, 2, 4, 8]
	// gemv2g are gemv2's grouped entries (GroupedMatMul).
	gemv2g [5][4][4]Func
	gemm   [5]Func
	// gemmx is gemmx.cu's product by dtype (BF16, FP8 and FP4 only);
	// gemmxO1 its _o1 entries (launch bounds of one block an SM), taken
	// when useO1 is set (measured beside).
	gemmx, gemmxO1 [5]Func
	useO1          bool
	// gemmxFP8R22 is gemmx_fp8_r22 (run 22's software FP8 decode, the
	// same bits), taken for FP8 when useR22 is set (tests, A/B
	// gemmx-dec-r22).
	gemmxFP8R22 Func
	useR22      bool
	// gemvMaxT is FastGEMVMaxT, changed only to measure another crossover;
	// gemvxMinT is GEMVXMinT.
	gemvMaxT, gemvxMinT int
	// gemvxM1 forces gemvx's tiles a block: 1 (16 rows) or 2 (32 rows);
	// 0 chooses by the shape (tests run both).
	gemvxM1 int
	// tensorCores: the device has bfloat16 mma.sync (sm_80 and later).
	tensorCores bool
	// fp8MMA: the device has wgmma with e4m3 operands (sm_90a: moem.cu).
	fp8MMA bool
	// sms is the device's multiprocessors (gemvp's persistent grid).
	sms int
	// gemvp are gemvp.cu's entries, [ring (gemvpRings)][split 1, 2, 4, 8],
	// and gemvpG their grouped forms; gemvpV selects them for FP8 products
	// of one token (0: gemv2's; i: ring i-1; the default 2, 3 steps
	// ahead: run 11 timed a batch-1 step 6.7% faster with it, 5.2% with 4
	// steps). The same bits either way.
	gemvp, gemvpG [2][4]Func
	gemvpV        int
	// gemvpOcc: gemvp's persistent grids hold as many blocks an SM as
	// their shared memory leaves room for, up to gemvpMaxBlocksPerSM,
	// instead of gemvpBlocksPerSM (the same bits: any grid gives them).
	// Off: run 28 measured a batch-1 step 0.6% slower with it (H100).
	gemvpOcc    bool
	sharedPerSM int // the device's shared memory an SM (gemvpGrid)
	// gemvpPF: the units of each gemvp block whose rows it asks the L2
	// for before its wait (gemvp_prefetch), so that a launch started
	// early streams its weights while the kernel before it runs; 0 (the
	// default) none, gemvpPFAll all. The same bits: a prefetch changes no
	// value. Off: run 29 measured a batch-1 step 2.3% slower with it
	// (H100).
	gemvpPF int
	// gemvpChain is gemvp.cu's gemvp_fp8_u2s3_chain: a grouped product and
	// the product of its output in one launch (chainGEMVP).
	gemvpChain Func
	// gemvh are gemvh.cu's entries, [ring depth (gemvhStages)][split 1,
	// 2, 4, 8], and gemvhG their grouped forms: the Fast FP8 products of
	// one token on the float16 tensor cores; gemvhS selects the depth
	// (the default 0: 3 stages).
	gemvh, gemvhG [2][4]Func
	gemvhS        int
	// gemvxpCols: FP8 products of 1 to 8 tokens in Fast mode with at most
	// this many columns take gemvxp_fp8 (gemvx with its loads in a ring)
	// instead of gemvx's entries; the same bits. Run 11 (BenchmarkGEMVX):
	// 22-24 us against gemvx's 30-33 for 32768x1024, but 8.3-27.7 against
	// 7.0-21.5 for 2048 to 8192 columns, so the default is 1024 (0: never).
	gemvxpCols int
	// unavailable says why kernels are missing (Open's keepGoing).
	unavailable error

	rmsnorm, rope, softmax, topk, topkReg, topkReg4, gather, empty Func
	// topkSel: topk, topk_reg and topk_reg4 with indexer_fix's step
	// (topKSel).
	topkSel [3]Func

	// t8R4: BF16 and FP8 products of 8 or more tokens (plain and grouped)
	// take gemv5 (4 rows a warp, gemv2's bits) instead of gemv2. On by
	// default.
	t8R4 bool
	// groupedR5: run 5's grouped products (the split chosen for one
	// matrix of the group; the shared expert's W1 and W3 in two launches),
	// measured beside (other bits).
	groupedR5 bool

	// fns are the model-level kernels (model.cu, moe.cu) by name; names
	// every loaded kernel's name (profiles).
	fns   map[string]Func
	names map[Func]string
}

// modelKernels names the kernels the Backend launches by name.
var modelKernels = []string{
	"embed_f32", "embed_bf16", "embed_f16", "embed_fp8", "embed_fp4",
	"add_repeated", "copy_cols", "scale_f32", "rope_heads",
	"hc_pre_finish", "hc_post", "hc_head_finish", "hc_mix_partial", "hc_mix_reduce", "hc_pre_split", "hc_post_pre", "hc_post_pre_o4",
	"rmsnorm_rope",
	"compress_bias", "compress_emit", "compress_ring",
	"indexer_scores", "indexer_scores_r21", "indexer_scores_r25", "indexer_fix", "attn_logits", "attn_values", "attn_combine", "attn_logits_h16", "attn_values_h16",
	"attn_qk", "attn_qk8", "attn_pv4", "attn_pv8", "attn_tc", "attn_fd", "attn_fd_h2", "attn_fd_h8",
	"store_ring", "load_ring", "round_trip",
	"moe_route", "moe_route_b", "moe_sort", "moe_route_sort", "swiglu_act", "moe_combine", "split_bf16", "gemmx_reduce", "split_bf16x",
	"gemmx_moe_bf16", "gemmx_moe_fp8", "gemmx_moe_fp4",
	"moe_gemv_f32", "moe_gemv_bf16", "moe_gemv_f16", "moe_gemv_fp8", "moe_gemv_fp4",
	"moe_gemv_f32_s", "moe_gemv_bf16_s", "moe_gemv_f16_s", "moe_gemv_fp8_s", "moe_gemv_fp4_s",
	"l2_prefetch", "gemvx_fp8", "gemvx_bf16", "gemvx_fp8_m1", "gemvx_bf16_m1", "gemvx_moe_fp4", "gemvx_moe_fp4_u4",
	"gemvx_moe_fp4_ring", "gemvx_moe_fp4_ring3", "gemvx_moe_fp4_h", "gvxh_split",
	"gemvxp_fp8", "wgmma_probe",
}

// moeSXKernels are moe.cu's _sx, _sxp and _q entries (filled
// in by init): they take more dynamic shared memory than the default 48
// KB.
var moeSXKernels []string

func init() {
	for _, kind := range []string{"moe_gateup", "moe_down"} {
		for _, dn := range dtypeNames {
			for _, pt := range []int{1, 2, 4, 8} {
				modelKernels = append(modelKernels, fmt.Sprintf("%s_%s_p%d", kind, dn, pt))
			}
			modelKernels = append(modelKernels, fmt.Sprintf("%s_%s_p2_r3", kind, dn))
			for _, pt := range []int{1, 2, 4, 8} {
				moeSXKernels = append(moeSXKernels, fmt.Sprintf("%s_%s_p%d_sx", kind, dn, pt))
			}
		}
		for _, n := range []int{2, 3, 4} {
			modelKernels = append(modelKernels, fmt.Sprintf("%s_fp4_p1_o%d", kind, n))
		}
		for _, dn := range []string{"fp4", "fp8"} {
			for _, pt := range []int{1, 2} {
				moeSXKernels = append(moeSXKernels, fmt.Sprintf("%s_%s_p%d_sxp", kind, dn, pt))
			}
		}
		for _, pt := range []int{1, 2, 4, 8} {
			moeSXKernels = append(moeSXKernels, fmt.Sprintf("%s_fp4_p%d_q", kind, pt))
		}
		moeSXKernels = append(moeSXKernels, kind+"_fp4_p1_q4")
		for _, pt := range []int{1, 2, 4} {
			moeSXKernels = append(moeSXKernels, fmt.Sprintf("%s_fp4_p%d_m", kind, pt))
		}

	}
	modelKernels = append(modelKernels, moeSXKernels...)
	for _, dn := range dtypeNames {
		modelKernels = append(modelKernels, "moe_gemm_"+dn)
	}
	for _, v := range gemvVariants {
		for _, sp := range []int{1, 2, 4, 8} {
			modelKernels = append(modelKernels, v.name(sp))
		}
	}
	for _, dn := range []string{"bf16", "fp8"} {
		for _, sp := range []int{1, 2, 4, 8} {
			modelKernels = append(modelKernels, fmt.Sprintf("gemv5_%s_t8_s%d", dn, sp), fmt.Sprintf("gemv5_%s_t8_s%d_g", dn, sp))
			for _, tt := range []int{1, 2, 4, 8} {
				modelKernels = append(modelKernels, fmt.Sprintf("gemvm_%s_t%d_s%d", dn, tt, sp))
			}
		}
	}
}

// gemvVariant is one of gemv3.cu's T = 1 products: U chunks of each of R
// rows a warp in flight per lane, the hardware FP8 decoder when D is 1,
// the scale bytes loaded with the chunks when P is 1.
// Every variant gives gemv2's bits; they exist to be measured
// (BenchmarkGEMVVariants).
type gemvVariant struct {
	DType      compute.DType
	U, R, D, P int
}

// gemvVariants are gemv3.cu's, in its order.
var gemvVariants = []gemvVariant{
	{compute.FP8, 4, 2, 1, 0}, {compute.FP8, 4, 2, 0, 1}, {compute.FP8, 4, 2, 1, 1}, {compute.FP8, 8, 2, 1, 1},
	{compute.FP8, 4, 4, 1, 1}, {compute.FP8, 4, 1, 1, 1}, {compute.FP8, 8, 1, 1, 1},
	{compute.FP4, 4, 2, 0, 1}, {compute.FP4, 8, 2, 0, 1}, {compute.FP4, 4, 4, 0, 1}, {compute.FP4, 4, 1, 0, 1},
	{compute.BF16, 8, 2, 0, 0}, {compute.BF16, 4, 4, 0, 0}, {compute.BF16, 4, 1, 0, 0},
}

func (v gemvVariant) name(split int) string {
	return fmt.Sprintf("gemv3_%s_u%d_r%d_d%d_p%d_s%d", dtypeNames[v.DType], v.U, v.R, v.D, v.P, split)
}

func (v gemvVariant) String() string { return fmt.Sprintf("u%d-r%d-d%d-p%d", v.U, v.R, v.D, v.P) }

// gemvVariantT1 queues y = W·x (T = 1) through variant v with split index
// si (-1: the split gemv2 would take for the shape, for v's rows a warp).
func (k *Kernels) gemvVariantT1(t *Thread, s Stream, y, x Ptr, w *Matrix, v gemvVariant, si int) error {
	if err := checkMatMul(1, w); err != nil {
		return err
	}
	if w.DType != v.DType || !w.vec() {
		return fmt.Errorf("cuda: gemv variant %v of %v for a %v matrix", v, v.DType, w.DType)
	}
	rowsPerBlock := 0
	if si < 0 {
		si, rowsPerBlock = gemvSplitR(w.Rows, int(w.rowBytes()/16), v.R)
	} else {
		rowsPerBlock = (8 >> si) * v.R
	}
	a := t.Args().Ptr(y).Ptr(x).Ptr(w.Data).Ptr(w.Scale).Int(w.Rows).Int(w.Cols).Int(1).
		Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols())
	return k.launch(t, k.fns[v.name(1<<si)], Dim3{X: (w.Rows + rowsPerBlock - 1) / rowsPerBlock}, Dim3{X: 256}, s, a)
}

var dtypeNames = [5]string{"f32", "bf16", "f16", "fp8", "fp4"}

// loadKernels loads the built modules and finds every kernel. With
// keepGoing, units that failed to build and kernels not found are left
// out (their Func is 0) instead of failing.
func loadKernels(t *Thread, units []built, tensorCores bool, sms int, keepGoing bool) (*Kernels, error) {
	k := &Kernels{tensorCores: tensorCores, sms: sms, t8R4: true, gemvMaxT: FastGEMVMaxT, gemvxMinT: GEMVXMinT,
		gemvpV: gemvpVDefault, gemvxpCols: gemvxpColsDefault}
	var missing []error
	for _, u := range units {
		if u.err != nil {
			missing = append(missing, u.err)
			continue
		}
		m, err := t.loadModule(u.cubin)
		if err != nil {
			err = fmt.Errorf("cuda: loading %s: %w", u.unit, err)
			if !keepGoing {
				k.unload(t)
				return nil, err
			}
			missing = append(missing, err)
			continue
		}
		k.mods = append(k.mods, m)
	}
	k.names = map[Func]string{}
	fn := func(dst *Func, name string) {
		for _, m := range k.mods {
			if f, err := t.function(m, name); err == nil {
				*dst = f
				k.names[f] = name
				return
			}
		}
		missing = append(missing, fmt.Errorf("cuda: kernel %s not found", name))
	}
	for d, dn := range dtypeNames {
		for g, tt := range []int{1, 2, 4} {
			fn(&k.gemv[d][g][0], fmt.Sprintf("gemv_%s_t%d_s", dn, tt))
			fn(&k.gemv[d][g][1], fmt.Sprintf("gemv_%s_t%d_v", dn, tt))
		}
		for g, tt := range []int{1, 2, 4, 8} {
			for si, sp := range []int{1, 2, 4, 8} {
				fn(&k.gemv2[d][g][si], fmt.Sprintf("gemv2_%s_t%d_s%d", dn, tt, sp))
				fn(&k.gemv2g[d][g][si], fmt.Sprintf("gemv2_%s_t%d_s%d_g", dn, tt, sp))
			}
		}
		fn(&k.gemm[d], "gemm_"+dn)
	}
	for _, d := range []compute.DType{compute.BF16, compute.FP8, compute.FP4} {
		for _, e := range []struct {
			f    *Func
			name string
		}{{&k.gemmx[d], "gemmx_" + dtypeNames[d]}, {&k.gemmxO1[d], "gemmx_" + dtypeNames[d] + "_o1"}, {&k.gemmxFP8R22, "gemmx_fp8_r22"}} {
			if e.f == &k.gemmxFP8R22 && d != compute.FP8 {
				continue
			}
			fn(e.f, e.name)
			if *e.f != 0 {
				if err := t.SetMaxDynamicShared(*e.f, gemmxShared(d)); err != nil {
					missing = append(missing, fmt.Errorf("cuda: %s: %w", e.name, err))
					*e.f = 0
				}
			}
		}
	}
	for ri, r := range gemvpRings {
		for si, sp := range []int{1, 2, 4, 8} {
			for _, e := range []struct {
				f    *Func
				name string
			}{{&k.gemvp[ri][si], r.name(sp)}, {&k.gemvpG[ri][si], r.name(sp) + "_g"}} {
				fn(e.f, e.name)
				if *e.f != 0 {
					if err := t.SetMaxDynamicShared(*e.f, gemvpMaxShared); err != nil {
						missing = append(missing, fmt.Errorf("cuda: %s: %w", e.name, err))
						*e.f = 0
					}
				}
			}
		}
	}
	fn(&k.gemvpChain, "gemvp_fp8_u2s3_chain")
	if k.gemvpChain != 0 {
		if err := t.SetMaxDynamicShared(k.gemvpChain, gemvpMaxShared); err != nil {
			missing = append(missing, fmt.Errorf("cuda: gemvp_fp8_u2s3_chain: %w", err))
			k.gemvpChain = 0
		}
	}
	for ri, S := range gemvhStages {
		for si, sp := range []int{1, 2, 4, 8} {
			for _, e := range []struct {
				f    *Func
				name string
			}{{&k.gemvh[ri][si], gemvhName(S, sp)}, {&k.gemvhG[ri][si], gemvhName(S, sp) + "_g"}} {
				fn(e.f, e.name)
				if *e.f != 0 {
					if err := t.SetMaxDynamicShared(*e.f, gemvhMaxShared); err != nil {
						missing = append(missing, fmt.Errorf("cuda: %s: %w", e.name, err))
						*e.f = 0
					}
				}
			}
		}
	}
	fn(&k.rmsnorm, "rmsnorm")
	fn(&k.rope, "rope")
	fn(&k.softmax, "softmax")
	fn(&k.topk, "topk")
	fn(&k.topkReg, "topk_reg")
	fn(&k.topkReg4, "topk_reg4")
	fn(&k.topkSel[0], "topk_sel")
	fn(&k.topkSel[1], "topk_reg_sel")
	fn(&k.topkSel[2], "topk_reg4_sel")
	fn(&k.gather, "gather")
	fn(&k.empty, "empty")
	k.fns = make(map[string]Func, len(modelKernels))
	for _, name := range modelKernels {
		var f Func
		fn(&f, name)
		k.fns[name] = f
	}
	if f := k.fns["gemvxp_fp8"]; f != 0 {
		if err := t.SetMaxDynamicShared(f, gemvxpShared); err != nil {
			missing = append(missing, fmt.Errorf("cuda: gemvxp_fp8: %w", err))
			k.fns["gemvxp_fp8"] = 0
		}
	}
	for _, d := range []compute.DType{compute.BF16, compute.FP8, compute.FP4} {
		name := "gemmx_moe_" + dtypeNames[d]
		if f := k.fns[name]; f != 0 {
			if err := t.SetMaxDynamicShared(f, gemmxShared(d)); err != nil {
				missing = append(missing, fmt.Errorf("cuda: %s: %w", name, err))
				k.fns[name] = 0
			}
		}
	}
	if len(missing) > 0 {
		k.unavailable = errors.Join(missing...)
		if !keepGoing {
			k.unload(t)
			return nil, k.unavailable
		}
	}
	return k, nil
}

func (k *Kernels) unload(t *Thread) error {
	var first error
	for _, m := range k.mods {
		if err := t.unloadModule(m); err != nil && first == nil {
			first = err
		}
	}
	k.mods = nil
	return first
}

// launch launches f, or says why it is missing.
func (k *Kernels) launch(t *Thread, f Func, grid, block Dim3, s Stream, a *Args) error {
	if f == 0 {
		return fmt.Errorf("cuda: kernel unavailable: %v", k.unavailable)
	}
	return t.Launch(f, grid, block, 0, s, a)
}

// launchEarly is launch through Thread.LaunchEarly (gemv2's entries: their
// first chunks are weights, loaded before PDL_WAIT_LATE).
func (k *Kernels) launchEarly(t *Thread, f Func, grid, block Dim3, s Stream, a *Args) error {
	if f == 0 {
		return fmt.Errorf("cuda: kernel unavailable: %v", k.unavailable)
	}
	return t.LaunchEarly(f, grid, block, 0, s, a)
}

// MatMul queues y[t] = W·x[t] for t in [0, T) on s: x is [T, W.Cols] and
// y is [T, W.Rows], float32 row-major in device memory.
func (k *Kernels) MatMul(t *Thread, s Stream, y, x Ptr, T int, w *Matrix, mode Mode) error {
	if mode == Fast && T > k.gemvMaxT && k.tensorCores {
		return k.matMulGEMM(t, s, y, x, T, w)
	}
	return k.matMulGEMV(t, s, y, x, T, w)
}

func checkMatMul(T int, w *Matrix) error {
	if T < 0 || w.Rows <= 0 || w.Cols <= 0 || int(w.DType) < 0 || int(w.DType) >= len(dtypeNames) {
		return fmt.Errorf("cuda: MatMul of %v %dx%d with T=%d", w.DType, w.Rows, w.Cols, T)
	}
	if w.DType == compute.FP8 && (w.BlockRows <= 0 || w.BlockCols <= 0) {
		return fmt.Errorf("cuda: MatMul: fp8 matrix with block %dx%d", w.BlockRows, w.BlockCols)
	}
	return nil
}

// gemvVersion selects the float32 kernel for rows that allow 16-byte
// loads: 1 is gemv.cu, 2 is gemv2.cu (scalar rows always use gemv.cu).
const gemvVersion = 2

// matMulGEMV is the float32 product (Strict, and Fast for small T):
// gemvp's when gemvpV selects it and it takes w (gemv2's bits), else
// gemv2's.
func (k *Kernels) matMulGEMV(t *Thread, s Stream, y, x Ptr, T int, w *Matrix) error {
	if err := checkMatMul(T, w); err != nil || T == 0 {
		return err
	}
	if ok, err := k.matMulGEMVP(t, s, y, x, T, w); ok || err != nil {
		return err
	}
	return k.matMulGEMVVersion(t, s, y, x, T, w, gemvVersion)
}

func (k *Kernels) matMulGEMVVersion(t *Thread, s Stream, y, x Ptr, T int, w *Matrix, version int) error {
	if err := checkMatMul(T, w); err != nil || T == 0 {
		return err
	}
	g := gemv2Group(T)
	a := t.Args().Ptr(y).Ptr(x).Ptr(w.Data).Ptr(w.Scale).Int(w.Rows).Int(w.Cols).Int(T).
		Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols())
	if version == 2 && w.vec() {
		si, rowsPerBlock := gemv2Split(w.Rows, int(w.rowBytes()/16))
		if f := k.gemv5(w, g, si, false); f != 0 {
			// gemv5: 4 rows a warp at gemv2's split (the same bits).
			rowsPerBlock = (8 >> si) * 4
			return k.launch(t, f, Dim3{X: (w.Rows + rowsPerBlock - 1) / rowsPerBlock}, Dim3{X: 256}, s, a)
		}
		return k.launchEarly(t, k.gemv2[w.DType][g][si], Dim3{X: (w.Rows + rowsPerBlock - 1) / rowsPerBlock}, Dim3{X: 256}, s, a)
	}
	v := 0
	if w.vec() {
		v = 1
	}
	return k.launch(t, k.gemv[w.DType][min(g, 2)][v], Dim3{X: (w.Rows + gemvRows - 1) / gemvRows}, Dim3{X: 256}, s, a)
}

// groupedGEMV queues y[t][g·R:(g+1)·R] = W_g·x[t][g·K:(g+1)·K] for the G
// matrices of tab ([G][data, scale] device pointers), all of w's shape and
// format (w.vec() must hold): gemv2.cu's grouped entries (gemv5's at 8+
// tokens a pass), each group reduced as a MatMul of G·R rows would reduce
// it (the split is chosen for the whole group: run 5 chose it for one
// matrix of R rows, 2048 short blocks for the Flash wo_a).
func (k *Kernels) groupedGEMV(t *Thread, s Stream, y, x Ptr, T int, w *Matrix, G int, tab Ptr) error {
	return k.groupedGEMVStrided(t, s, y, G*w.Rows, w.Rows, x, G*w.Cols, w.Cols, T, w, G, tab)
}

// groupedGEMVStrided is groupedGEMV with group g's input at x + g·xgs
// (rows ldx apart) and its output at y + g·ygs (rows ldy apart), in floats.
func (k *Kernels) groupedGEMVStrided(t *Thread, s Stream, y Ptr, ldy, ygs int, x Ptr, ldx, xgs int, T int, w *Matrix, G int, tab Ptr) error {
	if err := checkMatMul(T, w); err != nil || T == 0 {
		return err
	}
	g := gemv2Group(T)
	a := t.Args().Ptr(y).Int(ldy).Int(ygs).Ptr(x).Int(ldx).Int(xgs).Ptr(tab).Int(w.Rows).Int(w.Cols).Int(T).
		Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols())
	splitRows := G * w.Rows
	if k.groupedR5 {
		splitRows = w.Rows
	}
	si, rowsPerBlock := gemv2Split(splitRows, int(w.rowBytes()/16))
	if ok, err := k.groupedGEMVP(t, s, y, ygs, x, xgs, T, w, G, tab, si, rowsPerBlock); ok || err != nil {
		return err
	}
	if f := k.gemv5(w, g, si, true); f != 0 {
		rowsPerBlock = (8 >> si) * 4
		return k.launch(t, f, Dim3{X: (w.Rows + rowsPerBlock - 1) / rowsPerBlock, Y: G}, Dim3{X: 256}, s, a)
	}
	return k.launch(t, k.gemv2g[w.DType][g][si], Dim3{X: (w.Rows + rowsPerBlock - 1) / rowsPerBlock, Y: G}, Dim3{X: 256}, s, a)
}

// gemv5 returns gemv3.cu's gemv5 entry (4 rows a warp, 8 tokens a pass,
// gemv2's bits at split index si) for w at token group g, if t8R4 is set
// and there is one (BF16 and FP8 at 8 tokens a pass); 0 otherwise.
func (k *Kernels) gemv5(w *Matrix, g, si int, grouped bool) Func {
	if !k.t8R4 || g != 3 || (w.DType != compute.BF16 && w.DType != compute.FP8) {
		return 0
	}
	name := fmt.Sprintf("gemv5_%s_t8_s%d", dtypeNames[w.DType], 1<<si)
	if grouped {
		name += "_g"
	}
	return k.fns[name]
}

// gemv2Group is the index of the tokens a pass (1, 2, 4, 8) gemv2 takes
// for T tokens: 8 from T = 8 (run 3 had 4: two passes over the weights
// at batch 8). gemv.cu's kernels have the first three. Every token's sums
// are the same whatever the group.
func gemv2Group(T int) int {
	switch {
	case T == 1:
		return 0
	case T == 2:
		return 1
	case T < 8:
		return 2
	}
	return 3
}

// gemvRows is the rows of W per block of the GEMV kernels (GEMV_ROWS).
const gemvRows = 4

// gemv2Split returns the index of the split (1, 2, 4, 8 warps per row
// group) of gemv2.cu for a matrix of rows rows of nch 16-byte chunks, and
// the rows a block then computes: the smallest split that makes 256
// blocks, while every warp keeps two chunks of each row. It depends on
// the shape alone, so that the reduction order does too.
func gemv2Split(rows, nch int) (index, rowsPerBlock int) { return gemvSplitR(rows, nch, 2) }

// gemvSplitR is gemv2Split for rowsPerWarp rows a warp.
func gemvSplitR(rows, nch, rowsPerWarp int) (index, rowsPerBlock int) {
	const warps, targetBlocks = 8, 256
	for index < 3 {
		groupRows := (warps >> index) * rowsPerWarp
		if (rows+groupRows-1)/groupRows >= targetBlocks || 2*32*(2<<index) > nch {
			break
		}
		index++
	}
	return index, (warps >> index) * rowsPerWarp
}

// matMulGEMM is the tensor-core product (bfloat16 activations).
func (k *Kernels) matMulGEMM(t *Thread, s Stream, y, x Ptr, T int, w *Matrix) error {
	if err := checkMatMul(T, w); err != nil || T == 0 {
		return err
	}
	wvec, xvec := 0, 0
	if w.vec() {
		wvec = 1
	}
	if w.Cols%4 == 0 {
		xvec = 1
	}
	a := t.Args().Ptr(y).Ptr(x).Ptr(w.Data).Ptr(w.Scale).Int(w.Rows).Int(w.Cols).Int(T).
		Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols()).Int(wvec).Int(xvec)
	return k.launch(t, k.gemm[w.DType], Dim3{X: (w.Rows + 127) / 128, Y: (T + 127) / 128}, Dim3{X: 256}, s, a)
}

// gemmx.cu's tiles: 128 rows of W by 64 tokens by 32 columns, 4 stages of
// copies in flight (XM, XN, XK, XSTAGES).
const (
	gemmxRows, gemmxTokens, gemmxCols, gemmxStages = 128, 64, 32, 4
	// gemmxBlocks is about two waves of blocks on an H200 (132 SMs, two
	// blocks each): the split of K is chosen to reach it with one tile of
	// tokens. It is a constant, not the device's count, so that the bits
	// depend on the shapes alone.
	gemmxBlocks = 264
	// gemmxMaxSplits bounds the parts of K; each part has at least
	// gemmxMinTiles tiles of 32 columns.
	gemmxMaxSplits, gemmxMinTiles = 16, 8
)

// gemmxShared is gemmx's dynamic shared memory for weights of format d:
// the stages (split activations at the padded stride, raw weights), then
// two decoded weight tiles (FP8 and FP4; BF16 weights are read where they
// land).
func gemmxShared(d compute.DType) int {
	const stride = 40 // XS, in bfloat16s
	act := 2 * gemmxTokens * stride * 2
	switch d {
	case compute.FP8:
		return gemmxStages*(act+256*16) + 2*gemmxRows*stride*2
	case compute.FP4:
		return gemmxStages*(act+256*8) + 2*gemmxRows*stride*2
	}
	return gemmxStages * (act + gemmxRows*stride*2)
}

// gemmxSplits is the number of equal parts gemmx cuts K into for a
// product of rowBlocks blocks of 128 rows (all groups) and K columns: the
// largest power of two up to gemmxMaxSplits that keeps gemmxMinTiles
// tiles a part, divides the tiles, and keeps rowBlocks·S within
// gemmxBlocks. It depends on the shape alone, never on T.
func gemmxSplits(rowBlocks, K int) int {
	tiles := K / gemmxCols
	S := 1
	for 2*S <= gemmxMaxSplits && tiles%(2*S) == 0 && tiles/(2*S) >= gemmxMinTiles && rowBlocks*2*S <= gemmxBlocks {
		S *= 2
	}
	return S
}

// gemmxPartsApart is the number of parts whose sums gemmx writes apart
// (per == 1, for gemmx_reduce) in a product of rowBlocks row blocks over K
// columns for T tokens, or 0 when one block runs all of them: apart only
// when a tile of tokens leaves the device short of blocks. Either way
// gives the same bits.
func gemmxPartsApart(rowBlocks, K, T int) int {
	if S := gemmxSplits(rowBlocks, K); S > 1 && rowBlocks*blocks(T, gemmxTokens) < gemmxBlocks {
		return S
	}
	return 0
}

// gemmxFits reports whether gemmx computes w's products: BF16, FP8 or FP4
// rows of 16-byte chunks, K a multiple of 32, the kernel loaded.
func (k *Kernels) gemmxFits(w *Matrix) bool {
	return int(w.DType) < len(k.gemmx) && k.gemmx[w.DType] != 0 && k.tensorCores && w.vec() && w.Cols%gemmxCols == 0
}

// splitX queues split_bf16x: x's n values as hi = bf16(x) and lo =
// bf16(x - hi), two arrays of n bfloat16s (gemmx's operands).
func (k *Kernels) splitX(t *Thread, s Stream, xh, xl, x Ptr, n int) error {
	a := t.Args().Ptr(xh).Ptr(xl).Ptr(x).Int(n)
	return k.launch(t, k.fns["split_bf16x"], Dim3{X: blocks(n, 256)}, Dim3{X: 256}, s, a)
}

// gemvxFits reports whether gemvx (gemvx.cu) takes w: FP8 or BF16 with K
// a multiple of 64 (FP8: scale blocks of whole 16-column chunks), on a
// device with bfloat16 tensor cores.
func (k *Kernels) gemvxFits(w *Matrix) bool {
	if w.Cols%64 != 0 || !k.tensorCores || k.fns["gemvx_fp8"] == 0 || k.fns["gemvx_bf16"] == 0 {
		return false
	}
	return w.DType == compute.BF16 || (w.DType == compute.FP8 && w.BlockCols%16 == 0 && w.BlockRows > 0)
}

// gemvx queues gemvx's product (Fast numerics, 1 to 8 tokens) of the G
// matrices of tab (or w alone, G = 1, tab 0), all of w's shape and format:
// y[t·ldy + g·ygs + r] = W_g·x[t·ldx + g·xgs + ...] for T ≤ 8 tokens.
func (k *Kernels) gemvx(t *Thread, s Stream, y Ptr, ldy, ygs int, x Ptr, ldx, xgs, T int, w *Matrix, G int, tab Ptr) error {
	if T < 1 || T > 8 {
		return fmt.Errorf("cuda: gemvx of %d tokens (1 to 8)", T)
	}
	var data, scale Ptr
	if tab == 0 {
		data, scale = w.Data, w.Scale
	}
	if _, _, ok := fp8Shifts(w); ok && w.Cols <= k.gemvxpCols {
		return k.gemvxpAt(t, s, y, ldy, ygs, x, ldx, xgs, T, w, G, tab, 0)
	}
	a := t.Args().Ptr(y).Int(ldy).Int(ygs).Ptr(x).Int(ldx).Int(xgs).Ptr(data).Ptr(scale).Ptr(tab).Int(w.Rows).Int(w.Cols).
		Int(T).Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols()).Int(map[bool]int{true: 1}[w.NaNFree])
	name, rows := "gemvx_"+dtypeNames[w.DType], 32
	if k.gemvxM1 == 1 || (k.gemvxM1 == 0 && G*((w.Rows+31)/32) < gemvxBlocks) {
		name, rows = name+"_m1", 16
	}
	return k.launch(t, k.fns[name], Dim3{X: (w.Rows + rows - 1) / rows, Y: G}, Dim3{X: 256}, s, a)
}

// The defaults of Kernels.gemvpV and Kernels.gemvxpCols.
const (
	gemvpVDefault     = 2
	gemvxpColsDefault = 1024
)

// gemvxBlocks: gemvx takes tiles of 16 rows a block (its _m1 entries, the
// same bits) where tiles of 32 would make fewer blocks than this.
const gemvxBlocks = 256

// matMulX queues gemmx's product (gemmx.cu: Fast numerics) of the G
// matrices of tab (or w alone, G = 1, tab 0), all of w's shape and
// format: y[t·ldy + g·ygs + r] = W_g·x[t·ldx + g·xgs + ...] for T tokens,
// x given as splitX's xh and xl (bfloat16, 16-byte aligned). part, when
// not 0, is room for G·S·T·w.Rows floats (S = gemmxSplits): the parts of
// K then run in separate blocks and gemmx_reduce adds them (the same
// bits). ldx and xgs must be multiples of 8.
func (k *Kernels) matMulX(t *Thread, s Stream, y Ptr, ldy, ygs int, xh, xl Ptr, ldx, xgs, T int, w *Matrix, G int, tab, part Ptr) error {
	if err := checkMatMul(T, w); err != nil || T == 0 {
		return err
	}
	if !k.gemmxFits(w) || ldx%8 != 0 || xgs%8 != 0 {
		return fmt.Errorf("cuda: gemmx cannot take a %v %dx%d product (x rows %d apart)", w.DType, w.Rows, w.Cols, ldx)
	}
	M, K := w.Rows, w.Cols
	S := gemmxSplits(G*blocks(M, gemmxRows), K)
	per := S
	if part != 0 {
		per = 1
	}
	a := t.Args().Ptr(y).Ptr(part).Ptr(xh).Ptr(xl).Ptr(w.Data).Ptr(w.Scale).Ptr(tab).Int(M).Int(K).Int(T).Int(ldx).Int(xgs).
		Int(ldy).Int(ygs).Int(max(w.BlockRows, 1)).Int(max(w.BlockCols, 1)).Int(w.scaleCols()).Int(S).Int(per).
		Int(map[bool]int{true: 1}[w.NaNFree && G == 1])
	grid := Dim3{X: blocks(M, gemmxRows), Y: blocks(T, gemmxTokens), Z: G * (S / per)}
	f := k.gemmx[w.DType]
	if k.useO1 && k.gemmxO1[w.DType] != 0 {
		f = k.gemmxO1[w.DType]
	}
	if k.useR22 && w.DType == compute.FP8 && k.gemmxFP8R22 != 0 {
		f = k.gemmxFP8R22
	}
	if err := t.Launch(f, grid, Dim3{X: 256}, gemmxShared(w.DType), s, a); err != nil {
		return err
	}
	if per == S {
		return nil
	}
	a = t.Args().Ptr(y).Ptr(part).Int(M).Int(T).Int(S).Int(ldy).Int(ygs)
	return k.launch(t, k.fns["gemmx_reduce"], Dim3{X: blocks(T*M, 256), Y: G}, Dim3{X: 256}, s, a)
}

// RMSNorm queues y[t] = w ⊙ x[t] / sqrt(mean(x[t]²) + eps) for T rows of
// width n; w == 0 means no weight; y may be x.
func (k *Kernels) RMSNorm(t *Thread, s Stream, y, x, w Ptr, T, n int, eps float32) error {
	if T <= 0 || n <= 0 {
		return nil
	}
	a := t.Args().Ptr(y).Ptr(x).Ptr(w).Int(n).F32(eps)
	return k.launch(t, k.rmsnorm, Dim3{X: T}, Dim3{X: 256}, s, a)
}

// RoPE queues the rotation, in each of the T rows of width n of x, of the
// interleaved pairs of the last 2*nf channels by pos[t]*invFreq[i] (pos:
// T int32s, invFreq: nf float32s), by the negative angle when inverse.
func (k *Kernels) RoPE(t *Thread, s Stream, x Ptr, T, n int, pos, invFreq Ptr, nf int, inverse bool) error {
	if 2*nf > n {
		return fmt.Errorf("cuda: RoPE rotates %d channels of rows of width %d", 2*nf, n)
	}
	if T <= 0 || nf <= 0 {
		return nil
	}
	inv := 0
	if inverse {
		inv = 1
	}
	a := t.Args().Ptr(x).Int(n).Ptr(pos).Ptr(invFreq).Int(nf).Int(inv)
	return k.launch(t, k.rope, Dim3{X: T, Y: (nf + 255) / 256}, Dim3{X: 256}, s, a)
}

// Softmax queues the replacement of each of the T rows of width n of x by
// its softmax.
func (k *Kernels) Softmax(t *Thread, s Stream, x Ptr, T, n int) error {
	if T <= 0 || n <= 0 {
		return nil
	}
	threads := min(1024, max(32, (n+31)/32*32))
	return k.launch(t, k.softmax, Dim3{X: T}, Dim3{X: threads}, s, t.Args().Ptr(x).Int(n))
}

// MaxTopK is the largest k TopK takes.
const MaxTopK = 1024

// TopK queues, for each of the rows of width n of x, the indices (int32)
// of its k largest values into idx[row*k:], largest first, ties to the
// lower index, NaN above every number.
func (k *Kernels) TopK(t *Thread, s Stream, idx, x Ptr, rows, n, kk int) error {
	return k.topK(t, s, idx, x, rows, n, kk, topkRegPays(n))
}

// topkThreads and topkRegs are topk.cu's TOPK_THREADS and TOPK_REGS:
// topk_reg holds rows of up to their product in registers.
const (
	topkThreads = 512
	topkRegs    = 36
)

// topkRegPays says whether TopK takes topk_reg4 or topk_reg for rows of
// n. Run 26 on an H100 (BenchmarkRows, one row, k = 512, against topk in
// the same process): topk_reg 28.8 / 33.0 us against 29.5 / 42.5 at
// 16640 entries (random / tied), but 12.2 / 14.6 against 9.9 / 13.8 at
// 1280 (its 36 loads and unrolled loops cost more than a short row's
// passes); topk_reg4 9.6 / 11.8 against 10.0 / 13.8 at 1280. Rows of
// 2049 to 4096 entries, measured by neither, keep topk.
func topkRegPays(n int) bool { return n <= 4*topkThreads || n > 4096 }

// topK is TopK by topk_reg4 or topk_reg where reg and the row fits one,
// else by topk (which reads the row in each pass): the same output.
func (k *Kernels) topK(t *Thread, s Stream, idx, x Ptr, rows, n, kk int, reg bool) error {
	if kk < 0 || kk > n || kk > MaxTopK {
		return fmt.Errorf("cuda: TopK of %d from rows of %d (at most %d)", kk, n, MaxTopK)
	}
	if rows <= 0 || kk == 0 {
		return nil
	}
	f := [3]Func{k.topk, k.topkReg, k.topkReg4}[topkForm(n, reg, k.topkReg != 0, k.topkReg4 != 0)]
	return k.launch(t, f, Dim3{X: rows}, Dim3{X: topkThreads}, s, t.Args().Ptr(idx).Ptr(x).Int(n).Int(kk))
}

// topkForm is the top-k kernel for rows of n: 2 topk_reg4, 1 topk_reg
// (where reg and the row fits one that is loaded), else 0 topk.
func topkForm(n int, reg, haveReg, haveReg4 bool) int {
	switch {
	case reg && n <= 4*topkThreads && haveReg4:
		return 2
	case reg && n <= topkRegs*topkThreads && haveReg:
		return 1
	}
	return 0
}

// topKSel is topK for IndexerSelect with indexer_fix's step in the same
// launch (topk_sel_body): row r's token, with (pos[r] + 1) / rate closed
// entries, takes all of them when they are at most kk (idx 0, 1, ...,
// then -1), else the top kk; cnt[r] is how many it took. The output of
// topK then indexer_fix.
func (k *Kernels) topKSel(t *Thread, s Stream, idx, x Ptr, rows, n, kk int, reg bool, cnt, pos Ptr, rate int) error {
	if kk <= 0 || kk > n || kk > MaxTopK || rate <= 0 {
		return fmt.Errorf("cuda: TopK of %d from rows of %d, rate %d (at most %d)", kk, n, rate, MaxTopK)
	}
	if rows <= 0 {
		return nil
	}
	f := k.topkSel[topkForm(n, reg, k.topkSel[1] != 0, k.topkSel[2] != 0)]
	if f == 0 {
		return fmt.Errorf("cuda: kernel topk_sel unavailable")
	}
	return k.launch(t, f, Dim3{X: rows}, Dim3{X: topkThreads}, s,
		t.Args().Ptr(idx).Ptr(x).Int(n).Int(kk).Ptr(cnt).Ptr(pos).Int(rate))
}

// Gather queues y[i] = x[idx[i]] for the m int32 indices at idx, rows of
// width n of x (which has rows rows); an index < 0 gives zeros, one >=
// rows NaNs.
func (k *Kernels) Gather(t *Thread, s Stream, y, x Ptr, rows, n int, idx Ptr, m int) error {
	if m <= 0 || n <= 0 {
		return nil
	}
	a := t.Args().Ptr(y).Ptr(x).Int(rows).Int(n).Ptr(idx)
	return k.launch(t, k.gather, Dim3{X: m, Y: (n + 255) / 256}, Dim3{X: 256}, s, a)
}
