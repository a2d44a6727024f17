package bpe

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestTrainOrder(t *testing.T) {
	// The classic example: pair counts are u+g 20, p+u 17, u+n 16, h+u 15.
	counts := map[string]int64{"hug": 10, "pug": 5, "pun": 12, "bun": 4, "hugs": 5}
	merges, err := Train(counts, Options{Tokens: 1000, MinCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []Merge{
		{"u", "g"},   // 20
		{"u", "n"},   // 16: p+u fell to 5 when pug became p+ug
		{"h", "ug"},  // 15
		{"p", "un"},  // 12
		{"hug", "s"}, // 5, a tie with p+ug: "hug" < "p"
		{"p", "ug"},  // 5
		{"b", "un"},  // 4
	}
	if !slices.Equal(merges, want) {
		t.Errorf("merges:\n got %v\nwant %v", merges, want)
	}

	// MinCount 5 stops before b+un; Tokens stops after three new tokens.
	merges, _ = Train(counts, Options{Tokens: 1000, MinCount: 5})
	if !slices.Equal(merges, want[:6]) {
		t.Errorf("MinCount 5: got %v", merges)
	}
	merges, _ = Train(counts, Options{Tokens: 259, MinCount: 1})
	if !slices.Equal(merges, want[:3]) {
		t.Errorf("Tokens 259: got %v", merges)
	}
}

func TestTrainOverlap(t *testing.T) {
	// "aaaa" is a a a a: three a+a pairs, merged left to right into aa aa,
	// which then has one aa+aa pair.
	merges, err := Train(map[string]int64{"aaaa": 3, "aaa": 1}, Options{Tokens: 1000, MinCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []Merge{{"a", "a"}, {"aa", "aa"}, {"aa", "a"}}
	if !slices.Equal(merges, want) {
		t.Errorf("got %v, want %v", merges, want)
	}
}

// randomCounts returns pre-token counts of pseudo-random English-like text.
func randomCounts(seed uint64) map[string]int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	syll := []string{"the", "and", "th", "er", "in", "ing", "ed", "es", "or", "an", "lo", "rd", "go", "d", "s", "e", "a"}
	counts := make(map[string]int64)
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		if r.IntN(4) > 0 {
			b.WriteByte(' ')
		}
		for n := 1 + r.IntN(4); n > 0; n-- {
			b.WriteString(syll[r.IntN(len(syll))])
		}
		counts[b.String()] += int64(1 + r.IntN(50))
	}
	return counts
}

func TestTrainDeterministic(t *testing.T) {
	counts := randomCounts(7)
	first, err := Train(counts, Options{Tokens: 600})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) < 100 {
		t.Fatalf("only %d merges", len(first))
	}
	for run := 0; run < 3; run++ {
		// A fresh map: a different iteration order.
		c := make(map[string]int64)
		for k, v := range counts {
			c[k] = v
		}
		again, err := Train(c, Options{Tokens: 600})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(first, again) {
			t.Fatalf("run %d learned different merges", run)
		}
	}
}

// TestTrainMatchesNaive checks the incremental pair counts against a
// trainer that recounts every pair before each merge.
func TestTrainMatchesNaive(t *testing.T) {
	counts := randomCounts(3)
	got, err := Train(counts, Options{Tokens: 400})
	if err != nil {
		t.Fatal(err)
	}
	words := make(map[string][]string)
	for w := range counts {
		for i := 0; i < len(w); i++ {
			words[w] = append(words[w], w[i:i+1])
		}
	}
	vocab := make(map[string]bool)
	for b := 0; b < 256; b++ {
		vocab[string([]byte{byte(b)})] = true
	}
	var want []Merge
	for len(vocab) < 400 {
		pairs := make(map[Merge]int64)
		for w, syms := range words {
			for i := 0; i+1 < len(syms); i++ {
				pairs[Merge{syms[i], syms[i+1]}] += counts[w]
			}
		}
		var best Merge
		var bestN int64
		for p, n := range pairs {
			if n > bestN || n == bestN && (p.Left < best.Left || p.Left == best.Left && p.Right < best.Right) {
				best, bestN = p, n
			}
		}
		if bestN < 2 {
			break
		}
		want = append(want, best)
		vocab[best.Left+best.Right] = true
		for w, syms := range words {
			var out []string
			for i := 0; i < len(syms); i++ {
				if i+1 < len(syms) && syms[i] == best.Left && syms[i+1] == best.Right {
					out = append(out, best.Left+best.Right)
					i++
				} else {
					out = append(out, syms[i])
				}
			}
			words[w] = out
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("merge %d: got %v, want %v", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d merges, want %d", len(got), len(want))
	}
}

func TestPreTokenizer(t *testing.T) {
	p, err := NewPreTokenizer(Patterns())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"In the beginning God created.", []string{"In", " the", " beginning", " God", " created", "."}},
		{"the LORD's house", []string{"the", " LORD", "'s", " house"}},
		{"Genesis 1\nIn", []string{"Genesis", " ", "1", "\n", "In"}},
		{"day.\n\nAnd", []string{"day", ".\n\n", "And"}},
		{"12345 x", []string{"123", "45", " x"}},
		{"a  b", []string{"a", " ", " b"}},
		{"hé—said", []string{"hé", "—", "said"}},
		{"日本語です", []string{"日本語です"}},
		{"", nil},
	} {
		got := p.Split(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestByteOrder(t *testing.T) {
	order := ByteOrder()
	if len(order) != 256 || order[0] != '!' || order[93] != '~' {
		t.Fatalf("order starts %q, ends %q", order[:3], order[250:])
	}
	seen := make(map[byte]bool)
	for _, b := range order {
		seen[b] = true
	}
	if len(seen) != 256 {
		t.Fatalf("%d distinct bytes", len(seen))
	}
	m := ByteToRune()
	if got := Spell(&m, " the\n"); got != "ĠtheĊ" {
		t.Errorf("Spell = %q", got)
	}
}

func TestModelDuplicateMerges(t *testing.T) {
	merges := []Merge{{"a", "b"}, {"ab", "c"}, {"b", "c"}, {"a", "bc"}}
	m, err := NewModel([]AddedToken{{Content: "<s>", Special: true}}, merges)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.VocabSize(); got != 1+256+3 {
		t.Errorf("VocabSize = %d, want %d (abc once)", got, 1+256+3)
	}
	if ids := m.Encode("abc", nil); len(ids) != 1 || ids[0] != 1+256+1 {
		t.Errorf("Encode(abc) = %v", ids)
	}
	if _, err := NewModel(nil, []Merge{{"ab", "c"}}); err == nil {
		t.Error("NewModel accepted a merge of an unknown token")
	}
	if _, err := NewModel(nil, []Merge{{"a", "b"}, {"a", "b"}}); err == nil {
		t.Error("NewModel accepted a repeated merge")
	}
	if _, err := NewModel([]AddedToken{{Content: "ab"}}, []Merge{{"a", "b"}}); err == nil {
		t.Error("NewModel accepted a learned token spelled like an added token")
	}
}

func ExampleTrain() {
	// t+h and h+e both occur 10 times; the tie goes to the pair whose left
	// part sorts first.
	counts := map[string]int64{" the": 5, " then": 2, "the": 3}
	merges, _ := Train(counts, Options{Tokens: 259})
	for _, m := range merges {
		fmt.Printf("%q + %q\n", m.Left, m.Right)
	}
	// Output:
	// "h" + "e"
	// "t" + "he"
	// " " + "the"
}
