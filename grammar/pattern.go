package grammar

import (
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// JSON Schema's pattern: a regular expression the string must match
// somewhere (unless anchored with ^ and $). The expression is read with Go's
// regexp/syntax (Perl flags), which covers the ECMA-262 subset schemas use:
// literals, classes (\d \w \s, [...], negations), ., groups, alternation,
// * + ? {n,m} and case folding; an anchor anywhere but at the ends, word
// boundaries and other assertions are refused. It becomes a regular
// language over the string's text, each character written in one form:
// itself, or the escape JSON requires ("\"", "\\", "\n", "\u0001").

// patternExpr is the contents of a JSON string (raw: the unescaped text)
// whose value matches pattern.
func patternExpr(pattern string, raw bool) (Expr, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("pattern %q is not supported: %v", pattern, err)
	}
	re = re.Simplify()
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	begin, end := false, false
	if len(subs) > 0 && isBegin(subs[0]) {
		begin, subs = true, subs[1:]
	}
	if len(subs) > 0 && isEnd(subs[len(subs)-1]) {
		end, subs = true, subs[:len(subs)-1]
	}
	parts := make([]Expr, 0, len(subs)+2)
	any := Star(patternChar(raw))
	if !begin {
		parts = append(parts, any)
	}
	for _, s := range subs {
		x, err := regexExpr(s, raw)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", pattern, err)
		}
		parts = append(parts, x)
	}
	if !end {
		parts = append(parts, any)
	}
	return Seq(parts...), nil
}

func isBegin(re *syntax.Regexp) bool {
	return re.Op == syntax.OpBeginText || re.Op == syntax.OpBeginLine
}

func isEnd(re *syntax.Regexp) bool {
	return re.Op == syntax.OpEndText || re.Op == syntax.OpEndLine
}

// patternChar is any one character.
func patternChar(raw bool) Expr {
	if raw {
		return UTF8Char()
	}
	return charsExpr([]rune{0, unicode.MaxRune}, false)
}

func regexExpr(re *syntax.Regexp, raw bool) (Expr, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return Nothing(), nil
	case syntax.OpEmptyMatch:
		return Empty(), nil
	case syntax.OpLiteral:
		parts := make([]Expr, len(re.Rune))
		for i, r := range re.Rune {
			rs := []rune{r, r}
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					rs = append(rs, f, f)
				}
			}
			parts[i] = charsExpr(rs, raw)
		}
		return Seq(parts...), nil
	case syntax.OpCharClass:
		return charsExpr(re.Rune, raw), nil
	case syntax.OpAnyChar:
		return patternChar(raw), nil
	case syntax.OpAnyCharNotNL:
		return charsExpr([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}, raw), nil
	case syntax.OpCapture:
		return regexExpr(re.Sub[0], raw)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		x, err := regexExpr(re.Sub[0], raw)
		if err != nil {
			return nil, err
		}
		switch re.Op {
		case syntax.OpStar:
			return Star(x), nil
		case syntax.OpPlus:
			return Repeat(x, 1, -1), nil
		case syntax.OpQuest:
			return Optional(x), nil
		}
		return Repeat(x, re.Min, re.Max), nil
	case syntax.OpConcat, syntax.OpAlternate:
		xs := make([]Expr, len(re.Sub))
		for i, s := range re.Sub {
			var err error
			if xs[i], err = regexExpr(s, raw); err != nil {
				return nil, err
			}
		}
		if re.Op == syntax.OpConcat {
			return Seq(xs...), nil
		}
		return Alt(xs...), nil
	}
	return nil, fmt.Errorf("%s is not supported in a pattern", re)
}

// charsExpr is one character of the ranges (pairs lo, hi), written as
// itself or, in a JSON string (not raw), with the escape JSON requires.
func charsExpr(ranges []rune, raw bool) Expr {
	var alts []Expr
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], min(ranges[i+1], unicode.MaxRune)
		if !raw {
			for c := lo; c <= min(hi, 0x1F); c++ {
				alts = append(alts, Literal(jsonEscape(c)))
			}
			lo = max(lo, 0x20)
			for _, c := range []rune{'"', '\\'} {
				if lo <= c && c <= hi {
					alts = append(alts, Literal(jsonEscape(c)))
					if lo < c {
						alts = append(alts, utf8Range(lo, c-1)...)
					}
					lo = c + 1
				}
			}
		}
		alts = append(alts, utf8Range(lo, hi)...)
	}
	return Alt(alts...)
}

func jsonEscape(c rune) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	return fmt.Sprintf(`\u%04x`, c)
}

// utf8Range is the UTF-8 encodings of the scalar values from lo to hi
// (surrogates left out), as sequences of byte ranges.
func utf8Range(lo, hi rune) []Expr {
	if lo > hi {
		return nil
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		return append(utf8Range(lo, 0xD7FF), utf8Range(0xE000, hi)...)
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && hi > m {
			return append(utf8Range(lo, m), utf8Range(m+1, hi)...)
		}
	}
	if hi < 0x80 {
		return []Expr{Bytes(byte(lo), byte(hi))}
	}
	for i := 1; i < utf8.UTFMax; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				return append(utf8Range(lo, lo|m), utf8Range((lo|m)+1, hi)...)
			}
			if hi&m != m {
				return append(utf8Range(lo, (hi&^m)-1), utf8Range(hi&^m, hi)...)
			}
		}
	}
	a := make([]byte, utf8.UTFMax)
	b := make([]byte, utf8.UTFMax)
	n := utf8.EncodeRune(a, lo)
	utf8.EncodeRune(b, hi)
	parts := make([]Expr, n)
	for i := range n {
		parts[i] = Bytes(a[i], b[i])
	}
	return []Expr{Seq(parts...)}
}
