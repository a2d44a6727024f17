package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-inference/strata/safetensors"
)

func run(t *testing.T, cmd string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := commands()[cmd].run(context.Background(), args, &out)
	return out.String(), err
}

// The tests run in cmd/strata; the repository root is two levels up.
func root(p string) string { return filepath.Join("..", "..", p) }

func TestCheckGoldenCommand(t *testing.T) {
	out, err := run(t, "check-golden", root("testdata/golden/deepseek-v4/tiny"))
	if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
		t.Fatalf("check-golden: %v\n%s", err, out)
	}
	out, err = run(t, "check-golden", "-batched", root("testdata/golden/deepseek-v4/quantized"))
	if err != nil || !strings.Contains(out, "preemptions") {
		t.Fatalf("check-golden -batched: %v\n%s", err, out)
	}
	// A case whose reference greedy ids were tampered with fails.
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors", "golden.json"} {
		b, err := os.ReadFile(root(filepath.Join("testdata/golden/deepseek-v4/tiny", f)))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	f, err := safetensors.Open(root("testdata/golden/deepseek-v4/tiny/golden.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, n := range f.Names() {
		x, _ := f.Tensor(n)
		data := append([]byte(nil), x.Data...)
		if n == "greedy_ids" {
			data[8*5] ^= 1 // the sixth greedy id
		}
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: x.DType, Shape: x.Shape, Data: data})
	}
	f.Close()
	if err := safetensors.WriteFile(filepath.Join(dir, "golden.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "check-golden", dir)
	if err != errFailed || !strings.Contains(out, "FAIL") {
		t.Fatalf("a wrong reference passed: %v\n%s", err, out)
	}
	if _, err := run(t, "check-golden", root("testdata/does-not-exist")); err == nil {
		t.Fatal("a missing folder passed")
	}
}

func TestPlanCommand(t *testing.T) {
	out, err := run(t, "plan")
	if err != nil || !strings.Contains(out, "DeepSeek-V4-Flash: 3.8 KB per token, 15 MB fixed per request; a 128K request 0.48 GB, a 1M request 3.77 GB") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
}

func TestInspectAndGenerate(t *testing.T) {
	out, err := run(t, "inspect", root("models/strata-kjv"))
	if err != nil || !strings.Contains(out, "all ") || !strings.Contains(out, "mtp") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	out, err = run(t, "generate", "-model", root("models/strata-kjv"), "-prompt", "And God said", "-n", "12")
	if err != nil || !strings.Contains(out, "And God said unto") || !strings.Contains(out, "generated 12 tokens") {
		t.Fatalf("generate: %v\n%s", err, out)
	}
	if _, err := run(t, "generate", "-model", root("models/strata-kjv"), "-prompt-ids", "1,99999"); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Fatalf("a bad token id: %v", err)
	}
}
