package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/strata-inference/strata/safetensors"
	"github.com/strata-inference/strata/server"
	"github.com/strata-inference/strata/tokenizer/chat"
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

// TestHelpExitsZero: -h (and --help) on every command, and on bench's
// benchmarks, exits 0 (the flag package prints the usage on stderr); an
// unknown flag exits 1 and an unknown command 2.
func TestHelpExitsZero(t *testing.T) {
	var cmds [][]string
	for name := range commands() {
		cmds = append(cmds, []string{name})
	}
	cmds = append(cmds, []string{"bench", "serve"}, []string{"bench", "decode"}, []string{"bench", "prefix"}, []string{})
	for _, c := range cmds {
		for _, h := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			args := append(append([]string(nil), c...), h)
			if code := realMain(context.Background(), args, &out, &errOut); code != 0 {
				t.Errorf("strata %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := realMain(context.Background(), []string{"plan", "-no-such-flag"}, &out, &errOut); code != 1 {
		t.Errorf("an unknown flag: exit %d", code)
	}
	if code := realMain(context.Background(), []string{"no-such-command"}, &out, &errOut); code != 2 {
		t.Errorf("an unknown command: exit %d", code)
	}
}

// TestVersion: strata --version and strata version print the build, with
// the Go version it was built with.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		var out, errOut bytes.Buffer
		if code := realMain(context.Background(), args, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "strata ") || !strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("strata %s: exit %d, %q", args[0], code, out.String())
		}
	}
}

// serveFlags parses serve's flags as strata serve would.
func serveFlags(t *testing.T, args ...string) serveConfig {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg serveConfig
	addServeFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestServeCacheTooSmall: a -cache-memory that cannot hold one request of
// -max-context is an error at start that says what to change.
func TestServeCacheTooSmall(t *testing.T) {
	cfg := serveFlags(t, "-model", root("models/strata-kjv"), "-cache-memory", "2MiB", "-max-context", "4096")
	_, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "-max-context 4096") || !strings.Contains(err.Error(), "-cache-memory") {
		t.Fatalf("error %v", err)
	}
	cfg = serveFlags(t, "-model", root("models/strata-kjv"), "-cache-memory", "256MiB", "-max-context", "4096")
	s, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("a cache that holds the context: %v", err)
	}
	if s.srv.MaxContext() != 4096 {
		t.Errorf("max context %d", s.srv.MaxContext())
	}
	s.Close()
}

// TestChatTemplateFlag: -chat-template renders chats with the given
// Jinja file; it does not combine with -chat-format deepseek-v4, and a
// missing or broken file is an error.
func TestChatTemplateFlag(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.jinja")
	os.WriteFile(file, []byte(`{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}`), 0o644)
	f, err := chatFormat("", file, root("models/strata-kjv"), "deepseek-v4")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Render([]chat.Message{{Role: "user", Content: "hi"}}, nil, server.ChatOptions{})
	if err != nil || got != "[user]hi[assistant]" || f.Name() != "jinja" {
		t.Errorf("rendered %q (%v) with %s", got, err, f.Name())
	}
	if _, err := chatFormat("deepseek-v4", file, dir, "deepseek-v4"); err == nil {
		t.Error("-chat-template with -chat-format deepseek-v4 accepted")
	}
	if _, err := chatFormat("", filepath.Join(dir, "missing.jinja"), dir, "deepseek-v4"); err == nil {
		t.Error("a missing template accepted")
	}
	os.WriteFile(file, []byte(`{% for m in messages %}`), 0o644)
	if _, err := chatFormat("", file, dir, "deepseek-v4"); err == nil {
		t.Error("a broken template accepted")
	}
}
