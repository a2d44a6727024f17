package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// gpt2Pattern is the pre-tokenization regular expression of GPT-2, used by
// the ByteLevel pre-tokenizer when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// A preTokenizer splits each piece of text into smaller pieces.
type preTokenizer interface {
	// split appends the pieces of every element of in to a new slice. It
	// may reuse s.next and must not retain in.
	split(s *scratch, in []string) []string
}

// span is a byte range [start, end) of a string, with whether it is a match
// of the splitting pattern.
type span struct {
	start, end int
	match      bool
}

// splitBehavior is how a pattern's matches are kept.
type splitBehavior int

const (
	removed splitBehavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]splitBehavior{
	"Removed":            removed,
	"Isolated":           isolated,
	"MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext":     mergedWithNext,
	"Contiguous":         contiguous,
}

// matcher finds the non-overlapping matches of a pattern in s, appending
// them to spans (with match set) in order.
type matcher interface {
	find(s *scratch, text string, spans []span) []span
}

// regexMatcher matches a regular expression with Oniguruma-like semantics.
type regexMatcher struct{ re *regexp2.Regexp }

func compileRegex(pattern string) (*regexp2.Regexp, error) {
	return regexp2.Compile(pattern, regexp2.None)
}

func (m regexMatcher) find(s *scratch, text string, spans []span) []span {
	// regexp2 works on runes; map rune indexes back to byte offsets so that
	// pieces are substrings of text (invalid bytes are kept as they are).
	runes, offs := s.runes[:0], s.offs[:0]
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(text))
	s.runes, s.offs = runes, offs
	match, err := m.re.FindRunesMatch(runes)
	for err == nil && match != nil {
		if match.Length > 0 {
			spans = append(spans, span{offs[match.Index], offs[match.Index+match.Length], true})
		}
		match, err = m.re.FindNextMatch(match)
	}
	// regexp2 only fails on a match timeout, which is not set.
	return spans
}

// literalMatcher matches a literal string.
type literalMatcher struct{ lit string }

func (m literalMatcher) find(_ *scratch, text string, spans []span) []span {
	if m.lit == "" {
		return spans
	}
	for i := 0; ; {
		j := strings.Index(text[i:], m.lit)
		if j < 0 {
			return spans
		}
		spans = append(spans, span{i + j, i + j + len(m.lit), true})
		i += j + len(m.lit)
	}
}

// numericMatcher matches each numeric rune (Unicode category N) on its own.
type numericMatcher struct{}

func (numericMatcher) find(_ *scratch, text string, spans []span) []span {
	for i, r := range text {
		if unicode.IsNumber(r) {
			spans = append(spans, span{i, i + utf8.RuneLen(r), true})
		}
	}
	return spans
}

// splitter is the Split pre-tokenizer (and Digits, which is a Split on
// numeric characters).
type splitter struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (p *splitter) split(s *scratch, in []string) []string {
	out := s.next[:0]
	for _, text := range in {
		out = p.splitOne(s, text, out)
	}
	s.next = in[:0]
	return out
}

// splitOne appends the pieces of text, following Hugging Face's
// NormalizedString::split.
func (p *splitter) splitOne(s *scratch, text string, out []string) []string {
	if text == "" {
		return out
	}
	found := p.m.find(s, text, s.spans[:0])
	s.spans = found
	if p.behavior == isolated && !p.invert {
		// The common case: matches and the gaps between them.
		prev := 0
		for _, sp := range found {
			if sp.start > prev {
				out = append(out, text[prev:sp.start])
			}
			out = append(out, text[sp.start:sp.end])
			prev = sp.end
		}
		if prev < len(text) {
			out = append(out, text[prev:])
		}
		return out
	}
	// Complete the matches with the gaps between them.
	all := make([]span, 0, 2*len(found)+1)
	prev := 0
	for _, sp := range found {
		if sp.start > prev {
			all = append(all, span{prev, sp.start, false})
		}
		all = append(all, sp)
		prev = sp.end
	}
	if prev < len(text) {
		all = append(all, span{prev, len(text), false})
	}
	if p.invert {
		for i := range all {
			all[i].match = !all[i].match
		}
	}
	switch p.behavior {
	case removed:
		for _, sp := range all {
			if !sp.match {
				out = append(out, text[sp.start:sp.end])
			}
		}
		return out
	case isolated:
		// Every span is a piece.
	case contiguous:
		merged := all[:0]
		prevMatch := false
		for i, sp := range all {
			if i > 0 && sp.match == prevMatch {
				merged[len(merged)-1].end = sp.end
			} else {
				merged = append(merged, sp)
			}
			prevMatch = sp.match
		}
		all = merged
	case mergedWithPrevious:
		merged := all[:0]
		prevMatch := false
		for _, sp := range all {
			if sp.match && !prevMatch && len(merged) > 0 {
				merged[len(merged)-1].end = sp.end
			} else {
				merged = append(merged, sp)
			}
			prevMatch = sp.match
		}
		all = merged
	case mergedWithNext:
		// Walk backwards, merging each match into the following piece.
		var rev []span
		prevMatch := false
		for i := len(all) - 1; i >= 0; i-- {
			sp := all[i]
			if sp.match && !prevMatch && len(rev) > 0 {
				rev[len(rev)-1].start = sp.start
			} else {
				rev = append(rev, sp)
			}
			prevMatch = sp.match
		}
		all = all[:0]
		for i := len(rev) - 1; i >= 0; i-- {
			all = append(all, rev[i])
		}
	}
	for _, sp := range all {
		if sp.end > sp.start {
			out = append(out, text[sp.start:sp.end])
		}
	}
	return out
}

// byteLevelPre is the ByteLevel pre-tokenizer. The mapping of bytes to
// runes itself is left to the BPE model, which works on bytes.
type byteLevelPre struct {
	addPrefixSpace bool
	re             *splitter // nil unless use_regex
}

func (p *byteLevelPre) split(s *scratch, in []string) []string {
	if p.addPrefixSpace {
		for i, t := range in {
			if len(t) > 0 && t[0] != ' ' {
				in[i] = " " + t
			}
		}
	}
	if p.re != nil {
		return p.re.split(s, in)
	}
	return in
}

// parsePreTokenizers parses the pre_tokenizer field into a flat list that
// must end with ByteLevel.
func parsePreTokenizers(raw json.RawMessage) ([]preTokenizer, error) {
	const field = "pre_tokenizer"
	if isNull(raw) {
		return nil, fmt.Errorf("%s: missing; byte-level BPE needs a ByteLevel pre-tokenizer", field)
	}
	var list []preTokenizer
	if err := flattenPre(raw, field, &list); err != nil {
		return nil, err
	}
	byteLevel := -1
	for i, p := range list {
		if _, ok := p.(*byteLevelPre); ok {
			byteLevel = i
		}
	}
	if byteLevel < 0 {
		return nil, fmt.Errorf("%s: no ByteLevel pre-tokenizer; only byte-level BPE is supported", field)
	}
	if byteLevel != len(list)-1 {
		return nil, fmt.Errorf("%s: pre-tokenizers after ByteLevel are not supported", field)
	}
	return list, nil
}

func flattenPre(raw json.RawMessage, field string, list *[]preTokenizer) error {
	typ, err := typeOf(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	switch typ {
	case "Sequence":
		var v struct {
			Pretokenizers []json.RawMessage `json:"pretokenizers"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		for i, p := range v.Pretokenizers {
			if err := flattenPre(p, fmt.Sprintf("%s.pretokenizers[%d]", field, i), list); err != nil {
				return err
			}
		}
	case "Split":
		var v struct {
			Pattern  json.RawMessage `json:"pattern"`
			Behavior string          `json:"behavior"`
			Invert   bool            `json:"invert"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		m, err := parsePattern(v.Pattern)
		if err != nil {
			return fmt.Errorf("%s.pattern: %w", field, err)
		}
		b, ok := behaviors[v.Behavior]
		if !ok {
			return fmt.Errorf("%s.behavior: unknown behavior %q", field, v.Behavior)
		}
		*list = append(*list, &splitter{m: m, behavior: b, invert: v.Invert})
	case "Digits":
		var v struct {
			IndividualDigits bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		b := contiguous
		if v.IndividualDigits {
			b = isolated
		}
		*list = append(*list, &splitter{m: numericMatcher{}, behavior: b})
	case "ByteLevel":
		var v struct {
			AddPrefixSpace bool  `json:"add_prefix_space"`
			UseRegex       *bool `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		p := &byteLevelPre{addPrefixSpace: v.AddPrefixSpace}
		if v.UseRegex == nil || *v.UseRegex { // use_regex defaults to true
			p.re = &splitter{m: newGPT2Matcher(), behavior: isolated}
		}
		*list = append(*list, p)
	default:
		return fmt.Errorf("%s: pre-tokenizer type %q is not supported", field, typ)
	}
	return nil
}

// parsePattern decodes {"Regex": "..."} or {"String": "..."}.
func parsePattern(raw json.RawMessage) (matcher, error) {
	var v struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch {
	case v.Regex != nil:
		return newRegexMatcher(*v.Regex)
	case v.String != nil:
		return literalMatcher{*v.String}, nil
	default:
		return nil, fmt.Errorf(`want {"Regex": ...} or {"String": ...}, got %.60s`, raw)
	}
}

// newRegexMatcher compiles a Split regular expression, using a
// hand-written matcher for the patterns of common tokenizers.
func newRegexMatcher(pattern string) (matcher, error) {
	if m := fastMatcherFor(pattern); m != nil {
		return m, nil
	}
	return newRegexp2Matcher(pattern)
}

// newRegexp2Matcher compiles a Split regular expression with regexp2.
func newRegexp2Matcher(pattern string) (matcher, error) {
	re, err := compileRegex(pattern)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pattern, err)
	}
	return regexMatcher{re}, nil
}

func newGPT2Matcher() matcher {
	m, err := newRegexMatcher(gpt2Pattern)
	if err != nil {
		panic(err) // a constant pattern
	}
	return m
}
