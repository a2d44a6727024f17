package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the pre-tokenization regular expressions of
// common tokenizers. They are used instead of regexp2 when a Split pattern
// (or ByteLevel's GPT-2 pattern) is exactly one of these strings, and must
// find exactly the same matches; FuzzFastMatchers checks them against
// regexp2.
const (
	// patQwen2 is Qwen2's, Qwen2.5's and Qwen3's pattern.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patLlama3 is Llama 3's: numbers in groups of up to three digits.
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patQwen35 is Qwen3.5's (as quoted by llama.cpp): letters include
	// combining marks.
	patQwen35 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patDigits3 and patCJK are DeepSeek-V3's first two Split patterns,
	// patDeepSeek3 its third.
	patDigits3   = `\p{N}{1,3}`
	patCJK       = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	patDeepSeek3 = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// fastMatcherFor returns a hand-written matcher for pattern, or nil.
func fastMatcherFor(pattern string) matcher {
	switch pattern {
	case gpt2Pattern:
		return fastMatcher{gpt2Find}
	case patQwen2:
		return fastMatcher{func(s string, i int) int { return qwenFind(s, i, 1, false) }}
	case patLlama3:
		return fastMatcher{func(s string, i int) int { return qwenFind(s, i, 3, false) }}
	case patQwen35:
		return fastMatcher{func(s string, i int) int { return qwenFind(s, i, 1, true) }}
	case patDigits3:
		return fastMatcher{digits3Find}
	case patCJK:
		return fastMatcher{cjkFind}
	case patDeepSeek3:
		return fastMatcher{deepSeek3Find}
	}
	return nil
}

// fastMatcher scans text left to right; at each rune, at returns the end of
// the match starting there, or -1.
type fastMatcher struct {
	at func(s string, i int) int
}

func (m fastMatcher) find(_ *scratch, text string, spans []span) []span {
	for i := 0; i < len(text); {
		if j := m.at(text, i); j > i {
			spans = append(spans, span{i, j, true})
			i = j
			continue
		}
		if text[i] < utf8.RuneSelf {
			i++
		} else {
			_, n := utf8.DecodeRuneInString(text[i:])
			i += n
		}
	}
	return spans
}

// Character classes, as regexp2 defines them: \s is unicode.IsSpace, \p{X}
// the Unicode general category X.
const (
	cL uint8 = 1 << iota // letter
	cN                   // number
	cP                   // punctuation
	cS                   // symbol
	cM                   // mark
	cW                   // white space (\s)
)

// asciiClass holds the classes of ASCII characters.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classOf(r)
	}
	return t
}()

// lowClass holds the classes of runes below U+0800 (Latin, Greek,
// Cyrillic, Hebrew, Arabic, ...).
var lowClass = func() (t [0x800]uint8) {
	for r := range rune(len(t)) {
		t[r] = classOf(r)
	}
	return t
}()

// runeClass returns the classes of r.
func runeClass(r rune) uint8 {
	switch {
	case r < rune(len(lowClass)):
		return lowClass[r]
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0xAC00 && r <= 0xD7A3:
		// CJK Unified Ideographs and Hangul Syllables are all letters
		// (Lo) in Unicode 15.
		return cL
	}
	return classOf(r)
}

func classOf(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= cL
	}
	if unicode.IsNumber(r) {
		c |= cN
	}
	if unicode.IsPunct(r) {
		c |= cP
	}
	if unicode.IsSymbol(r) {
		c |= cS
	}
	if unicode.IsMark(r) {
		c |= cM
	}
	if unicode.IsSpace(r) {
		c |= cW
	}
	return c
}

// next returns the class and width of the rune at s[i] (i < len(s)).
// Invalid UTF-8 decodes as U+FFFD (a symbol) of width 1, as in the regexp2
// path.
func next(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return runeClass(r), n
}

// classAt returns the class of the rune at s[i], or 0 past the end.
func classAt(s string, i int) uint8 {
	if i >= len(s) {
		return 0
	}
	c, _ := next(s, i)
	return c
}

// run returns the end of the run of runes whose class intersects want,
// starting at i.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b]&want == 0 {
				break
			}
			i++
			continue
		}
		c, n := next(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// newlines returns the end of the run of \r and \n starting at i.
func newlines(s string, i int) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return i
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, ASCII-case-insensitively
// if fold, returning the end or -1.
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return -1
	}
	lower := func(c byte) byte {
		if fold && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return -1
}

// spaces matches the three whitespace alternatives shared by these
// patterns at i (which must be white space):
//
//	\s*[\r\n]+   (only if withNewline)
//	\s+(?!\S)
//	\s+
func spaces(s string, i int, withNewline bool) int {
	// The whitespace run [i, j), with the start of its last rune and the
	// end of its last \r or \n.
	j, last, nl := i, i, -1
	for j < len(s) {
		c, n := next(s, j)
		if c&cW == 0 {
			break
		}
		if s[j] == '\r' || s[j] == '\n' {
			nl = j + 1
		}
		last = j
		j += n
	}
	if withNewline && nl > 0 {
		return nl
	}
	if j == len(s) || last == i {
		// At the end of text \s+(?!\S) takes everything; a single
		// space before non-space fails it, and \s+ takes it.
		return j
	}
	return last // leave the last space to the next token
}

// gpt2Find: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2Find(s string, i int) int {
	if j := contraction(s, i, false); j > 0 {
		return j
	}
	c, _ := next(s, i)
	start := i
	if s[i] == ' ' {
		if i+1 >= len(s) {
			return i + 1 // \s+
		}
		start = i + 1
		c, _ = next(s, start)
	}
	switch {
	case c&cL != 0:
		return run(s, start, cL)
	case c&cN != 0:
		return run(s, start, cN)
	case c&(cW|cL|cN) == 0:
		return runNot(s, start, cW|cL|cN)
	}
	return spaces(s, i, false)
}

// runNot returns the end of the run of runes whose class does not intersect
// avoid, starting at i.
func runNot(s string, i int, avoid uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b]&avoid != 0 {
				break
			}
			i++
			continue
		}
		c, n := next(s, i)
		if c&avoid != 0 {
			break
		}
		i += n
	}
	return i
}

// qwenFind implements patQwen2 (maxDigits 1), patLlama3 (maxDigits 3) and
// patQwen35 (marks):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where with marks \p{L} in the second and fourth alternatives becomes
// [\p{L}\p{M}].
func qwenFind(s string, i int, maxDigits int, marks bool) int {
	if j := contraction(s, i, true); j > 0 {
		return j
	}
	letters := cL
	if marks {
		letters |= cM
	}
	c, n := next(s, i)
	// [^\r\n\p{L}\p{N}]?<letters>+
	if c&letters != 0 {
		return run(s, i, letters)
	}
	if c&(cL|cN) == 0 && s[i] != '\r' && s[i] != '\n' && classAt(s, i+n)&letters != 0 {
		return run(s, i+n, letters)
	}
	// \p{N}{1,maxDigits}
	if c&cN != 0 {
		j := i + n
		for k := 1; k < maxDigits && j < len(s); k++ {
			c2, n2 := next(s, j)
			if c2&cN == 0 {
				break
			}
			j += n2
		}
		return j
	}
	// ?[^\s<letters>\p{N}]+[\r\n]*
	other := cW | letters | cN
	if c&other == 0 {
		return newlines(s, runNot(s, i, other))
	}
	if s[i] == ' ' && i+1 < len(s) && classAt(s, i+1)&other == 0 {
		return newlines(s, runNot(s, i+1, other))
	}
	if c&cW != 0 {
		return spaces(s, i, true)
	}
	return -1
}

// digits3Find: \p{N}{1,3}
func digits3Find(s string, i int) int {
	j := i
	for k := 0; k < 3 && j < len(s); k++ {
		c, n := next(s, j)
		if c&cN == 0 {
			break
		}
		j += n
	}
	return j
}

func isCJK(r rune) bool {
	return (r >= 0x4e00 && r <= 0x9fa5) || (r >= 0x3040 && r <= 0x309f) || (r >= 0x30a0 && r <= 0x30ff)
}

// cjkFind: [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+
func cjkFind(s string, i int) int {
	j := i
	for j < len(s) && s[j] >= utf8.RuneSelf {
		r, n := utf8.DecodeRuneInString(s[j:])
		if !isCJK(r) {
			break
		}
		j += n
	}
	return j
}

func isASCIIPunct(c byte) bool {
	return c < utf8.RuneSelf && asciiClass[c]&(cP|cS) != 0
}

func isASCIILetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// deepSeek3Find:
//
//	[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//	 ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func deepSeek3Find(s string, i int) int {
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	c, n := next(s, i)
	if c&(cL|cM) != 0 {
		return run(s, i, cL|cM)
	}
	if c&(cL|cP|cS) == 0 && s[i] != '\r' && s[i] != '\n' && classAt(s, i+n)&(cL|cM) != 0 {
		return run(s, i+n, cL|cM)
	}
	if c&(cP|cS) != 0 {
		return newlines(s, run(s, i, cP|cS))
	}
	if s[i] == ' ' && classAt(s, i+1)&(cP|cS) != 0 {
		return newlines(s, run(s, i+1, cP|cS))
	}
	if c&cW != 0 {
		return spaces(s, i, true)
	}
	return -1
}
