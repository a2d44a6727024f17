package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// flashAttnCase is one SparseAttention call at DeepSeek-V4-Flash's width:
// T decoding tokens, each its own span with a full window (the step's own
// vector and W-1 ring slots) and compressed entries, all FP8KV slots.
type flashAttnCase struct {
	H, d, rope, W, rate, selK int
	pos                       []int
	q, kv, sink               []float32
	ring, comp                [][][]float32 // [span][slot] decoded values
	ringBytes, compBytes      [][][]byte
	sel                       []int32
	cnt                       []int32
	outRoPE                   []float32 // AttentionArgs.OutRoPE's inverse frequencies (nil: none)
}

func newFlashAttnCase(rng *rand.Rand, T, selK, rate, nComp int) *flashAttnCase {
	return newAttnCase(rng, 64, 512, 64, T, selK, rate, nComp)
}

// newAttnCase is newFlashAttnCase with H heads of d channels, rope of
// them turned.
func newAttnCase(rng *rand.Rand, H, d, rope, T, selK, rate, nComp int) *flashAttnCase {
	c := &flashAttnCase{H: H, d: d, rope: rope, W: 128, rate: rate, selK: selK}
	sb := quant.FP8KVBytes(c.d, c.rope)
	for s := range T {
		p := c.W + 40 + 37*s
		if selK == 0 {
			p = rate*(nComp-s%2) - 1 + s // (p+1)/rate closed entries
		}
		c.pos = append(c.pos, p)
	}
	c.q, c.kv, c.sink = randFloats(rng, T*c.H*c.d), randFloats(rng, T*c.d), randFloats(rng, c.H)
	slots := func(n int) ([][]float32, [][]byte) {
		vals, raw := make([][]float32, n), make([][]byte, n)
		for k := range n {
			raw[k] = make([]byte, sb)
			quant.EncodeFP8KV(raw[k], randFloats(rng, c.d), c.rope)
			vals[k] = make([]float32, c.d)
			quant.DecodeFP8KV(vals[k], raw[k], c.rope)
		}
		return vals, raw
	}
	for range T {
		v, r := slots(c.W)
		c.ring, c.ringBytes = append(c.ring, v), append(c.ringBytes, r)
		v, r = slots(nComp)
		c.comp, c.compBytes = append(c.comp, v), append(c.compBytes, r)
	}
	if selK > 0 {
		c.sel, c.cnt = make([]int32, T*selK), make([]int32, T)
		for s := range T {
			n := selK - 9*(s%2) // some tokens select fewer than selK
			c.cnt[s] = int32(n)
			for i := range selK {
				c.sel[s*selK+i] = -1
				if i < n {
					c.sel[s*selK+i] = int32(rng.IntN(nComp))
				}
			}
		}
	}
	return c
}

// keys returns token s's keys in attention's order: the window's
// positions (the ring's, then the step's own vector), then the compressed
// entries.
func (c *flashAttnCase) keys(s int) [][]float32 {
	p := c.pos[s]
	var keys [][]float32
	for kpos := max(0, p-c.W+1); kpos < p; kpos++ {
		keys = append(keys, c.ring[s][kpos%c.W])
	}
	keys = append(keys, c.kv[s*c.d:(s+1)*c.d])
	if c.sel != nil {
		for _, e := range c.sel[s*c.selK : s*c.selK+int(c.cnt[s])] {
			keys = append(keys, c.comp[s][e])
		}
	} else {
		for e := range (p + 1) / c.rate {
			keys = append(keys, c.comp[s][e])
		}
	}
	return keys
}

// ref is the float64 definition and each output's sum of magnitudes.
func (c *flashAttnCase) ref() (want, l1 []float64) {
	H, d, T := c.H, c.d, len(c.pos)
	want, l1 = make([]float64, T*H*d), make([]float64, T*H*d)
	for s := range T {
		keys := c.keys(s)
		for h := range H {
			q := c.q[(s*H+h)*d : (s*H+h+1)*d]
			lg := make([]float64, len(keys))
			mx := float64(c.sink[h])
			for k, key := range keys {
				var v float64
				for j := range d {
					v += float64(q[j]) * float64(key[j])
				}
				lg[k] = v / math.Sqrt(float64(d))
				mx = max(mx, lg[k])
			}
			den := math.Exp(float64(c.sink[h]) - mx)
			for k := range lg {
				lg[k] = math.Exp(lg[k] - mx)
				den += lg[k]
			}
			for k, key := range keys {
				for j := range d {
					want[(s*H+h)*d+j] += lg[k] / den * float64(key[j])
					l1[(s*H+h)*d+j] += math.Abs(lg[k] / den * float64(key[j]))
				}
			}
		}
	}
	return want, l1
}

// run uploads the case to be, runs SparseAttention and returns Out.
func (c *flashAttnCase) run(t *testing.T, be *Backend) []float32 {
	t.Helper()
	H, d, T := c.H, c.d, len(c.pos)
	mark := be.ScratchMark()
	defer be.ResetScratch(mark)
	f32 := func(v []float32, rows, cols int) compute.Tensor {
		x := be.Scratch(compute.F32, rows, cols)
		if v != nil {
			be.Write(x, v)
		}
		return x
	}
	i32 := func(v []int32, rows, cols int) compute.Tensor {
		x := be.Scratch(compute.I32, rows, cols)
		be.Write(x, v)
		return x
	}
	// A pool of pages of perPage slots, span s's pages in reverse order.
	const perPage = 16
	paged := func(raw [][][]byte) compute.Paged {
		sb := len(raw[0][0])
		pagesPer := (len(raw[0]) + perPage - 1) / perPage
		n := T * pagesPer
		pool := make([]byte, n*perPage*sb)
		table := make([]int32, n)
		for s := range T {
			for i := range pagesPer {
				pg := n - 1 - (s*pagesPer + i)
				table[s*pagesPer+i] = int32(pg)
				for k := i * perPage; k < min((i+1)*perPage, len(raw[s])); k++ {
					copy(pool[pg*perPage*sb+(k-i*perPage)*sb:], raw[s][k])
				}
			}
		}
		pt := be.Scratch(compute.U8, n, perPage*sb)
		be.Write(pt, pool)
		return compute.Paged{Pool: pt, Pages: i32(table, T, pagesPer), PerPage: perPage, SlotBytes: sb,
			Format: compute.SlotFP8KV, Width: d, Rope: c.rope}
	}
	tab := make([]int32, 0, 3*T)
	pos := make([]int32, T)
	for s, p := range c.pos {
		tab = append(tab, int32(s), 1, int32(p))
		pos[s] = int32(p)
	}
	out := f32(nil, T, H*d)
	a := &compute.AttentionArgs{Out: out, Q: f32(c.q, T, H*d), KV: f32(c.kv, T, d), Window: paged(c.ringBytes), WindowSize: c.W,
		Compressed: paged(c.compBytes), Rate: c.rate, Sink: f32(c.sink, 1, H), Heads: H, Dim: d, Scale: float32(1 / math.Sqrt(float64(d)))}
	if c.sel != nil {
		a.Sel, a.N = i32(c.sel, T, c.selK), i32(c.cnt, T, 1)
	}
	if c.outRoPE != nil {
		a.OutRoPE = f32(c.outRoPE, 1, len(c.outRoPE))
	}
	be.SparseAttention(a, compute.Spans{Tab: i32(tab, T, 3), Pos: i32(pos, T, 1)})
	got := make([]float32, T*H*d)
	if err := be.Read(got, out); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestBackendAttentionFlash: at the Flash width (64 heads of 512 channels,
// FP8KV window and compressed slots, with and without the indexer's
// selection) the tiled kernels (16 heads a block: attn_qk's two head tiles
// a block, attn_pv8 and, at one and two tokens, attn_pv4 on half or a
// quarter of the channels; attn_qk with 8 heads or a warp a tile, attn_qk8's
// tiles of 8 keys (from 3 tokens) against attn_qk's of 4, chunks of 8 keys;
// attn_combine in run 21's form) give the 4- and 16-head kernels' outputs bit for bit, split over blocks
// and not, and are the float64 definition
// within 2e-5 of each output's sum of magnitudes.
func TestBackendAttentionFlash(t *testing.T) {
	be := newBackend(t, Strict)
	rng := rand.New(rand.NewPCG(9, 17))
	for _, tc := range []struct{ T, selK, rate, nComp int }{{1, 48, 4, 60}, {3, 48, 4, 60}, {2, 0, 16, 12}, {5, 0, 16, 12}} {
		name := fmt.Sprintf("T %d selK %d rate %d", tc.T, tc.selK, tc.rate)
		c := newFlashAttnCase(rng, tc.T, tc.selK, tc.rate, tc.nComp)
		calls := be.attnTiledCalls
		tiled := c.run(t, be)
		if be.attnTiledCalls != calls+1 {
			t.Fatalf("%s: SparseAttention did not take the tiled kernels", name)
		}
		want, l1 := c.ref()
		for i, g := range tiled {
			if e := math.Abs(float64(g) - want[i]); !(e <= 2e-5*l1[i]+1e-7) {
				t.Fatalf("%s: output %d = %g, float64 %g (sum of magnitudes %g)", name, i, g, want[i], l1[i])
			}
		}
		for _, v := range []struct {
			name           string
			off, noSplit   bool
			hg16, logits32 bool
		}{{"4-head kernels", true, false, false, false}, {"16-head kernels", true, false, true, false},
			{"tiled, unsplit", false, true, false, false}, {"4-head kernels, unsplit", true, true, false, false},
			{"tiled, chunks of 32 keys and whole heads", false, false, false, true}, {"tiled, quarter heads", false, false, false, false},
			{"tiled, 8 heads a logits block", false, false, false, false}, {"tiled, a warp a logits tile", false, false, false, false},
			{"tiled, run 21's attn_combine", false, false, false, false}, {"tiled, 4-key logits tiles", false, false, false, false},
			{"tiled, logits chunks of 8 keys", false, false, false, false}} {
			be.attnTiledOff, be.attnNoSplit, be.attnHG16 = v.off, v.noSplit, v.hg16
			be.attnLogits32, be.attnValuesWhole = v.logits32, v.logits32
			if v.name == "tiled, quarter heads" {
				be.attnTinyDS = 4
			}
			be.attnQKHB8 = v.name == "tiled, 8 heads a logits block"
			be.attnQKTiles = v.name == "tiled, a warp a logits tile"
			be.attnCombineR21 = v.name == "tiled, run 21's attn_combine"
			be.attnQK4 = v.name == "tiled, 4-key logits tiles"
			if v.name == "tiled, logits chunks of 8 keys" {
				be.attnQKKB = 8
			}
			got := c.run(t, be)
			be.attnQK4, be.attnQKKB = false, 0
			be.attnTiledOff, be.attnNoSplit, be.attnHG16, be.attnLogits32, be.attnValuesWhole = false, false, false, false, false
			be.attnTinyDS, be.attnQKHB8, be.attnQKTiles, be.attnCombineR21 = 0, false, false, false
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(tiled[i]) {
					t.Fatalf("%s: output %d: tiled %g, %s %g", name, i, tiled[i], v.name, got[i])
				}
			}
		}
		fmt.Printf("ATTNFLASH %s: tiled = 4-head = 16-head kernels bit for bit, split and not; within 2e-5 of float64\n", name)
	}
}

// TestBackendAttentionOutRoPE: with OutRoPE, SparseAttention's output is
// its output without, each head's last 2·nf channels turned back at the
// token's position (rope_heads' inverse turn): in attn_combine where the
// launch splits, the same bits as rope_heads after it (attnRoPEApart) and
// as the unsplit path's; and those values are the turn computed here.
func TestBackendAttentionOutRoPE(t *testing.T) {
	be := newBackend(t, Strict)
	rng := rand.New(rand.NewPCG(5, 23))
	for _, tc := range []struct{ T, selK, rate, nComp int }{{1, 48, 4, 60}, {3, 0, 16, 12}} {
		name := fmt.Sprintf("T %d selK %d rate %d", tc.T, tc.selK, tc.rate)
		c := newFlashAttnCase(rng, tc.T, tc.selK, tc.rate, tc.nComp)
		plain := c.run(t, be)
		c.setOutRoPE()
		nf := len(c.outRoPE)
		fused := c.run(t, be)
		be.attnRoPEApart = true
		apart := c.run(t, be)
		be.attnRoPEApart, be.attnNoSplit = false, true
		unsplit := c.run(t, be)
		be.attnNoSplit = false
		inv := c.outRoPE
		c.outRoPE = nil
		for i := range fused {
			if math.Float32bits(fused[i]) != math.Float32bits(apart[i]) || math.Float32bits(fused[i]) != math.Float32bits(unsplit[i]) {
				t.Fatalf("%s: output %d: turned in attn_combine %g, by rope_heads after %g, unsplit %g", name, i, fused[i], apart[i], unsplit[i])
			}
		}
		turned := 0
		for r := range tc.T * c.H {
			p := c.pos[r/c.H]
			row := r * c.d
			for i := range c.d {
				want := float64(plain[row+i])
				if k := i - (c.d - 2*nf); k >= 0 {
					// The kernels' float32 angle, its cosine and sine in float64.
					ang := float64(float32(p) * inv[k/2])
					cs, sn := math.Cos(ang), -math.Sin(ang)
					pair := row + c.d - 2*nf + k - k%2
					a, b := float64(plain[pair]), float64(plain[pair+1])
					if k%2 == 0 {
						want = a*cs - b*sn
					} else {
						want = b*cs + a*sn
					}
					turned++
				}
				if e := math.Abs(float64(fused[row+i]) - want); !(e <= 1e-5*(math.Abs(want)+1e-3)) {
					t.Fatalf("%s: row %d channel %d = %g, want %g (unturned %g)", name, r, i, fused[row+i], want, plain[row+i])
				}
			}
		}
		fmt.Printf("ATTNROPE %s: %d channels turned back in attn_combine, the same bits as rope_heads after and unsplit, within 1e-5 of float64\n", name, turned)
	}
}

// TestBackendAttentionTC: in Fast mode, SparseAttention of up to attnTCMaxT
// tokens takes attn_tc (one launch on the tensor cores, operands as
// bfloat16 hi + lo, each chunk of 64 keys against its own maximum, the
// chunks added by the token's last block), whose outputs are the float64
// definition within 1e-4 of each output's sum of magnitudes (the logits
// without the lo halves miss that: 2.6e-4 at the first output, checked
// on the emulator), with OutRoPE's
// turn where asked; one chunk (51 keys) and several (176: three, their
// counters reset for the next launch: a second run gives the same bits);
// 64 heads of 512 channels, 4 of 128, and 20 of 96 (a block of 16 heads
// and one of 4); and the float32 kernels again with attnTCOff.
func TestBackendAttentionTC(t *testing.T) {
	be := newBackend(t, Fast)
	be.attnFDMaxT = 0 // whatever STRATA_CUDA_ATTN_FD says: attn_fd would take one token
	if be.attnTCTakes(1, 64, 512, 176) || !be.attnTCTakes(2, 64, 512, 176) {
		t.Fatalf("Fast attention at the Flash width: attn_tc at one token %v, at two %v; want from two", be.attnTCTakes(1, 64, 512, 176), be.attnTCTakes(2, 64, 512, 176))
	}
	be.attnTCMinT = 1
	if !be.attnTCTakes(1, 64, 512, 176) {
		t.Fatalf("Fast attention of one token at the Flash width does not take attn_tc")
	}
	rng := rand.New(rand.NewPCG(4, 41))
	for _, tc := range []struct {
		H, d, rope, T, selK, rate, nComp int
		turn                             bool
	}{{64, 512, 64, 1, 48, 4, 60, false}, {64, 512, 64, 1, 0, 16, 3, false}, {64, 512, 64, 3, 48, 4, 60, true},
		{64, 512, 64, 2, 0, 16, 12, false}, {64, 512, 64, 8, 48, 4, 60, true},
		{4, 128, 64, 2, 48, 4, 60, true}, {20, 96, 32, 3, 0, 16, 12, true}} {
		name := fmt.Sprintf("H %d d %d T %d selK %d rate %d turn %v", tc.H, tc.d, tc.T, tc.selK, tc.rate, tc.turn)
		c := newAttnCase(rng, tc.H, tc.d, tc.rope, tc.T, tc.selK, tc.rate, tc.nComp)
		launches := be.attnTCLaunches
		got := c.run(t, be)
		again := c.run(t, be)
		if be.attnTCLaunches != launches+2 {
			t.Fatalf("%s: SparseAttention did not take attn_tc", name)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(again[i]) {
				t.Fatalf("%s: output %d: %g, then %g", name, i, got[i], again[i])
			}
		}
		want, l1 := c.ref()
		if tc.turn {
			// The float64 definition's last 2·nf channels turned back, and
			// the kernel's again with the turn.
			c.setOutRoPE()
			got = c.run(t, be)
			c.turnRef(want, l1)
		}
		worst := 0.0
		for i, g := range got {
			e := math.Abs(float64(g)-want[i]) / (l1[i] + 1e-6)
			if !(e <= 1e-4) {
				t.Fatalf("%s: output %d = %g, float64 %g (sum of magnitudes %g)", name, i, g, want[i], l1[i])
			}
			worst = max(worst, e)
		}
		be.attnTCOff = true
		c.outRoPE = nil
		c.run(t, be)
		be.attnTCOff = false
		if be.attnTCLaunches != launches+2+map[bool]int{true: 1}[tc.turn] {
			t.Fatalf("%s: attnTCOff did not take the float32 kernels", name)
		}
		fmt.Printf("ATTNTC %s: within %.3g of each output's sum of magnitudes (float64), the same bits twice\n", name, worst)
	}
}

// setOutRoPE asks for the output's last rope channels turned back
// (AttentionArgs.OutRoPE) at RoPE's inverse frequencies, base 10000.
func (c *flashAttnCase) setOutRoPE() {
	c.outRoPE = make([]float32, c.rope/2)
	for i := range c.outRoPE {
		c.outRoPE[i] = float32(math.Pow(10000, -2*float64(i)/float64(c.rope)))
	}
}

// turnRef turns ref's float64 outputs (want) back as OutRoPE asks, each
// pair's sums of magnitudes (l1) made the pair's total.
func (c *flashAttnCase) turnRef(want, l1 []float64) {
	nf := len(c.outRoPE)
	for r := range len(c.pos) * c.H {
		row, p := r*c.d, c.pos[r/c.H]
		for k := 0; k < 2*nf; k += 2 {
			ang := float64(float32(p) * c.outRoPE[k/2])
			cs, sn := math.Cos(ang), -math.Sin(ang)
			i := row + c.d - 2*nf + k
			a, b := want[i], want[i+1]
			want[i], want[i+1] = a*cs-b*sn, b*cs+a*sn
			l1[i] += l1[i+1]
			l1[i+1] = l1[i]
		}
	}
}

// token is the one-token case of c's token s: its query, key vector,
// window, compressed entries and selection.
func (c *flashAttnCase) token(s int) *flashAttnCase {
	H, d := c.H, c.d
	o := &flashAttnCase{H: H, d: d, rope: c.rope, W: c.W, rate: c.rate, selK: c.selK, pos: []int{c.pos[s]},
		q: c.q[s*H*d : (s+1)*H*d], kv: c.kv[s*d : (s+1)*d], sink: c.sink,
		ring: c.ring[s : s+1], comp: c.comp[s : s+1], ringBytes: c.ringBytes[s : s+1], compBytes: c.compBytes[s : s+1],
		outRoPE: c.outRoPE}
	if c.sel != nil {
		o.sel, o.cnt = c.sel[s*c.selK:(s+1)*c.selK], c.cnt[s:s+1]
	}
	return o
}

// TestBackendAttentionFD: in Fast mode with attnFDMaxT set, SparseAttention
// takes attn_fd (one launch on the CUDA cores: blocks of 4 heads × 32 keys
// of one token, each chunk against its own maximum, the chunks added by
// the token's last block), whose outputs are the float64 definition within
// 2e-6 of each output's sum of magnitudes (4.1e-7 at most on the
// emulator), with OutRoPE's turn where
// asked. Cases: one chunk (17 keys), two (51), six (176); 64 heads of 512
// channels, 4 of 128, 22 of 96 (a last block of 2 heads), 8 of 40; a
// second run gives the same bits (the counters reset), so do blocks of 2
// and 8 heads (attn_fd_h2, attn_fd_h8), and every token of a batch the
// bits it has alone (batch-invariant); and attnFDMaxT bounds it.
func TestBackendAttentionFD(t *testing.T) {
	be := newBackend(t, Fast)
	be.attnFDMaxT = 0
	if be.attnFDTakes(1, 64, 512, 176) {
		t.Fatalf("attnFDMaxT 0 takes attn_fd")
	}
	be.attnFDMaxT = 8
	if !be.attnFDTakes(1, 64, 512, 176) || !be.attnFDTakes(8, 64, 512, 176) || be.attnFDTakes(9, 64, 512, 176) {
		t.Fatalf("attnFDMaxT 8: attn_fd at 1, 8 and 9 tokens %v %v %v; want at 1 and 8", be.attnFDTakes(1, 64, 512, 176),
			be.attnFDTakes(8, 64, 512, 176), be.attnFDTakes(9, 64, 512, 176))
	}
	if be.attnFDTakes(1, 64, 512, afdChunk*afdSMax+1) {
		t.Fatalf("attn_fd takes more than %d chunks a token", afdSMax)
	}
	rng := rand.New(rand.NewPCG(7, 53))
	for _, tc := range []struct {
		H, d, rope, T, selK, rate, nComp int
		turn                             bool
	}{{64, 512, 64, 1, 48, 4, 60, false}, {64, 512, 64, 1, 0, 16, 1, false}, {64, 512, 64, 1, 0, 16, 3, true},
		{64, 512, 64, 3, 48, 4, 60, true}, {4, 128, 64, 2, 48, 4, 60, true}, {22, 96, 32, 3, 0, 16, 12, true},
		{8, 40, 8, 2, 0, 16, 12, true}} {
		name := fmt.Sprintf("H %d d %d T %d selK %d rate %d turn %v", tc.H, tc.d, tc.T, tc.selK, tc.rate, tc.turn)
		c := newAttnCase(rng, tc.H, tc.d, tc.rope, tc.T, tc.selK, tc.rate, tc.nComp)
		want, l1 := c.ref()
		if tc.turn {
			// The float64 definition's last 2·nf channels turned back.
			c.setOutRoPE()
			c.turnRef(want, l1)
		}
		launches := be.attnFDLaunches
		got := c.run(t, be)
		again := c.run(t, be)
		if be.attnFDLaunches != launches+2 {
			t.Fatalf("%s: SparseAttention did not take attn_fd", name)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(again[i]) {
				t.Fatalf("%s: output %d: %g, then %g", name, i, got[i], again[i])
			}
		}
		worst := 0.0
		for i, g := range got {
			e := math.Abs(float64(g)-want[i]) / (l1[i] + 1e-6)
			if !(e <= 2e-6) {
				t.Fatalf("%s: output %d = %g, float64 %g (sum of magnitudes %g)", name, i, g, want[i], l1[i])
			}
			worst = max(worst, e)
		}
		for _, hg := range []int{2, 8} {
			be.afdHeads = hg
			other := c.run(t, be)
			be.afdHeads = afdHeads
			for i := range got {
				if math.Float32bits(other[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s: output %d: %g with blocks of %d heads, %g of %d", name, i, other[i], hg, got[i], afdHeads)
				}
			}
		}
		if tc.T > 1 {
			row := c.H * c.d
			for s := range tc.T {
				alone := c.token(s).run(t, be)
				for i, v := range alone {
					if math.Float32bits(v) != math.Float32bits(got[s*row+i]) {
						t.Fatalf("%s: token %d output %d: %g alone, %g in the batch", name, s, i, v, got[s*row+i])
					}
				}
			}
		}
		fmt.Printf("ATTNFD %s: within %.3g of each output's sum of magnitudes (float64), the same bits twice, at 2, 4 and 8 heads a block, and alone\n", name, worst)
	}
	be.attnFDMaxT = 0
	c := newAttnCase(rng, 4, 128, 64, 1, 0, 16, 3)
	launches := be.attnFDLaunches
	c.run(t, be)
	if be.attnFDLaunches != launches {
		t.Fatalf("attnFDMaxT 0 took attn_fd")
	}
}
