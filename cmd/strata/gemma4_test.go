package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/server/servertest"
)

// TestCheckGoldenGemma4: check-golden and its batched form pass on the
// Gemma 4 case, chosen by its config's model_type.
func TestCheckGoldenGemma4(t *testing.T) {
	dir := root("testdata/golden/gemma4/tiny")
	out, err := run(t, "check-golden", dir)
	if err != nil || !strings.Contains(out, "greedy   24/24 ids match  ok") {
		t.Fatalf("check-golden: %v\n%s", err, out)
	}
	out, err = run(t, "check-golden", "-batched", dir)
	if err != nil || !strings.Contains(out, "preemptions") {
		t.Fatalf("check-golden -batched: %v\n%s", err, out)
	}
}

// TestServeFormatGemma4: serve picks Gemma 4's chat format for a Gemma 4
// folder, and reads generation_config.json's other end tokens.
func TestServeFormatGemma4(t *testing.T) {
	dir := t.TempDir()
	if err := servertest.WriteGemma4Synthetic(dir, 1); err != nil {
		t.Fatal(err)
	}
	f, err := chatFormat("auto", "", dir, "gemma4")
	if err != nil || f.Name() != "gemma4" {
		t.Fatalf("auto format for gemma4: %v, %v", f, err)
	}
	if f, err := chatFormat("auto", "", dir, "deepseek-v4"); err != nil || f.Name() != "deepseek-v4" {
		t.Fatalf("auto format for deepseek-v4: %v, %v", f, err)
	}
	ends, err := endTokens(dir, 1)
	if err != nil || !slices.Equal(ends, []int32{servertest.Gemma4TurnEnd}) {
		t.Fatalf("end tokens %v, %v", ends, err)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": 1}`), 0o644)
	if ends, err := endTokens(dir, 1); err != nil || len(ends) != 0 {
		t.Fatalf("end tokens %v, %v", ends, err)
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id": "x"}`), 0o644)
	if _, err := endTokens(dir, 1); err == nil {
		t.Fatal("a bad eos_token_id was read")
	}
}
