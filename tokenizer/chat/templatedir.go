package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LoadTemplate compiles the chat template of a model folder: the
// chat_template of dir/tokenizer_config.json or, when that has none, the
// file dir/chat_template.jinja, as transformers 5 saves it (Qwen3.5's Hub
// folders do). The special tokens of tokenizer_config.json become template
// variables either way (see NewTemplateFromConfig). It returns an error
// wrapping ErrNoTemplate when neither holds a template.
func LoadTemplate(dir string) (*Template, error) {
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	if errors.Is(err, os.ErrNotExist) {
		cfg, err = []byte("{}"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	t, err := NewTemplateFromConfig(cfg)
	if !errors.Is(err, ErrNoTemplate) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfgPath, err)
		}
		return t, nil
	}
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	src, rerr := os.ReadFile(jinjaPath)
	if errors.Is(rerr, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w, and there is no chat_template.jinja", dir, ErrNoTemplate)
	}
	if rerr != nil {
		return nil, fmt.Errorf("chat: %w", rerr)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &fields); err != nil {
		return nil, fmt.Errorf("chat: %s: %w", cfgPath, err)
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	fields["chat_template"], _ = json.Marshal(string(src))
	merged, _ := json.Marshal(fields)
	t, err = NewTemplateFromConfig(merged)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", jinjaPath, err)
	}
	return t, nil
}
