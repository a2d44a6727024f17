// Package regress holds regression tests that pin the exact bits the CPU
// backend computes: digests of the logits of every golden case and of the
// shipped model through every path, recorded once (with -update) from a
// known-good build and compared bit for bit afterwards. They guard
// refactorings that must not change arithmetic (the move of the forward pass
// onto backend-owned tensors, new kernels whose portable path must keep the
// reference order).
package regress

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/safetensors"
)

var update = flag.Bool("update", false, "record the digests instead of comparing with them")

// digestFile holds the digests, keyed by case and path. The arithmetic
// they pin is that of the portable kernels on amd64 (Go does not fuse
// multiply-adds there; it does on arm64, which rounds differently).
const digestFile = "testdata/digests-amd64.json"

var cases = []string{
	"golden/deepseek-v4/tiny", "golden/deepseek-v4/flash-ratios", "golden/deepseek-v4/quantized",
	"golden/deepseek-v4-extra/hca12-groups4", "golden/deepseek-v4-extra/quantized-hca20", "golden/deepseek-v4-extra/hc3-csa8",
	"models/strata-kjv",
}

func dir(name string) string {
	if filepath.Dir(name) == "models" {
		return filepath.Join("..", "..", name)
	}
	return filepath.Join("..", "..", "testdata", name)
}

// digest hashes float32 bits.
func digest(v []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// portable returns a CPU backend forced to the portable kernels, whose
// arithmetic the digests pin (the vector kernels round differently).
func portable(t *testing.T) *cpu.Backend {
	b := cpu.New(0)
	if err := b.SetKernels(cpu.KernelsPortable); err != nil {
		t.Fatal(err)
	}
	return b
}

func ids(v []int32) string { return fmt.Sprint(v) }

// TestDigests computes, for every case, the logits of the full, decode and
// chunked paths, the greedy continuation, and the logits of concurrent
// requests through the engine (batched, chunked by a small budget, with
// preemption), and compares their digests with the recorded ones.
func TestDigests(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the recorded digests are of amd64 arithmetic; this is %s", runtime.GOARCH)
	}
	got := map[string]string{}
	ctx := context.Background()
	for _, name := range cases {
		m, err := deepseekv4.Load(dir(name), portable(t))
		if err != nil {
			t.Fatal(err)
		}
		c, err := golden.Load(dir(name))
		if err != nil {
			t.Fatal(err)
		}
		L := len(c.InputIDs)
		for path, feeds := range map[string][]int{"full": {L}, "decode": golden.DecodeFeeds(c.Prompt, L), "chunked": c.Chunks} {
			lg, err := golden.Feed(ctx, m, c.InputIDs, feeds)
			if err != nil {
				t.Fatal(err)
			}
			got[name+" "+path] = digest(lg)
		}
		g, err := golden.Greedy(ctx, m, c.InputIDs[:c.Prompt], len(c.Greedy))
		if err != nil {
			t.Fatal(err)
		}
		got[name+" greedy"] = ids(g)
		for k, v := range batched(t, m, c) {
			got[name+" "+k] = v
		}
		if name == "models/strata-kjv" {
			got[name+" mtp"] = mtpDigest(t, m)
		}
		m.Close()
	}
	if *update {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.MkdirAll(filepath.Dir(digestFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(digestFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: digest %s, recorded %s", k, got[k], want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d digests computed, %d recorded", len(got), len(want))
	}
}

// batched runs three decode requests (the reference ids forced), three
// prompt-only requests and one greedy request of different lengths through
// one engine, arriving over several steps, under a budget of 37 tokens and a
// pool that forces preemption; it returns a digest of each request's logits
// (the last computation of every position) and the greedy ids.
func batched(t *testing.T, m model.Model, c *golden.Case) map[string]string {
	t.Helper()
	L := len(c.InputIDs)
	type job struct {
		name string
		req  engine.Request
		n    int
		got  map[int][]float32
	}
	var jobs []*job
	lengths := []int{L, L - L/10, L / 2}
	for _, n := range lengths {
		p := min(c.Prompt, n)
		jobs = append(jobs, &job{name: fmt.Sprintf("engine decode %d", n), n: n, req: engine.Request{Prompt: c.InputIDs[:p], Forced: c.InputIDs[p:n], MaxTokens: n - p + 1}})
	}
	for _, n := range lengths {
		jobs = append(jobs, &job{name: fmt.Sprintf("engine chunked %d", n), n: n, req: engine.Request{Prompt: c.InputIDs[:n], MaxTokens: 1}})
	}
	jobs = append(jobs, &job{name: "engine greedy", req: engine.Request{Prompt: c.InputIDs[:c.Prompt], MaxTokens: len(c.Greedy)}})
	pageBytes := 0
	for _, s := range m.CacheSpecs() {
		pageBytes = max(pageBytes, s.SlotBytes)
	}
	pagesFor := func(n int) int { return cache.TotalPages(m.CacheSpecs(), n, pageBytes) }
	largest := 0
	for _, j := range jobs {
		largest = max(largest, pagesFor(len(j.req.Prompt)+j.req.MaxTokens))
	}
	e, err := engine.New(m, engine.Config{MaxBatchTokens: 37, MaxSeqs: 16, PageBytes: pageBytes, EOS: -1, Pages: largest + pagesFor(c.Prompt), NoPrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	streams := make([]*engine.Stream, len(jobs))
	submit := func(i int) {
		j := jobs[i]
		if j.n > 0 {
			j.got = map[int][]float32{}
			j.req.OnLogits = func(p int, l []float32) { j.got[p] = slices.Clone(l) }
		}
		s, err := e.Submit(ctx, j.req)
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	next := 0
	for ; next < 2; next++ {
		submit(next)
	}
	for step := 0; next < len(jobs) || !e.Idle(); step++ {
		if step%2 == 1 && next < len(jobs) {
			submit(next)
			next++
		}
		if _, err := e.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.Stats().Preemptions == 0 {
		t.Errorf("%s: no request was preempted", c.Dir)
	}
	out := map[string]string{}
	for i, j := range jobs {
		toks, _, err := streams[i].Collect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if j.n == 0 {
			out[j.name] = ids(toks)
			continue
		}
		var all []float32
		for p := range j.n {
			row, ok := j.got[p]
			if !ok {
				t.Fatalf("%s: %s: no logits for position %d", c.Dir, j.name, p)
			}
			all = append(all, row...)
		}
		out[j.name] = digest(all)
	}
	return out
}

// mtpDigest is the digest of the MTP layer's logits over the shipped
// model's held-out text (as TestShippedMTP computes them).
func mtpDigest(t *testing.T, m model.Model) string {
	t.Helper()
	dm := m.(*deepseekv4.Model)
	f, err := safetensors.Open(filepath.Join(dir("models/strata-kjv"), "mtp_golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	idsT, _ := f.Tensor("input_ids")
	ids64, err := idsT.Int64s()
	if err != nil {
		t.Fatal(err)
	}
	tok := make([]int32, len(ids64))
	for i, v := range ids64 {
		tok[i] = int32(v)
	}
	S := len(tok)
	pool, err := cache.PoolFor(dm.Backend(), append(dm.CacheSpecs(), dm.MTPCacheSpecs()...), S, 1)
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := dm.NewSeq(pool)
	mseq, err := cache.NewSeq(pool, dm.DraftSpecs())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := &model.Batch{Tokens: tok, Spans: []model.Span{{Seq: seq, Len: S, Logits: model.NoLogits, Draft: mseq}}}
	if _, err := dm.Forward(ctx, b); err != nil {
		t.Fatal(err)
	}
	mb := &model.Batch{Tokens: tok[1:], Spans: []model.Span{{Seq: mseq, Len: S - 1, Logits: model.AllLogits}}}
	lg, err := dm.Draft(ctx, mb)
	if err != nil {
		t.Fatal(err)
	}
	return digest(lg)
}
