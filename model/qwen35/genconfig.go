package qwen35

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// applyGenerationConfig takes the BOS and EOS ids of a
// generation_config.json (transformers' generation defaults, which
// generate stops by) over config.json's, where it names them. A missing
// file changes nothing.
func (c *Config) applyGenerationConfig(path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("qwen35: %w", err)
	}
	if len(b) > maxConfigBytes {
		return fmt.Errorf("qwen35: %s: %d bytes exceeds the %d-byte limit", path, len(b), maxConfigBytes)
	}
	var g struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return fmt.Errorf("qwen35: %s: %w", path, err)
	}
	p := &parser{}
	bos := p.tokenIDs("bos_token_id", g.BOS)
	eos := p.tokenIDs("eos_token_id", g.EOS)
	for _, id := range append(append([]int(nil), bos...), eos...) {
		if id < 0 || id >= c.VocabSize {
			p.errf("token id %d is outside the vocabulary of %d", id, c.VocabSize)
		}
	}
	if len(p.errs) > 0 {
		return fmt.Errorf("qwen35: %s: %w", path, errors.Join(p.errs...))
	}
	if len(bos) > 0 {
		c.BOS = bos[0]
	}
	if len(eos) > 0 {
		c.EOS = eos
	}
	return nil
}
