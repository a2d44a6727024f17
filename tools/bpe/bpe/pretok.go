// Package bpe trains GPT-2-style byte-level BPE tokenizers and writes them as
// Hugging Face tokenizer.json files that strata's tokenizer package (and
// Hugging Face tokenizers) load.
//
// Training follows the usual recipe: text is pre-tokenized with
// DeepSeek-V3's split patterns, each pre-token is seen as a sequence of
// bytes, and the most frequent adjacent pair of symbols, counted over all
// pre-tokens weighted by how often each occurs, is merged into a new symbol
// until the vocabulary is full. Ties between pairs of equal count go to the
// pair whose left symbol, then right symbol, has the smaller byte string, so
// training is deterministic.
package bpe

import (
	"fmt"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// DeepSeek-V3's pre-tokenizer: three Split(Isolated) patterns applied in
// turn, digits in groups of up to three, runs of CJK characters, then
// words, punctuation and white space. strata's tokenizer has a hand-written
// matcher for each of them.
const (
	PatternDigits = `\p{N}{1,3}`
	PatternCJK    = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	PatternMain   = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// Patterns returns DeepSeek-V3's split patterns in the order they apply.
func Patterns() []string { return []string{PatternDigits, PatternCJK, PatternMain} }

// PreTokenizer splits text into pre-tokens with a sequence of regular
// expressions, each splitting every piece the previous ones produced into
// its matches and the text between them (Hugging Face's Split with
// behavior Isolated). It is not safe for concurrent use; make one per
// goroutine.
type PreTokenizer struct {
	res   []*regexp2.Regexp
	runes []rune
	offs  []int
	a, b  []string
}

// NewPreTokenizer compiles patterns with regexp2, which has the same
// semantics as the Oniguruma engine of Hugging Face tokenizers for these
// patterns.
func NewPreTokenizer(patterns []string) (*PreTokenizer, error) {
	p := &PreTokenizer{}
	for _, pat := range patterns {
		re, err := regexp2.Compile(pat, regexp2.None)
		if err != nil {
			return nil, fmt.Errorf("bpe: pattern %q: %w", pat, err)
		}
		p.res = append(p.res, re)
	}
	return p, nil
}

// Split returns the pre-tokens of text, in order; their concatenation is
// text. The returned slice is reused by the next call.
func (p *PreTokenizer) Split(text string) []string {
	pieces := append(p.a[:0], text)
	next := p.b[:0]
	for _, re := range p.res {
		next = next[:0]
		for _, piece := range pieces {
			next = p.splitOne(re, piece, next)
		}
		pieces, next = next, pieces
	}
	p.a, p.b = pieces, next
	return pieces
}

// splitOne appends the matches of re in s and the non-empty gaps between
// them to out.
func (p *PreTokenizer) splitOne(re *regexp2.Regexp, s string, out []string) []string {
	if s == "" {
		return out
	}
	runes, offs := p.runes[:0], p.offs[:0]
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(s))
	p.runes, p.offs = runes, offs
	last := 0
	m, err := re.FindRunesMatch(runes)
	for err == nil && m != nil {
		if m.Length > 0 {
			start, end := offs[m.Index], offs[m.Index+m.Length]
			if start > last {
				out = append(out, s[last:start])
			}
			out = append(out, s[start:end])
			last = end
		}
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		// regexp2 fails only on a match timeout, and none is set.
		panic(fmt.Sprintf("bpe: regexp2: %v", err))
	}
	if last < len(s) {
		out = append(out, s[last:])
	}
	return out
}

// ByteToRune returns GPT-2's reversible map from bytes to printable runes,
// used to spell byte-level tokens: printable Latin-1 bytes stand for
// themselves and the others (controls, space, 0x7f-0xa0, 0xad) map to
// U+0100 onwards in byte order.
func ByteToRune() [256]rune {
	var m [256]rune
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = 256 + n
			n++
		}
	}
	return m
}

// ByteOrder returns the 256 byte values in GPT-2's vocabulary order: the
// bytes that stand for themselves first, then the others.
func ByteOrder() []byte {
	m := ByteToRune()
	order := make([]byte, 0, 256)
	for pass := 0; pass < 2; pass++ {
		for b := 0; b < 256; b++ {
			if (m[b] == rune(b)) == (pass == 0) {
				order = append(order, byte(b))
			}
		}
	}
	return order
}

// Spell returns the byte-level spelling of raw bytes s.
func Spell(m *[256]rune, s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, m[s[i]])
	}
	return string(buf)
}
