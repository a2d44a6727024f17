package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

var fastPatterns = []string{gpt2Pattern, patQwen2, patLlama3, patQwen35, patDigits3, patCJK, patDeepSeek3}

// fastSplitSeeds are texts that exercise the alternatives of the patterns.
var fastSplitSeeds = []string{
	"", " ", "  ", "a", "Hello world", " Hello  World!", "it's I'M they'Re we've 'LL 'd 'x", "''s",
	"  \n\n  x", "\t\tword", "a \r\n b\r\r\n", "x   ", "x  \n", "123 4567 ٣٤٥ ²³", "ab12cd",
	"e\u0301 \u0301x \u0301 a\u0300\u0300", "你好世界 カタカナ ひらがな 한국어", ".Net _foo 'bar $x",
	"!!! ?? ... \n", " !!\n\n", "\u00a0x \u3000y \u2028z \u0085w", "😀👍🏽 a😀b", "\xff\xfeab\xc3",
	"<|im_start|>user\nhi", "func(x int) { return x*2 }\n",
}

// TestFastMatchers compares the hand-written matchers with regexp2.
func TestFastMatchers(t *testing.T) {
	for _, p := range fastPatterns {
		for _, s := range fastSplitSeeds {
			checkFastMatcher(t, p, s)
		}
		// All seeds together, to cross their boundaries.
		checkFastMatcher(t, p, strings.Join(fastSplitSeeds, ""))
	}
}

func FuzzFastMatchers(f *testing.F) {
	for _, s := range fastSplitSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range fastPatterns {
			checkFastMatcher(t, p, s)
		}
	})
}

func checkFastMatcher(t *testing.T, pattern, s string) {
	t.Helper()
	fast := fastMatcherFor(pattern)
	if fast == nil {
		t.Fatalf("no fast matcher for %q", pattern)
	}
	slow, err := newRegexp2Matcher(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var sc scratch
	want := slow.find(&sc, s, nil)
	got := fast.find(&sc, s, nil)
	if !slices.Equal(got, want) {
		t.Fatalf("pattern %q on %q:\n fast %v\n regexp2 %v", pattern, s, got, want)
	}
}

// TestRuneClass checks the lookup tables and range shortcuts of runeClass
// against the unicode package for every rune.
func TestRuneClass(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := runeClass(r), classOf(r); got != want {
			t.Fatalf("runeClass(%U) = %#x, want %#x", r, got, want)
		}
	}
}
