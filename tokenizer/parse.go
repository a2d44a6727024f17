package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// fileJSON is the top level of a tokenizer.json file.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

type addedTokenJSON struct {
	ID         *int32  `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    bool    `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int32  `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// typeOf returns the "type" field of a JSON object.
func typeOf(raw json.RawMessage) (string, error) {
	var v struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	if v.Type == nil {
		return "", errors.New(`missing "type"`)
	}
	return *v.Type, nil
}

// parse builds a Tokenizer from the contents of a tokenizer.json file.
// Errors name the offending JSON field; the caller adds the file name.
func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if isNull(f.Model) {
		return nil, errors.New(`model: missing`)
	}
	var m modelJSON
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t := &Tokenizer{bos: -1, eos: -1}
	var err error
	if t.normalizer, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizers(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	if t.model, err = newBPE(&m); err != nil {
		return nil, fmt.Errorf("model.%w", err)
	}

	// Id tables: vocabulary first, then added tokens (which may reuse ids).
	maxID := int32(-1)
	for _, id := range m.Vocab {
		maxID = max(maxID, id)
	}
	for i, at := range f.AddedTokens {
		if at.ID == nil || at.Content == nil {
			return nil, fmt.Errorf("added_tokens[%d]: missing id or content", i)
		}
		if *at.ID < 0 {
			return nil, fmt.Errorf("added_tokens[%d]: negative id %d", i, *at.ID)
		}
		if *at.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		maxID = max(maxID, *at.ID)
	}
	n := int(maxID) + 1
	t.tokens = make([]string, n)
	t.decoded = make([]string, n)
	t.valid = make([]bool, n)
	t.special = make([]bool, n)
	t.byToken = make(map[string]int32, len(m.Vocab)+len(f.AddedTokens))
	for tok, id := range m.Vocab {
		t.tokens[id] = tok
		t.decoded[id] = byteLevelDecode(tok)
		t.valid[id] = true
		t.byToken[tok] = id
	}
	var raw, norm []addedToken
	for _, at := range f.AddedTokens {
		id, content := *at.ID, *at.Content
		t.tokens[id] = content
		t.decoded[id] = content
		t.valid[id] = true
		t.special[id] = at.Special
		t.byToken[content] = id
		// normalized defaults to true for non-special tokens, false for
		// special ones, as in Hugging Face tokenizers.
		normalized := !at.Special
		if at.Normalized != nil {
			normalized = *at.Normalized
		}
		a := addedToken{
			id: id, content: content, special: at.Special,
			singleWord: at.SingleWord, lstrip: at.LStrip, rstrip: at.RStrip,
		}
		if normalized {
			if t.normalizer != nil {
				a.content = t.normalizer.normalize(content)
			}
			norm = append(norm, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.addedRaw = newAddedMatcher(raw)
	t.addedNorm = newAddedMatcher(norm)

	if err := t.parsePostProcessor(f.PostProcessor, "post_processor"); err != nil {
		return nil, err
	}
	return t, nil
}

// parsePostProcessor records BOS/EOS from a TemplateProcessing
// post-processor. Post-processors are never applied by Encode.
func (t *Tokenizer) parsePostProcessor(raw json.RawMessage, field string) error {
	if isNull(raw) {
		return nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	switch typ {
	case "Sequence":
		var v struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		for i, p := range v.Processors {
			if err := t.parsePostProcessor(p, fmt.Sprintf("%s.processors[%d]", field, i)); err != nil {
				return err
			}
		}
	case "TemplateProcessing":
		var v struct {
			Single []struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct{} `json:"Sequence"`
			} `json:"single"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		for i, p := range v.Single {
			if p.SpecialToken == nil {
				continue
			}
			id, ok := t.byToken[p.SpecialToken.ID]
			if !ok {
				return fmt.Errorf("%s.single[%d]: token %q is not in the vocabulary", field, i, p.SpecialToken.ID)
			}
			if i == 0 {
				t.bos, t.addBOS = id, true
			} else if i == len(v.Single)-1 {
				t.eos = id
			}
		}
	default:
		// ByteLevel, RobertaProcessing, BertProcessing, ...: nothing to
		// record, and Encode applies no post-processor.
	}
	return nil
}

// checkDecoder verifies that the decoder is byte-level.
func checkDecoder(raw json.RawMessage, field string) error {
	if isNull(raw) {
		return fmt.Errorf("%s: missing; byte-level BPE needs a ByteLevel decoder", field)
	}
	typ, err := typeOf(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	switch typ {
	case "ByteLevel":
		return nil
	case "Sequence":
		var v struct {
			Decoders []json.RawMessage `json:"decoders"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		found := false
		for i, d := range v.Decoders {
			sub := fmt.Sprintf("%s.decoders[%d]", field, i)
			typ, err := typeOf(d)
			if err != nil {
				return fmt.Errorf("%s: %w", sub, err)
			}
			switch typ {
			case "ByteLevel":
				found = true
			case "Fuse":
				// Concatenation; a no-op here.
			default:
				return fmt.Errorf("%s: decoder type %q is not supported (byte-level BPE only)", sub, typ)
			}
		}
		if !found {
			return fmt.Errorf("%s: no ByteLevel decoder", field)
		}
		return nil
	default:
		return fmt.Errorf("%s: decoder type %q is not supported (byte-level BPE only)", field, typ)
	}
}

// parseMerge decodes one merges entry: "a b" or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	raw = bytes.TrimSpace(raw)
	if a, b, ok := parseMergeFast(raw); ok {
		return a, b, nil
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", err
		}
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("want two tokens separated by one space, got %q", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil {
		return "", "", fmt.Errorf("want \"a b\" or [\"a\", \"b\"], got %.60s", raw)
	}
	if len(pair) != 2 || pair[0] == "" || pair[1] == "" {
		return "", "", fmt.Errorf("want a pair of non-empty tokens, got %q", pair)
	}
	return pair[0], pair[1], nil
}

// parseMergeFast decodes the common forms "a b" and ["a","b"] when they
// contain no escapes; ok is false when parseMerge must do the work.
func parseMergeFast(raw []byte) (a, b string, ok bool) {
	if bytes.IndexByte(raw, '\\') >= 0 || len(raw) < 2 {
		return "", "", false
	}
	switch raw[0] {
	case '"':
		if raw[len(raw)-1] != '"' {
			return "", "", false
		}
		l, r, found := bytes.Cut(raw[1:len(raw)-1], []byte(" "))
		if !found || len(l) == 0 || len(r) == 0 || bytes.IndexByte(r, ' ') >= 0 || bytes.IndexByte(r, '"') >= 0 || bytes.IndexByte(l, '"') >= 0 {
			return "", "", false
		}
		return string(l), string(r), true
	case '[':
		// ["a","b"], possibly with white space around the elements.
		in := bytes.TrimSpace(raw[1 : len(raw)-1])
		if raw[len(raw)-1] != ']' || len(in) < 2 || in[0] != '"' {
			return "", "", false
		}
		end := bytes.IndexByte(in[1:], '"') + 1
		if end <= 1 {
			return "", "", false
		}
		l := in[1:end]
		rest := bytes.TrimSpace(in[end+1:])
		if len(rest) == 0 || rest[0] != ',' {
			return "", "", false
		}
		rest = bytes.TrimSpace(rest[1:])
		if len(rest) < 3 || rest[0] != '"' || rest[len(rest)-1] != '"' {
			return "", "", false
		}
		r := rest[1 : len(rest)-1]
		if bytes.IndexByte(r, '"') >= 0 {
			return "", "", false
		}
		return string(l), string(r), true
	}
	return "", "", false
}
