package dsa_test

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
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/model/glm5"
	"github.com/strata-inference/strata/quant"
	"github.com/strata-inference/strata/safetensors"
)

func caseDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

// families maps a golden case to its family.
var families = map[string]*dsa.Family{"deepseek-v3.2/tiny": &deepseekv32.Family, "glm-5/tiny": &glm5.Family}

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

func f32s(data []byte) []float32 {
	v := make([]float32, len(data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return v
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestBindReportsEveryProblem: a missing tensor, a mis-shaped one, one of
// an unsupported dtype, one holding a NaN, an FP8 weight without its
// scale (whose bytes also hold e4m3 NaN codes) and an unexpected tensor
// are all reported in one error.
func TestBindReportsEveryProblem(t *testing.T) {
	dir := rewriteCheckpoint(t, caseDir("glm-5/tiny"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			switch x.Name {
			case "model.layers.1.self_attn.kv_b_proj.weight": // missing
				continue
			case "model.layers.2.self_attn.indexer.k_norm.bias": // wrong shape
				x.Shape, x.Data = []int{8}, x.Data[:32]
			case "model.layers.3.mlp.experts.5.down_proj.weight": // wrong dtype
				x.DType = safetensors.I32
			case "model.layers.0.mlp.up_proj.weight": // a NaN
				binary.LittleEndian.PutUint32(x.Data[4*77:], math.Float32bits(float32(math.NaN())))
			case "model.layers.2.self_attn.o_proj.weight": // FP8 without its scale
				x.DType, x.Data = safetensors.F8E4M3, x.Data[:len(x.Data)/4]
			}
			out = append(out, x)
		}
		// A shared layer holds no indexer.
		return append(out, safetensors.WriteTensor{Name: "model.layers.1.self_attn.indexer.wk.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	}, nil)
	_, err := glm5.Load(dir, cpu.New(1), model.Options{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`missing tensor "model.layers.1.self_attn.kv_b_proj.weight"`,
		`tensor "model.layers.2.self_attn.indexer.k_norm.bias": shape [8] has 8 elements, want 16`,
		`tensor "model.layers.3.mlp.experts.5.down_proj.weight": dtype I32 is not a supported weight format`,
		`tensor "model.layers.0.mlp.up_proj.weight": element 77 is not finite`,
		`missing tensor "model.layers.2.self_attn.o_proj.weight_scale_inv"`,
		`tensor "model.layers.2.self_attn.o_proj.weight": element 17 is an e4m3 NaN`, // float32 bytes read as e4m3
		`unexpected tensor "model.layers.1.self_attn.indexer.wk.weight"`,
		"7 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestBindNaNs: non-finite values in vectors, FP8 NaN codes and scales
// that are not powers of two are reported.
func TestBindNaNs(t *testing.T) {
	dir := rewriteCheckpoint(t, caseDir("deepseek-v3.2/tiny"), func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var out []safetensors.WriteTensor
		for _, x := range ts {
			switch x.Name {
			case "model.norm.weight":
				binary.LittleEndian.PutUint32(x.Data[8:], math.Float32bits(float32(math.Inf(1))))
			case "model.layers.1.self_attn.q_a_proj.weight", "model.layers.2.self_attn.q_a_proj.weight":
				data, scale := quant.QuantizeFP8Block(f32s(x.Data), x.Shape[0], x.Shape[1])
				x.DType, x.Data = safetensors.F8E4M3, data
				if x.Name == "model.layers.1.self_attn.q_a_proj.weight" {
					x.Data[5] = 0x7F // NaN
				}
				sv := make([]float32, len(scale))
				for i, s := range scale {
					sv[i] = quant.UE8M0ToFloat32(s)
				}
				if x.Name == "model.layers.2.self_attn.q_a_proj.weight" {
					sv[0] = 0.3
				}
				out = append(out, safetensors.WriteTensor{Name: x.Name + "_scale_inv", DType: safetensors.F32, Shape: []int{1, 1}, Data: f32Bytes(sv)})
			}
			out = append(out, x)
		}
		return out
	}, nil)
	_, err := deepseekv32.Load(dir, cpu.New(1), model.Options{})
	for _, want := range []string{
		`tensor "model.norm.weight": element 2 is +Inf`,
		`tensor "model.layers.1.self_attn.q_a_proj.weight": element 5 is an e4m3 NaN`,
		`scale tensor "model.layers.2.self_attn.q_a_proj.weight_scale_inv": element 0 is 0.3, not a power of two`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func loadFamily(t testing.TB, dir string, f *dsa.Family) *dsa.Model {
	t.Helper()
	m, err := dsa.Load(dir, cpu.New(0), model.Options{}, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// fullLogits is one full pass over the case's ids.
func fullLogits(t testing.TB, m model.Model, c *golden.Case) []float32 {
	t.Helper()
	got, err := golden.Feed(context.Background(), m, c.InputIDs, []int{len(c.InputIDs)})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStackedExperts: the routed experts stacked as transformers holds
// them (experts.gate_up_proj [E, 2I, D], experts.down_proj [E, D, I]) give
// the logits of the per-expert tensors save_pretrained writes, bit for
// bit.
func TestStackedExperts(t *testing.T) {
	for name, f := range families {
		src := caseDir(name)
		c, err := golden.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		re := regexp.MustCompile(`^(model\.layers\.\d+\.mlp\.experts\.)(\d+)\.(gate|up|down)_proj\.weight$`)
		dir := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			type key struct {
				prefix, kind string
			}
			parts := map[key]map[int]safetensors.WriteTensor{}
			var out []safetensors.WriteTensor
			for _, x := range ts {
				m := re.FindStringSubmatch(x.Name)
				if m == nil {
					out = append(out, x)
					continue
				}
				k := key{m[1], m[3]}
				if parts[k] == nil {
					parts[k] = map[int]safetensors.WriteTensor{}
				}
				var e int
				fmt.Sscan(m[2], &e)
				parts[k][e] = x
			}
			for k, byE := range parts {
				if k.kind == "up" {
					continue
				}
				E := len(byE)
				var data []byte
				x0 := byE[0]
				if k.kind == "gate" {
					for e := range E {
						data = append(data, byE[e].Data...)
						data = append(data, parts[key{k.prefix, "up"}][e].Data...)
					}
					out = append(out, safetensors.WriteTensor{Name: k.prefix + "gate_up_proj", DType: x0.DType, Shape: []int{E, 2 * x0.Shape[0], x0.Shape[1]}, Data: data})
					continue
				}
				for e := range E {
					data = append(data, byE[e].Data...)
				}
				out = append(out, safetensors.WriteTensor{Name: k.prefix + "down_proj", DType: x0.DType, Shape: []int{E, x0.Shape[0], x0.Shape[1]}, Data: data})
			}
			return out
		}, nil)
		want := fullLogits(t, loadFamily(t, src, f), c)
		got := fullLogits(t, loadFamily(t, dir, f), c)
		if d := golden.MaxAbsDiff(got, want); d != 0 {
			t.Errorf("%s: stacked experts differ by %g", name, d)
		}
	}
}

// TestHubFP8: the Hub checkpoints' format (every projection FP8 e4m3 with
// a float32 weight_scale_inv per 128x128 block, embeddings, norms and
// router unquantized, a multi-token-prediction layer at
// model.layers.L) gives the logits of the same values stored as float32:
// FP8 weights are read exactly, including the per-head pieces of kv_b_proj
// and the rows of kv_a_proj_with_mqa that no block boundary separates.
func TestHubFP8(t *testing.T) {
	for name, f := range families {
		src := caseDir(name)
		c, err := golden.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		quantized := func(ts []safetensors.WriteTensor, keepFP8 bool) []safetensors.WriteTensor {
			var out []safetensors.WriteTensor
			for _, x := range ts {
				if len(x.Shape) != 2 || !strings.Contains(x.Name, "_proj.weight") || strings.Contains(x.Name, "weights_proj") {
					out = append(out, x)
					continue
				}
				rows, cols := x.Shape[0], x.Shape[1]
				data, scale := quant.QuantizeFP8Block(f32s(x.Data), rows, cols)
				if !keepFP8 {
					x.Data = f32Bytes(quant.DequantizeFP8Block(data, scale, rows, cols))
					out = append(out, x)
					continue
				}
				sv := make([]float32, len(scale))
				for i, s := range scale {
					sv[i] = quant.UE8M0ToFloat32(s)
				}
				sr, sc := quant.FP8ScaleShape(rows, cols)
				out = append(out,
					safetensors.WriteTensor{Name: x.Name, DType: safetensors.F8E4M3, Shape: x.Shape, Data: data},
					safetensors.WriteTensor{Name: x.Name + "_scale_inv", DType: safetensors.F32, Shape: []int{sr, sc}, Data: f32Bytes(sv)})
			}
			return out
		}
		hub := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			out := quantized(ts, true)
			return append(out, safetensors.WriteTensor{Name: "model.layers.4.eh_proj.weight", DType: safetensors.F32, Shape: []int{1, 1}, Data: make([]byte, 4)})
		}, func(m map[string]any) {
			m["num_nextn_predict_layers"] = 1
			m["quantization_config"] = map[string]any{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": []int{128, 128}}
		})
		plain := rewriteCheckpoint(t, src, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return quantized(ts, false) }, nil)
		got := fullLogits(t, loadFamily(t, hub, f), c)
		want := fullLogits(t, loadFamily(t, plain, f), c)
		if d := golden.MaxAbsDiff(got, want); d > 1e-6 {
			t.Errorf("%s: FP8 checkpoint differs from its float32 values by %g", name, d)
		}
		// The MTP layer is ignored only when the config declares it.
		noMTP := rewriteCheckpoint(t, hub, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return ts }, func(m map[string]any) { delete(m, "num_nextn_predict_layers") })
		if _, err := dsa.Load(noMTP, cpu.New(1), model.Options{}, f); err == nil || !strings.Contains(err.Error(), `unexpected tensor "model.layers.4.eh_proj.weight"`) {
			t.Errorf("%s: undeclared MTP layer: %v", name, err)
		}
	}
}

func cpuBackend() *cpu.Backend { return cpu.New(0) }
