package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// goldenPaths returns a golden case's logits along the full pass and the
// decode path ([full, decode]) on a new backend of mode, set up by setup
// before the model loads with opts.
func goldenPaths(t *testing.T, dir string, c *golden.Case, mode Mode, opts model.Options, setup func(*Backend)) [2][]float32 {
	t.Helper()
	be := newBackend(t, mode)
	setup(be)
	m, err := deepseekv4.LoadWith(dir, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	L := len(c.InputIDs)
	var out [2][]float32
	for j, feeds := range [][]int{{L}, golden.DecodeFeeds(c.Prompt, L)} {
		if out[j], err = golden.Feed(context.Background(), m, c.InputIDs, feeds); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// eachGoldenMode runs fn as a subtest for every case of names (repository
// paths) in strict and fast mode, the case loaded.
func eachGoldenMode(t *testing.T, names []string, fn func(t *testing.T, dir string, c *golden.Case, mode Mode)) {
	for _, name := range names {
		for _, mode := range []Mode{Strict, Fast} {
			t.Run(fmt.Sprintf("%s/%s", filepath.Base(name), modeName(mode)), func(t *testing.T) {
				dir := repoPath(t, name)
				c, err := golden.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				fn(t, dir, c, mode)
			})
		}
	}
}

// samePaths fails unless got and want (goldenPaths' logits) are the same
// bits on both paths; other names want's variant in the message.
func samePaths(t *testing.T, got, want [2][]float32, other string) {
	t.Helper()
	for j, path := range []string{"full", "decode"} {
		for i := range got[j] {
			if math.Float32bits(got[j][i]) != math.Float32bits(want[j][i]) {
				t.Fatalf("%s path logit %d: %g, %s %g", path, i, got[j][i], other, want[j][i])
			}
		}
	}
}

// TestBackendMatMuls: the products of one input in one launch (gemvm) give
// the logits of one launch a product (Backend.unmulti, run 6's launches)
// bit for bit, on the full and the decode paths, strict and fast.
func TestBackendMatMuls(t *testing.T) {
	eachGoldenMode(t, []string{"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4/quantized",
		"testdata/golden/deepseek-v4-extra/hc3-csa8"}, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		multi := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { var _ compute.MultiMatMul = be })
		one := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { be.unmulti = true })
		samePaths(t, multi, one, "one launch a product")
		fmt.Printf("MULTI %s %s: full and decode logits identical to one launch a product (max abs from the golden f32 logits %.3g)\n",
			filepath.Base(dir), modeName(mode), golden.MaxAbsDiff(multi[0], c.LogitsFull))
	})
}

// TestMatMuls: MatMuls (gemvm: up to 4 products of one input a launch)
// gives every product MatMul's bits, for FP8 and BF16 matrices of several
// heights (different GEMV splits, so several launches), T = 1, 3 and 8.
func TestMatMuls(t *testing.T) {
	for _, dt := range []compute.DType{compute.FP8, compute.BF16} {
		const K = 512
		rowsOf := []int{256, 128, 37, 512, 64, 130}
		ws := make([]*compute.Matrix, len(rowsOf))
		be := newBackend(t, Strict)
		for i, r := range rowsOf {
			ws[i], _ = testMatrix(rand.New(rand.NewPCG(uint64(r), uint64(dt))), dt, r, K, 128, 128)
			if err := be.Upload(ws[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, T := range []int{1, 3, 8} {
			x, err := be.Alloc(compute.F32, T, K)
			if err != nil {
				t.Fatal(err)
			}
			be.Write(x, randFloats(rand.New(rand.NewPCG(7, uint64(T))), T*K))
			var got [2][][]float32
			for side, unmulti := range []bool{false, true} {
				be.unmulti = unmulti
				ys := make([]compute.Tensor, len(ws))
				for i, w := range ws {
					if ys[i], err = be.Alloc(compute.F32, T, w.Rows); err != nil {
						t.Fatal(err)
					}
				}
				be.MatMuls(ys, x, ws)
				for i := range ys {
					v := make([]float32, T*ws[i].Rows)
					if err := be.Read(v, ys[i]); err != nil {
						t.Fatal(err)
					}
					got[side] = append(got[side], v)
					be.Free(ys[i])
				}
			}
			be.unmulti = false
			be.Free(x)
			for i := range ws {
				for j := range got[0][i] {
					if math.Float32bits(got[0][i][j]) != math.Float32bits(got[1][i][j]) {
						t.Fatalf("%v T=%d product %d (%d rows) value %d: MatMuls %g, MatMul %g", dt, T, i, rowsOf[i], j, got[0][i][j], got[1][i][j])
					}
				}
			}
		}
	}
}

// TestBackendAttentionSplits: tiny attention launches take logits in
// chunks of attnLogitChunk keys and give each attn_values (attn_pv) block
// half of a head's channels; both only spread the work over more blocks,
// so the logits must be those of chunks of 32 keys and whole heads bit for
// bit, on the full and the decode paths, strict and fast, with the 4-head
// kernels and the tiled ones.
func TestBackendAttentionSplits(t *testing.T) {
	eachGoldenMode(t, []string{"testdata/golden/deepseek-v4-extra/hca12-groups4"}, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		for _, tiled := range []bool{false, true} {
			split := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { be.attnTiledOff = !tiled })
			whole := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) {
				be.attnTiledOff = !tiled
				be.attnLogits32, be.attnValuesWhole = true, true
			})
			samePaths(t, split, whole, "with chunks of 32 keys and whole heads")
			fmt.Printf("ATTNSPLITS %s %s tiled=%v: full and decode logits identical with the small launches' splits and without\n", filepath.Base(dir), modeName(mode), tiled)
		}
	})
}

// TestBackendAttentionHeads: attention with 16 heads a block (the _h16
// entries, Backend.attnHG16) gives the logits of 4 heads a block
// (attnHG4) bit for bit, on the full and the decode paths, strict and fast
// (the untiled kernels: attnTiledOff).
func TestBackendAttentionHeads(t *testing.T) {
	// hca12-groups4 has 8 heads (two blocks of 4, or one of 16 with 8
	// used); flash-ratios 4. BenchmarkFlash's attn-hg4 line compares 64.
	eachGoldenMode(t, []string{"testdata/golden/deepseek-v4-extra/hca12-groups4", "testdata/golden/deepseek-v4/flash-ratios"}, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		h16 := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { be.attnTiledOff, be.attnHG16 = true, true })
		h4 := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { be.attnTiledOff, be.attnHG4 = true, true })
		samePaths(t, h16, h4, "with 4 heads a block")
		fmt.Printf("ATTNHEADS %s %s: full and decode logits identical with 16 and 4 heads a block (max abs from the golden f32 logits %.3g)\n",
			filepath.Base(dir), modeName(mode), golden.MaxAbsDiff(h16[0], c.LogitsFull))
	})
}

// TestBackendAttentionTiled: the tiled kernels (attn_qk's tiles of 4 keys
// × 8 heads with their reduce-scatter, attn_pv's 4 or 8 heads × 4
// channels a thread) give attn_logits' and attn_values' logits bit for
// bit, on the full and the decode paths, strict and fast: cases of 2, 4
// and 8 heads of 32 to 128 channels (48: a lane without a channel in the
// last round), with and without the compressor's selection.
func TestBackendAttentionTiled(t *testing.T) {
	cases := []string{"testdata/golden/deepseek-v4-extra/hca12-groups4", "testdata/golden/deepseek-v4-extra/hc3-csa8",
		"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4/quantized"}
	eachGoldenMode(t, cases, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		var on, off *Backend
		tiled := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { on = be })
		old := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { off, be.attnTiledOff = be, true })
		if on.attnTiledCalls == 0 || off.attnTiledCalls != 0 {
			t.Fatalf("tiled attention ran %d times by default and %d times with attnTiledOff", on.attnTiledCalls, off.attnTiledCalls)
		}
		samePaths(t, tiled, old, "with attn_logits and attn_values")
		fmt.Printf("ATTNTILED %s %s: full and decode logits identical with the tiled kernels and attn_logits/attn_values (max abs from the golden f32 logits %.3g)\n",
			filepath.Base(dir), modeName(mode), golden.MaxAbsDiff(tiled[0], c.LogitsFull))
	})
}
