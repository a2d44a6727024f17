package hy4

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// rewriteCheckpoint copies case src into a temp dir, passing every tensor
// through edit (which may rename, drop, reshape or add tensors) and the
// config through editCfg (nil: unchanged).
func rewriteCheckpoint(t testing.TB, src string, edit func(ts []safetensors.WriteTensor) []safetensors.WriteTensor, editCfg func(m map[string]any)) string {
	t.Helper()
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.WriteTensor
	for _, n := range ck.Names() {
		x, _ := ck.Tensor(n)
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: x.DType, Shape: x.Shape, Data: append([]byte(nil), x.Data...)})
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), edit(ts), nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if editCfg != nil {
		var m map[string]any
		if err := json.Unmarshal(cfg, &m); err != nil {
			t.Fatal(err)
		}
		editCfg(m)
		cfg, _ = json.Marshal(m)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBindReportsEveryProblem: a missing tensor, a mis-shaped one, one of
// an unsupported dtype, one holding a NaN, a tensor given in both
// spellings, an indexer on a shared layer and an unexpected tensor are
// all reported in one error.
func TestBindReportsEveryProblem(t *testing.T) {
	dir := rewriteCheckpoint(t, caseDir("hy4/tiny"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			switch x.Name {
			case "model.layers.1.self_attn.kv_b_proj.weight": // missing
				continue
			case "model.layers.0.self_attn.indexer.k_norm.bias": // wrong shape
				x.Shape, x.Data = []int{8}, x.Data[:32]
			case "model.layers.3.mlp.experts.down_proj": // wrong dtype
				x.DType = safetensors.I32
			case "model.layers.0.mlp.up_proj.weight": // a NaN
				binary.LittleEndian.PutUint32(x.Data[4*77:], math.Float32bits(float32(math.NaN())))
			case "model.layers.2.self_attn.learnable_sink_param": // both spellings
				out = append(out, safetensors.WriteTensor{Name: "model.layers.2.self_attn.sinks", DType: x.DType, Shape: x.Shape, Data: x.Data})
			}
			out = append(out, x)
		}
		return append(out,
			safetensors.WriteTensor{Name: "model.layers.3.self_attn.indexer.wk.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)},
			safetensors.WriteTensor{Name: "model.layers.0.mlp.experts.gate_up_proj", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	}, nil)
	_, err := Load(dir, cpu.New(1), model.Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`missing tensor "model.layers.1.self_attn.kv_b_proj.weight"`,
		`tensor "model.layers.0.self_attn.indexer.k_norm.bias": shape [8] has 8 elements, want 16`,
		`tensor "model.layers.3.mlp.experts.down_proj": I32 [8 64 16], want an f32/bf16/f16 [8 64 16]`,
		`tensor "model.layers.0.mlp.up_proj.weight": element 77 is not finite`,
		`tensor model.layers.2.self_attn.learnable_sink_param: given twice, as "model.layers.2.self_attn.learnable_sink_param" and "model.layers.2.self_attn.sinks"`,
		`tensor "model.layers.3.self_attn.indexer.wk.weight": layer 3 is a shared-indexer layer`,
		`unexpected tensor "model.layers.0.mlp.experts.gate_up_proj"`,
		"7 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestMemoryNames: the checkpoint renamed to transformers' in-memory
// names (attn_hc, ffn_hc, hc_head, gate_proj, sinks) with the routed
// experts one triple per expert gives the logits of the save_pretrained
// spelling bit for bit, and those match the reference.
func TestMemoryNames(t *testing.T) {
	src := caseDir("hy4/tiny")
	c, err := golden.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	ren := []struct{ re, to string }{
		{`^model\.hc_pre\.hc_head\.hc_head_(fn|base|scale)$`, "model.hc_head.hc_$1"},
		{`^(model\.layers\.\d+\.)hc_pre\.hc_attn_layer\.hc_(fn|base|scale)$`, "${1}attn_hc.$2"},
		{`^(model\.layers\.\d+\.)hc_pre\.hc_mlp_layer\.hc_(fn|base|scale)$`, "${1}ffn_hc.$2"},
		{`^(.*)\.linear_gate\.weight$`, "$1.gate_proj.weight"},
		{`^(.*self_attn)\.learnable_sink_param$`, "$1.sinks"},
	}
	stacked := regexp.MustCompile(`^(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)$`)
	renamed := 0
	dir := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			if m := stacked.FindStringSubmatch(x.Name); m != nil {
				E, rows, cols := x.Shape[0], x.Shape[1], x.Shape[2]
				per := len(x.Data) / E
				for e := range E {
					d := x.Data[e*per : (e+1)*per]
					p := fmt.Sprintf("%s.%d.", m[1], e)
					if m[2] == "down_proj" {
						out = append(out, safetensors.WriteTensor{Name: p + "down_proj.weight", DType: x.DType, Shape: []int{rows, cols}, Data: d})
						continue
					}
					out = append(out,
						safetensors.WriteTensor{Name: p + "gate_proj.weight", DType: x.DType, Shape: []int{rows / 2, cols}, Data: d[:per/2]},
						safetensors.WriteTensor{Name: p + "up_proj.weight", DType: x.DType, Shape: []int{rows / 2, cols}, Data: d[per/2:]})
				}
				renamed++
				continue
			}
			for _, r := range ren {
				if re := regexp.MustCompile(r.re); re.MatchString(x.Name) {
					x.Name = re.ReplaceAllString(x.Name, r.to)
					renamed++
					break
				}
			}
			out = append(out, x)
		}
		return out
	}, nil)
	if renamed < 50 {
		t.Fatalf("only %d tensors renamed", renamed)
	}
	ctx := context.Background()
	var logits [2][]float32
	for i, d := range []string{src, dir} {
		m, err := Load(d, cpu.New(0), model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		logits[i], err = golden.Feed(ctx, m, c.InputIDs, []int{len(c.InputIDs)})
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if d := golden.MaxAbsDiff(logits[0], logits[1]); d != 0 {
		t.Fatalf("in-memory names: logits differ by %g", d)
	}
	if d := golden.MaxAbsDiff(logits[1], c.LogitsFull); d > c.Tolerance {
		t.Fatalf("in-memory names: %g from the reference", d)
	}
}
