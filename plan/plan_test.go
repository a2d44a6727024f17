package plan

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// handbookLedger is the printed output of the ledger in
// spec/handbook-new-generation-models.txt ("新的 KV 账本"), verbatim.
const handbookLedger = `DeepSeek-V3.2：每 token 46.9 KB，每请求固定 0 MB；一个 128K 的请求 5.87 GB，1M 的请求 不支持
DeepSeek-V4-Flash：每 token 3.8 KB，每请求固定 15 MB；一个 128K 的请求 0.48 GB，1M 的请求 3.77 GB
DeepSeek-V4-Pro：每 token 5.4 KB，每请求固定 22 MB；一个 128K 的请求 0.69 GB，1M 的请求 5.40 GB
Kimi-K3：每 token 27.0 KB，每请求固定 414 MB；一个 128K 的请求 3.78 GB，1M 的请求 27.40 GB
Gemma 4 12B：每 token 8.0 KB，每请求固定 320 MB；一个 128K 的请求 1.31 GB，1M 的请求 不支持
Qwen3.5-0.8B：每 token 12.0 KB，每请求固定 19 MB；一个 128K 的请求 1.52 GB，1M 的请求 不支持`

// handbookAttended is the printed output of the handbook's attended() loop, verbatim.
const handbookAttended = `上下文     4,096：全注意力看     4,096 条；V4-Flash 的 C4 层看 640 条（索引器给   1,024 条打分），C128 层看   160 条，只有滑窗的层看 128 条
上下文   131,072：全注意力看   131,072 条；V4-Flash 的 C4 层看 640 条（索引器给  32,768 条打分），C128 层看 1,152 条，只有滑窗的层看 128 条
上下文 1,048,576：全注意力看 1,048,576 条；V4-Flash 的 C4 层看 640 条（索引器给 262,144 条打分），C128 层看 8,320 条，只有滑窗的层看 128 条`

var ledgerLine = regexp.MustCompile(`^(.+)：每 token (.+ KB)，每请求固定 (.+ MB)；一个 128K 的请求 (.+)，1M 的请求 (.+)$`)

// handbookRows parses handbookLedger into rows, "不支持" read as Unsupported.
func handbookRows(t *testing.T) []LedgerRow {
	t.Helper()
	var rows []LedgerRow
	for _, line := range strings.Split(handbookLedger, "\n") {
		m := ledgerLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cannot parse handbook line %q", line)
		}
		tr := func(s string) string {
			if s == "不支持" {
				return Unsupported
			}
			return s
		}
		rows = append(rows, LedgerRow{Name: m[1], PerToken: m[2], Fixed: m[3], At128K: tr(m[4]), At1M: tr(m[5])})
	}
	return rows
}

func TestLedgerReproducesHandbook(t *testing.T) {
	want := handbookRows(t)
	presets := Presets()
	if len(presets) != len(want) {
		t.Fatalf("%d presets, handbook has %d rows", len(presets), len(want))
	}
	var wantOut strings.Builder
	wantOut.WriteString(LedgerHeader + "\n")
	for i, w := range want {
		t.Run(w.Name, func(t *testing.T) {
			if got := presets[i].Ledger(); got != w {
				t.Errorf("ledger row\n got %+v\nwant %+v", got, w)
			}
		})
		wantOut.WriteString(w.String() + "\n")
	}
	var out bytes.Buffer
	if err := Ledger(&out, presets); err != nil {
		t.Fatal(err)
	}
	if out.String() != wantOut.String() {
		t.Errorf("Ledger output\n%s\nwant\n%s", out.String(), wantOut.String())
	}
	// The English line of the first row, spelled out once.
	if got, w := presets[1].Ledger().String(), "DeepSeek-V4-Flash: 3.8 KB per token, 15 MB fixed per request; a 128K request 0.48 GB, a 1M request 3.77 GB"; got != w {
		t.Errorf("row string %q, want %q", got, w)
	}
}

// TestPresetsMatchHandbookFormulas checks the unrounded bytes against the
// handbook's Python formulas, not just their rounding.
func TestPresetsMatchHandbookFormulas(t *testing.T) {
	v4 := func(c4, c128, swaOnly float64) (float64, int64) {
		perToken := c4*(584+132)/4 + c128*584/128
		swa := (c4 + c128 + swaOnly) * 128 * 584
		state := c4*8*(2*2*512+2*2*128)*4 + c128*128*(2*512)*4
		return perToken, int64(swa + state)
	}
	fp, ff := v4(21, 20, 2)
	pp, pf := v4(30, 31, 0)
	tests := []struct {
		name     string
		perToken float64
		fixed    int64
		max      int
	}{
		{DeepSeekV32, 61 * (656 + 132), 0, 163_840},
		{DeepSeekV4Flash, fp, ff, 1_048_576},
		{DeepSeekV4Pro, pp, pf, 1_048_576},
		{KimiK3, 24 * 576 * 2, 69 * 96 * 128 * 128 * 4, 1_048_576},
		{Gemma4_12B, 8 * 512 * 2, 40 * 1024 * 8 * 256 * 2 * 2, 262_144},
		{Qwen35_08B, 6 * 2 * 2 * 256 * 2, 18*16*128*128*4 + 18*6144*3*2, 262_144},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.BytesPerToken(); got != tc.perToken {
				t.Errorf("BytesPerToken = %v, want %v", got, tc.perToken)
			}
			if got := m.FixedBytes(); got != tc.fixed {
				t.Errorf("FixedBytes = %d, want %d", got, tc.fixed)
			}
			if m.MaxContext != tc.max {
				t.Errorf("MaxContext = %d, want %d", m.MaxContext, tc.max)
			}
			// At the ledger's lengths the exact count equals the formula.
			for _, n := range []int{Ledger128K, Ledger1M} {
				if float64(m.Bytes(n)) != m.LedgerBytes(n) {
					t.Errorf("Bytes(%d) = %d, LedgerBytes = %v", n, m.Bytes(n), m.LedgerBytes(n))
				}
			}
		})
	}
}

// TestExercise1 is the handbook's exercise 1: DeepSeek-V4-Pro at 256K.
func TestExercise1(t *testing.T) {
	m, err := Preset(DeepSeekV4Pro)
	if err != nil {
		t.Fatal(err)
	}
	const n = 256 * 1024
	// "每 token 约 5.4 KB（精确值 5511 B）": 30·716/4 + 31·584/128 = 5511.4375.
	if got := m.BytesPerToken(); got != 5511.4375 || int(got) != 5511 {
		t.Errorf("BytesPerToken = %v, want 5511.4375 (5511 B)", got)
	}
	if got := fmt.Sprintf("%.1f KB", m.BytesPerToken()/KB); got != "5.4 KB" {
		t.Errorf("per token %s, want 5.4 KB", got)
	}
	var window, state, growing int64
	for _, s := range m.Specs {
		switch {
		case s.Growing():
			growing += s.Bytes(n)
		case s.Name == deepseekv4.KindWindow:
			window += s.Bytes(n)
		default:
			state += s.Bytes(n)
		}
	}
	// "256K 个 token 约 1.34 GB": 1,444,790,272 B = 1.3456 GiB.
	if growing != 1_444_790_272 || math.Abs(float64(growing)/GB-1.34) > 0.01 {
		t.Errorf("growing bytes at 256K = %d (%.4f GiB), want 1,444,790,272 (about 1.34)", growing, float64(growing)/GB)
	}
	// "滑窗 4.6 MB": 61·128·584 = 4,559,872 B (4.6 decimal MB, 4.35 MiB).
	if window != 4_559_872 || fmt.Sprintf("%.1f", float64(window)/1e6) != "4.6" {
		t.Errorf("window bytes = %d, want 4,559,872", window)
	}
	// "压缩器状态约 18 MB".
	if state != 18_710_528 || fmt.Sprintf("%.0f", float64(state)/MB) != "18" {
		t.Errorf("compressor state bytes = %d, want 18,710,528", state)
	}
	// "每请求固定的约 22 MB … 共约 1.37 GB".
	if f := m.FixedBytes(); f != window+state || fmt.Sprintf("%.0f MB", float64(f)/MB) != "22 MB" {
		t.Errorf("fixed = %d, want %d (22 MB)", f, window+state)
	}
	if total := m.Bytes(n); total != growing+window+state || fmt.Sprintf("%.2f GB", float64(total)/GB) != "1.37 GB" {
		t.Errorf("total = %d (%.3f GiB), want %d (1.37 GB)", total, float64(total)/GB, growing+window+state)
	}
}

var attendedLine = regexp.MustCompile(`^上下文\s+([\d,]+)：全注意力看\s+([\d,]+) 条；V4-Flash 的 C4 层看\s*([\d,]+) 条（索引器给\s+([\d,]+) 条打分），C128 层看\s+([\d,]+) 条，只有滑窗的层看 ([\d,]+) 条$`)

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAttendedReproducesHandbook(t *testing.T) {
	m, err := Preset(DeepSeekV4Flash)
	if err != nil {
		t.Fatal(err)
	}
	var lengths []int
	var wantLines []string
	for _, line := range strings.Split(handbookAttended, "\n") {
		f := attendedLine.FindStringSubmatch(line)
		if f == nil {
			t.Fatalf("cannot parse handbook line %q", line)
		}
		n, full, c4, scored, c128, win := atoi(t, f[1]), atoi(t, f[2]), atoi(t, f[3]), atoi(t, f[4]), atoi(t, f[5]), atoi(t, f[6])
		if full != n {
			t.Fatalf("full attention %d at context %d", full, n)
		}
		want := []AttendedGroup{
			{Label: "C4", Attn: deepseekv4.CSA, Rate: 4, Layers: 21, Entries: c4, Scored: scored},
			{Label: "C128", Attn: deepseekv4.HCA, Rate: 128, Layers: 20, Entries: c128},
			{Label: "window-only", Attn: deepseekv4.Window, Layers: 2, Entries: win},
		}
		got := Attended(m.V4, n)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("context %d:\n got %+v\nwant %+v", n, got, want)
		}
		lengths = append(lengths, n)
		wantLines = append(wantLines, fmt.Sprintf("  context %9s: full attention %9s entries; C4 layers %3s (indexer scores %7s), C128 layers %5s, window-only layers %s",
			f[1], f[2], f[3], f[4], f[5], f[6]))
	}
	var out bytes.Buffer
	if err := WriteAttended(&out, m, lengths); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if got := lines[len(lines)-len(wantLines):]; strings.Join(got, "\n") != strings.Join(wantLines, "\n") {
		t.Errorf("WriteAttended:\n%s\nwant the lines\n%s", out.String(), strings.Join(wantLines, "\n"))
	}
	if err := WriteAttended(&out, Model{Name: "x"}, lengths); err == nil {
		t.Error("WriteAttended of a non-V4 model succeeded")
	}
}

func TestAttendedEntries(t *testing.T) {
	tests := []struct {
		pos, rate, topk, window, want int
	}{
		{0, 0, 0, 128, 1},        // first token, window-only
		{126, 1, 0, 128, 127},    // window not yet full
		{4095, 1, 0, 128, 128},   // window full
		{2, 4, 512, 128, 3},      // no completed C4 entry yet
		{3, 4, 512, 128, 5},      // first C4 entry done
		{2047, 4, 512, 128, 640}, // 512 entries done, all selected
		{2051, 4, 512, 128, 640}, // top-k caps the selection
		{127, 128, 0, 128, 129},  // first C128 entry done
		{4095, 128, 0, 128, 160}, // 32 entries
		{1048575, 4, 1024, 128, 1152},
	}
	for _, tc := range tests {
		if got := AttendedEntries(tc.pos, tc.rate, tc.topk, tc.window); got != tc.want {
			t.Errorf("AttendedEntries(%d, %d, %d, %d) = %d, want %d", tc.pos, tc.rate, tc.topk, tc.window, got, tc.want)
		}
	}
}

// synthetic is a model whose arithmetic is easy to follow: 100 bytes per
// token in two kinds (50 B every token, 200 B every 4 tokens) and 1000 fixed
// bytes (two layers of 5 slots of 100 B).
func synthetic() Model {
	return Model{
		Name: "synthetic",
		Specs: []cache.Spec{
			{Name: "kv", Layers: []int{0}, SlotBytes: 50, TokensPerSlot: 1},
			{Name: "compressed", Layers: []int{0}, SlotBytes: 200, TokensPerSlot: 4},
			{Name: "state", Layers: []int{0, 1}, SlotBytes: 100, FixedSlots: 5},
		},
		MaxContext: 1000,
	}
}

func TestConcurrency(t *testing.T) {
	flash, err := Preset(DeepSeekV4Flash)
	if err != nil {
		t.Fatal(err)
	}
	v32, err := Preset(DeepSeekV32)
	if err != nil {
		t.Fatal(err)
	}
	const gib = int64(1) << 30
	tests := []struct {
		name           string
		m              Model
		n              int
		budget         int64
		pageBytes      int
		bytes, byPages int
	}{
		// synthetic at 10 tokens: 10·50 + 2·200 + 1000 = 1900 B; pages of
		// 500 B: kv 1 page (10 slots, 10 per page), compressed 1 page (2
		// slots, 2 per page), state 2·1 pages (5 slots, 5 per page) = 4 of
		// the budget's 38.
		{"synthetic", synthetic(), 10, 19_000, 500, 10, 38 / 4},
		// At 3 tokens: 150 + 0 + 1000 = 1150 B; 1 + 0 + 2 = 3 pages.
		{"synthetic-short", synthetic(), 3, 19_000, 500, 19_000 / 1150, 38 / 3},
		{"synthetic-beyond-max", synthetic(), 1001, 19_000, 500, 0, 0},
		{"synthetic-no-budget", synthetic(), 10, 0, 500, 0, 0},
		// Flash at 128K: 520,080,384 B and 8,048 pages of 64 KiB.
		{"flash-128K-80GiB", flash, 131_072, 80 * gib, 65536, 165, 162},
		// Flash at 4K: 31,191,040 B and 581 pages: the fixed 15 MB dominates.
		{"flash-4K-80GiB", flash, 4096, 80 * gib, 65536, 2753, 2255},
		{"v32-max", v32, 163_840, 80 * gib, 65536, 10, 10},
		{"v32-beyond-max", v32, 163_841, 80 * gib, 65536, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.Concurrency(tc.n, tc.budget); got != tc.bytes {
				t.Errorf("Concurrency = %d, want %d", got, tc.bytes)
			}
			if got := tc.m.ConcurrencyPages(tc.n, tc.budget, tc.pageBytes); got != tc.byPages {
				t.Errorf("ConcurrencyPages = %d, want %d", got, tc.byPages)
			}
		})
	}
	// The figures in the table, derived by hand.
	if b := flash.Bytes(131_072); b != 520_080_384 || int(80*gib/b) != 165 {
		t.Errorf("Flash at 128K: %d bytes", b)
	}
	if p := flash.Pages(131_072, 65536); p != 8048 || 80*gib/65536/int64(p) != 162 {
		t.Errorf("Flash at 128K: %d pages", p)
	}
	if b, p := flash.Bytes(4096), flash.Pages(4096, 65536); b != 31_191_040 || p != 581 {
		t.Errorf("Flash at 4K: %d bytes, %d pages", b, p)
	}
	if b := v32.Bytes(163_840); b != 163_840*61*788 {
		t.Errorf("V3.2 at 160K: %d bytes", b)
	}
}

func TestPagesAreSpecSums(t *testing.T) {
	// DeepSeek-V4-Flash at 4K in 64 KiB pages, kind by kind: window 43·⌈128/112⌉,
	// C4 entries 21·⌈1024/112⌉, CSA compressor 21·⌈8/8⌉, indexer keys
	// 21·⌈1024/496⌉, indexer compressor 21·⌈8/32⌉, C128 entries 20·⌈32/112⌉,
	// HCA compressor 20·⌈128/16⌉.
	flash, err := Preset(DeepSeekV4Flash)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := flash.Pages(4096, 65536), 43*2+21*10+21*1+21*3+21*1+20*1+20*8; got != want {
		t.Errorf("Flash pages at 4K = %d, want %d", got, want)
	}
	for _, m := range Presets() {
		for _, pageBytes := range []int{65536, 1 << 20} {
			if err := m.Validate(pageBytes); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 127, 128, 4096, 100_000, 131_072, m.MaxContext} {
				sum := 0
				for _, s := range m.Specs {
					sum += s.Pages(n, pageBytes)
				}
				if got := m.Pages(n, pageBytes); got != sum {
					t.Errorf("%s: Pages(%d, %d) = %d, Σ Spec.Pages = %d", m.Name, n, pageBytes, got, sum)
				}
			}
		}
	}
	// A page smaller than a slot is refused.
	kimi, _ := Preset(KimiK3)
	if err := kimi.Validate(4096); err == nil {
		t.Error("Kimi-K3 state in 4 KiB pages validated")
	}
	if err := kimi.Validate(0); err == nil {
		t.Error("page size 0 validated")
	}
}

func TestTinyConfig(t *testing.T) {
	m, err := FromDeepSeekV4Config("testdata/tiny/config.json", cache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "tiny" || m.MaxContext != 1_048_576 || m.V4 == nil {
		t.Errorf("model %q, max context %d", m.Name, m.MaxContext)
	}
	// Layers: CSA, HCA(16), window, CSA, HCA(16), CSA; head_dim 32, index_head_dim
	// 16, window 16, f32: kv 128 B, indexer key 64 B.
	if got, want := m.BytesPerToken(), 3*(128.0+64)/4+2*128.0/16; got != want {
		t.Errorf("BytesPerToken = %v, want %v", got, want)
	}
	window := 6 * 16 * 128
	csaState := 3 * 8 * (2*64*4 + 2*2*16*4) // (kv, score) at 2d and the indexer's at 2dI, 2·rate tokens
	hcaState := 2 * 16 * 2 * 32 * 4
	if got, want := m.FixedBytes(), int64(window+csaState+hcaState); got != want {
		t.Errorf("FixedBytes = %d, want %d", got, want)
	}
	// The specs are the engine's own.
	c, err := deepseekv4.LoadConfig("testdata/tiny/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(m.Specs) != fmt.Sprint(c.CacheSpecs(cache.F32)) {
		t.Errorf("specs %v differ from CacheSpecs %v", m.Specs, c.CacheSpecs(cache.F32))
	}
	// Pages predicted equal the pages a cache.Seq holds for the same specs.
	const pageBytes = 1024
	pool, err := cache.NewPool(cpu.New(1), pageBytes, 1<<14)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 4, 15, 16, 17, 63, 64, 100, 1000, 5000} {
		seq, err := cache.NewSeq(pool, m.Specs)
		if err != nil {
			t.Fatal(err)
		}
		if err := seq.Reserve(n); err != nil {
			t.Fatal(err)
		}
		if got, want := seq.Pages(), m.Pages(n, pageBytes); got != want {
			t.Errorf("n=%d: cache.Seq holds %d pages, plan predicts %d", n, got, want)
		}
		seq.Release()
	}
	// Attended at 64 tokens: window 16, top-4 of 16 C4 entries, all 4 C16 entries.
	got := Attended(m.V4, 64)
	want := []AttendedGroup{
		{Label: "C4", Attn: deepseekv4.CSA, Rate: 4, Layers: 3, Entries: 20, Scored: 16},
		{Label: "C16", Attn: deepseekv4.HCA, Rate: 16, Layers: 2, Entries: 20},
		{Label: "window-only", Attn: deepseekv4.Window, Layers: 1, Entries: 16},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Attended(64) = %+v, want %+v", got, want)
	}
	if _, err := FromDeepSeekV4Config("testdata/missing.json", cache.F32); err == nil {
		t.Error("missing config loaded")
	}
}

func TestPresetConfigs(t *testing.T) {
	tests := []struct {
		name                                     string
		hidden, layers, window, csa, hca, topk   int
		experts, moeInter, qLora, oGroups, heads int
		scale                                    float64
	}{
		{DeepSeekV4Flash, 4096, 43, 2, 21, 20, 512, 256, 2048, 1024, 8, 64, 1.5},
		{DeepSeekV4Pro, 7168, 61, 0, 30, 31, 1024, 384, 3072, 1536, 16, 128, 2.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			c := m.V4
			var win, csa, hca int
			for _, l := range c.Layers {
				switch {
				case l.Attn == deepseekv4.Window:
					win++
				case l.Attn == deepseekv4.CSA && l.Rate == 4:
					csa++
				case l.Attn == deepseekv4.HCA && l.Rate == 128:
					hca++
				default:
					t.Errorf("unexpected layer %+v", l)
				}
			}
			if win != tc.window || csa != tc.csa || hca != tc.hca {
				t.Errorf("layers: %d window-only, %d CSA, %d HCA; want %d, %d, %d", win, csa, hca, tc.window, tc.csa, tc.hca)
			}
			got := []any{c.Hidden, c.NumLayers, c.IndexTopK, c.Experts, c.MoEInter, c.QLoraRank, c.OGroups, c.Heads, c.RoutedScale,
				c.HeadDim, c.RopeDim, c.Window, c.IndexHeads, c.IndexHeadDim, c.ExpertsPerTok, c.OLoraRank, c.VocabSize, c.MaxPosition, len(c.MTP), c.ExpertDType}
			want := []any{tc.hidden, tc.layers, tc.topk, tc.experts, tc.moeInter, tc.qLora, tc.oGroups, tc.heads, tc.scale,
				512, 64, 128, 64, 128, 6, 1024, 129280, 1_048_576, 1, "fp4"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("config values %v, want %v", got, want)
			}
			if c.Yarn == nil || c.Yarn.Factor != 16 || c.Yarn.OriginalMax != 65536 || c.CompressRopeTheta != 160000 {
				t.Errorf("yarn %+v, compress_rope_theta %v", c.Yarn, c.CompressRopeTheta)
			}
		})
	}
}

func TestPresetLookup(t *testing.T) {
	for in, want := range map[string]string{
		"DeepSeek-V4-Flash": DeepSeekV4Flash,
		"deepseek-v4-pro":   DeepSeekV4Pro,
		"gemma-4-12b":       Gemma4_12B,
		"Gemma 4 12B":       Gemma4_12B,
		"QWEN3.5-0.8B":      Qwen35_08B,
		"kimi_k3":           KimiK3,
		"deepseek-v3.2":     DeepSeekV32,
	} {
		m, err := Preset(in)
		if err != nil || m.Name != want {
			t.Errorf("Preset(%q) = %q, %v; want %q", in, m.Name, err, want)
		}
	}
	if _, err := Preset("llama"); err == nil || !strings.Contains(err.Error(), "DeepSeek-V4-Flash") {
		t.Errorf("Preset(llama) error %v, want one listing the presets", err)
	}
	m, err := V4Preset("deepseek-v4-flash", cache.F32)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.BytesPerToken(); got != 21*(2048+512)/4.0+20*2048/128.0 {
		t.Errorf("Flash f32 BytesPerToken = %v", got)
	}
	if _, err := V4Preset(KimiK3, cache.F32); err == nil {
		t.Error("V4Preset(Kimi-K3) succeeded")
	}
}

func TestParseLength(t *testing.T) {
	tests := []struct {
		in   string
		want int
		err  bool
	}{
		{"4096", 4096, false},
		{"4K", 4096, false},
		{"128k", 131072, false},
		{"1M", 1 << 20, false},
		{"1.5M", 3 << 19, false},
		{"160K", 163840, false},
		{" 1_048_576 ", 1 << 20, false},
		{"0", 0, true},
		{"-4K", 0, true},
		{"1.5", 0, true},
		{"K", 0, true},
		{"", 0, true},
		{"1e6", 0, true},
		{"inf", 0, true},
		{"4G", 0, true},
		{"2000000M", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseLength(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseLength(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if got, err := ParseLengths("4K,128K,1M"); err != nil || fmt.Sprint(got) != "[4096 131072 1048576]" {
		t.Errorf("ParseLengths = %v, %v", got, err)
	}
	if _, err := ParseLengths("4K,,1M"); err == nil {
		t.Error("ParseLengths with an empty entry succeeded")
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"80GiB", 80 << 30, false},
		{"80gib", 80 << 30, false},
		{"80G", 80 << 30, false},
		{"141GB", 141e9, false},
		{"512MiB", 512 << 20, false},
		{"1.5TiB", 3 << 39, false},
		{"4096", 4096, false},
		{"4096B", 4096, false},
		{"80 GiB", 80 << 30, false},
		{"", 0, true},
		{"GiB", 0, true},
		{"0GB", 0, true},
		{"-1GB", 0, true},
		{"80XB", 0, true},
		{"1e30TiB", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1048576: "1,048,576", -4096: "-4,096"} {
		if got := Commas(n); got != want {
			t.Errorf("Commas(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int]string{4096: "4K", 131072: "128K", 1 << 20: "1M", 163840: "160K", 1000: "1,000"} {
		if got := ShortLength(n); got != want {
			t.Errorf("ShortLength(%d) = %q, want %q", n, got, want)
		}
	}
	for b, want := range map[int64]string{512: "512 B", 4_559_872: "4.35 MiB", 1_468_060_672: "1.37 GiB"} {
		if got := HumanBytes(b); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

func TestWriteReport(t *testing.T) {
	flash, err := Preset(DeepSeekV4Flash)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = WriteReport(&out, flash, ReportOptions{Lengths: []int{4096, 131072, 2 << 20}, PageBytes: 65536, Budget: 80 << 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  total                                                                3,850.25   15,420,416\n",
		"  4,096       31,191,040   29.75 MiB    581             2,753             2,255\n",
		"  131,072    520,080,384  495.99 MiB  8,048               165               162\n",
		"  2,097,152  unsupported\n",
		"budget 85,899,345,920 bytes (80.00 GiB) = 1,310,720 pages\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	for _, opts := range []ReportOptions{
		{Lengths: []int{4096}, PageBytes: 0},
		{Lengths: []int{4096}, PageBytes: 256},
		{Lengths: []int{0}, PageBytes: 65536},
		{Lengths: []int{4096}, PageBytes: 65536, Budget: -1},
	} {
		if err := WriteReport(&out, flash, opts); err == nil {
			t.Errorf("WriteReport(%+v) succeeded", opts)
		}
	}
}

func TestPlot(t *testing.T) {
	var buf bytes.Buffer
	presets := Presets()
	if err := Plot(&buf, presets); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Fatalf("plot is %v", b)
	}
	// Every model's colour appears (its line and legend swatch).
	for i, m := range presets {
		c := palette(i)
		found := 0
		for y := 0; y < plotH; y++ {
			for x := 0; x < plotW; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(b>>8) == c.B {
					found++
				}
			}
		}
		if found < 200 {
			t.Errorf("%s: %d pixels of its colour", m.Name, found)
		}
	}
	if err := Plot(&buf, nil); err == nil {
		t.Error("plot of no models succeeded")
	}
	if err := Plot(&buf, []Model{{Name: "short", Specs: synthetic().Specs, MaxContext: 512}}); err == nil {
		t.Error("plot of a model below 1K tokens succeeded")
	}
}
