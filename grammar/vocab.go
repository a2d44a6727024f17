package grammar

import (
	"fmt"
	"slices"
	"strings"
)

// Vocabulary is a tokenizer's tokens as byte strings, arranged in a trie
// so that a grammar node's allowed tokens are found in one walk that
// shares the work of common prefixes. It is immutable and safe for
// concurrent use; build it once per tokenizer.
type Vocabulary struct {
	tokens []string // id -> bytes; "" for ids no grammar may produce
	// The trie in depth-first order: entry i is reached by reading byte[i]
	// after its parent (the nearest earlier entry of depth depth[i]-1);
	// its subtree ends before skip[i]; the tokens that end at it are
	// ids[first[i]:first[i+1]].
	byte     []byte
	depth    []int32
	skip     []int32
	first    []int32
	ids      []int32
	maxDepth int // the longest token
}

// NewVocabulary indexes tokens: tokens[id] is the text (bytes) token id
// stands for. Ids with empty text (special tokens such as EOS, unused ids)
// are never allowed by a grammar; the engine decides about EOS.
func NewVocabulary(tokens []string) *Vocabulary {
	v := &Vocabulary{tokens: slices.Clone(tokens)}
	order := make([]int32, 0, len(tokens))
	for id, t := range tokens {
		if t != "" {
			order = append(order, int32(id))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := strings.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	var path []int32 // entry at each depth-1 of the current path
	var open []int32 // entries whose subtree has not ended, by depth
	prev := ""
	for _, id := range order {
		t := tokens[id]
		lcp := 0
		for lcp < len(t) && lcp < len(prev) && t[lcp] == prev[lcp] {
			lcp++
		}
		path = path[:lcp]
		for len(open) > lcp {
			v.skip[open[len(open)-1]] = int32(len(v.byte))
			open = open[:len(open)-1]
		}
		v.maxDepth = max(v.maxDepth, len(t))
		for d := lcp; d < len(t); d++ {
			e := int32(len(v.byte))
			v.byte = append(v.byte, t[d])
			v.depth = append(v.depth, int32(d+1))
			v.skip = append(v.skip, 0)
			v.first = append(v.first, int32(len(v.ids)))
			path = append(path, e)
			open = append(open, e)
		}
		v.ids = append(v.ids, id)
		prev = t
	}
	for _, e := range open {
		v.skip[e] = int32(len(v.byte))
	}
	v.first = append(v.first, int32(len(v.ids)))
	return v
}

// Size is the number of token ids.
func (v *Vocabulary) Size() int { return len(v.tokens) }

// Token is the text of id ("" when a grammar may never produce it).
func (v *Vocabulary) Token(id int32) string {
	if id < 0 || int(id) >= len(v.tokens) {
		return ""
	}
	return v.tokens[id]
}

// String describes the vocabulary.
func (v *Vocabulary) String() string {
	return fmt.Sprintf("vocabulary of %d ids (%d with text, trie of %d nodes)", len(v.tokens), len(v.ids), len(v.byte))
}
