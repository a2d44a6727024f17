package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"
)

// A normalizer rewrites text before pre-tokenization.
type normalizer interface {
	normalize(s string) string
}

type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string) string {
	if isASCII(s) {
		return s // ASCII is invariant under every normalization form
	}
	return n.form.String(s)
}

type lowercase struct{}

func (lowercase) normalize(s string) string { return strings.ToLower(s) }

type strip struct{ left, right bool }

func (n strip) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

type prepend struct{ prefix string }

func (n prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}

type replace struct {
	lit     string          // literal pattern, when re is nil
	re      *regexp2.Regexp // regular expression pattern
	content string
}

func (n replace) normalize(s string) string {
	if n.re == nil {
		if n.lit == "" {
			return s
		}
		return strings.ReplaceAll(s, n.lit, n.content)
	}
	out, err := n.re.ReplaceFunc(s, func(regexp2.Match) string { return n.content }, -1, -1)
	if err != nil {
		return s // only on a match timeout, which is not set
	}
	return out
}

type sequence []normalizer

func (n sequence) normalize(s string) string {
	for _, m := range n {
		s = m.normalize(s)
	}
	return s
}

// parseNormalizer parses a normalizer; nil means none.
func parseNormalizer(raw json.RawMessage, field string) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	typ, err := typeOf(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	switch typ {
	case "NFC":
		return unicodeNormalizer{norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "Strip":
		var v struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return strip{v.Left, v.Right}, nil
	case "Prepend":
		var v struct {
			Prepend string `json:"prepend"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return prepend{v.Prepend}, nil
	case "Replace":
		var v struct {
			Pattern struct {
				Regex  *string `json:"Regex"`
				String *string `json:"String"`
			} `json:"pattern"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		switch {
		case v.Pattern.Regex != nil:
			re, err := compileRegex(*v.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s.pattern: regex %q: %w", field, *v.Pattern.Regex, err)
			}
			return replace{re: re, content: v.Content}, nil
		case v.Pattern.String != nil:
			return replace{lit: *v.Pattern.String, content: v.Content}, nil
		default:
			return nil, fmt.Errorf(`%s.pattern: want {"Regex": ...} or {"String": ...}`, field)
		}
	case "Sequence":
		var v struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		var seq sequence
		for i, r := range v.Normalizers {
			n, err := parseNormalizer(r, fmt.Sprintf("%s.normalizers[%d]", field, i))
			if err != nil {
				return nil, err
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		if len(seq) == 0 {
			return nil, nil
		}
		return seq, nil
	default:
		return nil, fmt.Errorf("%s: normalizer type %q is not supported", field, typ)
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
