package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// AddedToken is a token matched in text before pre-tokenization, such as a
// model's beginning-of-sequence marker.
type AddedToken struct {
	Content string
	// Special tokens are skipped when decoding with skip_special_tokens and
	// recognised in text only when the caller allows it; other added
	// tokens are always recognised.
	Special bool
}

// Model is a trained tokenizer: added tokens at ids 0..len(Added)-1, then
// the 256 bytes in GPT-2's order, then the merged tokens in the order they
// were learned.
type Model struct {
	Added  []AddedToken
	Merges []Merge

	vocab  []string         // id -> raw bytes (content for added tokens)
	ids    map[string]int32 // raw bytes -> id, for byte and merged tokens
	ranks  map[[2]int32]int32
	merged map[[2]int32]int32 // pair of ids -> id of the merged token
}

// NewModel lays out the vocabulary of added tokens and merges.
func NewModel(added []AddedToken, merges []Merge) (*Model, error) {
	m := &Model{
		Added: added, Merges: merges,
		ids:    make(map[string]int32),
		ranks:  make(map[[2]int32]int32),
		merged: make(map[[2]int32]int32),
	}
	seen := make(map[string]bool)
	for _, a := range added {
		if a.Content == "" || seen[a.Content] {
			return nil, fmt.Errorf("bpe: added token %q is empty or repeated", a.Content)
		}
		seen[a.Content] = true
		m.vocab = append(m.vocab, a.Content)
	}
	for _, b := range ByteOrder() {
		m.ids[string([]byte{b})] = int32(len(m.vocab))
		m.vocab = append(m.vocab, string([]byte{b}))
	}
	for r, mg := range merges {
		l, okl := m.ids[mg.Left]
		rr, okr := m.ids[mg.Right]
		if !okl || !okr {
			return nil, fmt.Errorf("bpe: merge %d (%q, %q) uses a token no earlier merge made", r, mg.Left, mg.Right)
		}
		k := [2]int32{l, rr}
		if _, dup := m.ranks[k]; dup {
			return nil, fmt.Errorf("bpe: merge %d (%q, %q) is repeated", r, mg.Left, mg.Right)
		}
		s := mg.Left + mg.Right
		id, ok := m.ids[s]
		if !ok {
			id = int32(len(m.vocab))
			m.ids[s] = id
			m.vocab = append(m.vocab, s)
		}
		m.ranks[k] = int32(r)
		m.merged[k] = id
	}
	// tokenizer.json keys the vocabulary by spelling, so no learned token
	// may be spelled like an added token (an ASCII one such as "<think>"
	// could be).
	spell := ByteToRune()
	for _, s := range m.vocab[len(added):] {
		if seen[Spell(&spell, s)] {
			return nil, fmt.Errorf("bpe: a learned token is spelled like the added token %q", Spell(&spell, s))
		}
	}
	return m, nil
}

// VocabSize is the number of ids.
func (m *Model) VocabSize() int { return len(m.vocab) }

// Encode appends the ids of one pre-token to ids, merging the adjacent pair
// of lowest rank (the leftmost among equals) until none is left. It is the
// reference against which strata's encoder is checked.
func (m *Model) Encode(pretoken string, ids []int32) []int32 {
	syms := make([]int32, len(pretoken))
	for i := 0; i < len(pretoken); i++ {
		syms[i] = m.ids[pretoken[i:i+1]]
	}
	for len(syms) > 1 {
		best, at := int32(-1), -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := m.ranks[[2]int32{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = m.merged[[2]int32{syms[at], syms[at+1]}]
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return append(ids, syms...)
}

// TokenizerJSON returns the model as a Hugging Face tokenizer.json:
// DeepSeek-V3's pre-tokenizer (Patterns, then ByteLevel without its own
// regex), a BPE model with vocab and merges in byte-level spelling, a
// ByteLevel decoder, and a post-processor that puts bos in front of every
// sequence (Hugging Face applies it; strata reads bos from it and never
// applies it). bos must be one of the added tokens.
func (m *Model) TokenizerJSON(bos string) ([]byte, error) {
	bosID := -1
	for i, a := range m.Added {
		if a.Content == bos {
			bosID = i
		}
	}
	if bosID < 0 {
		return nil, fmt.Errorf("bpe: bos %q is not an added token", bos)
	}
	spell := ByteToRune()
	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for i, a := range m.Added {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %t, \"special\": %t}",
			i, jsonString(a.Content), !a.Special, a.Special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": null,\n  \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [")
	for _, p := range Patterns() {
		fmt.Fprintf(&b, "\n    {\"type\": \"Split\", \"pattern\": {\"Regex\": %s}, \"behavior\": \"Isolated\", \"invert\": false},", jsonString(p))
	}
	b.WriteString("\n    {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}\n  ]},\n")
	bt := jsonString(bos)
	fmt.Fprintf(&b, "  \"post_processor\": {\"type\": \"TemplateProcessing\",\n"+
		"    \"single\": [{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],\n"+
		"    \"pair\": [{\"SpecialToken\": {\"id\": %s, \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": %s, \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}}],\n"+
		"    \"special_tokens\": {%s: {\"id\": %s, \"ids\": [%d], \"tokens\": [%s]}}},\n",
		bt, bt, bt, bt, bt, bosID, bt)
	b.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true},\n")
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n" +
		"    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n" +
		"    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for id, s := range m.vocab {
		if id > 0 {
			b.WriteByte(',')
		}
		if id >= len(m.Added) {
			s = Spell(&spell, s)
		}
		fmt.Fprintf(&b, "\n      %s: %d", jsonString(s), id)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, mg := range m.Merges {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n      %s", jsonString(Spell(&spell, mg.Left)+" "+Spell(&spell, mg.Right)))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("bpe: internal error: tokenizer.json is not valid JSON")
	}
	return b.Bytes(), nil
}

// Config describes tokenizer_config.json.
type Config struct {
	BOS, EOS, Pad  string
	ModelMaxLength int
}

// ConfigJSON returns tokenizer_config.json for the model: bos, eos and pad
// tokens, add_bos_token true, and added_tokens_decoder with every added
// token's flags, for transformers' PreTrainedTokenizerFast.
func (m *Model) ConfigJSON(c Config) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{\n  \"add_bos_token\": true,\n  \"add_eos_token\": false,\n  \"added_tokens_decoder\": {")
	for i, a := range m.Added {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    %s: {\"content\": %s, \"lstrip\": false, \"normalized\": %t, \"rstrip\": false, \"single_word\": false, \"special\": %t}",
			jsonString(strconv.Itoa(i)), jsonString(a.Content), !a.Special, a.Special)
	}
	fmt.Fprintf(&b, "\n  },\n  \"bos_token\": %s,\n  \"clean_up_tokenization_spaces\": false,\n  \"eos_token\": %s,\n"+
		"  \"model_max_length\": %d,\n  \"pad_token\": %s,\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"unk_token\": null\n}\n",
		jsonString(c.BOS), jsonString(c.EOS), c.ModelMaxLength, jsonString(c.Pad))
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("bpe: internal error: tokenizer_config.json is not valid JSON")
	}
	return b.Bytes(), nil
}

// jsonString quotes s as a JSON string without escaping <, > and &.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(err) // a string always encodes
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
