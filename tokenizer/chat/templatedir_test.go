package chat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadTemplate: a folder with the template beside tokenizer_config.json
// (Qwen3.5's Hub layout) renders like the template itself, with the
// config's special tokens as variables; the config's own chat_template wins
// when present; neither is ErrNoTemplate.
func TestLoadTemplate(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "qwen3.5", "chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadTemplate(dir); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("empty folder: error %v", err)
	}
	write("chat_template.jinja", string(src))
	write("tokenizer_config.json", `{"eos_token": "<|im_end|>", "pad_token": {"content": "<|endoftext|>"}}`)
	tmpl, err := LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "Hi"}}
	got, err := tmpl.Render(msgs, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if tmpl.vars["eos_token"] != "<|im_end|>" || tmpl.vars["pad_token"] != "<|endoftext|>" {
		t.Errorf("special tokens %v", tmpl.vars)
	}
	write("tokenizer_config.json", `{"eos_token": "E", "chat_template": "{{ eos_token }}{{ messages[0].content }}"}`)
	tmpl, err = LoadTemplate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := tmpl.Render(msgs, nil, false, nil); got != "EHi" {
		t.Errorf("config template: got %q", got)
	}
}
