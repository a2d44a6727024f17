package tokenizer

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// byteToRune is GPT-2's reversible mapping from bytes to printable runes:
// printable Latin-1 bytes map to themselves, the others to U+0100 onwards.
var byteToRune = func() (m [256]rune) {
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
}()

// runeToByte is the inverse of byteToRune, indexed by rune (all < 0x144);
// -1 marks runes that are not in the mapping.
var runeToByte = func() (m [0x144]int16) {
	for i := range m {
		m[i] = -1
	}
	for b, r := range byteToRune {
		m[r] = int16(b)
	}
	return m
}()

// byteLevelString maps raw bytes to their byte-level token spelling.
func byteLevelString(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteToRune[s[i]])
	}
	return string(buf)
}

// byteLevelDecode maps a byte-level token back to the bytes it stands for.
// As in Hugging Face's ByteLevel decoder, a token containing a rune outside
// the mapping decodes to its own UTF-8 bytes.
func byteLevelDecode(tok string) string {
	buf := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
			return tok
		}
		buf = append(buf, byte(runeToByte[r]))
	}
	return string(buf)
}

// bpe is a byte-level BPE model.
type bpe struct {
	vocab        map[string]int32
	merges       map[uint64]merge // pair of ids -> merge
	byteID       [256]int32       // id of each single byte, -1 if missing
	unk          int32            // -1 if none
	fuseUnk      bool
	ignoreMerges bool
}

// merge is the result of merging a pair of ids.
type merge struct {
	rank int32 // lower merges first
	id   int32 // id of the merged token
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// newBPE builds the model. Errors name the field inside "model".
func newBPE(m *modelJSON) (*bpe, error) {
	if m.Type != "BPE" && !(m.Type == "" && m.Merges != nil) {
		return nil, fmt.Errorf("type: model type %q is not supported (only BPE)", m.Type)
	}
	if m.Vocab == nil {
		return nil, errors.New("vocab: missing")
	}
	if m.Merges == nil {
		return nil, errors.New("merges: missing")
	}
	if m.Dropout != nil && *m.Dropout > 0 {
		return nil, fmt.Errorf("dropout: %v is not supported", *m.Dropout)
	}
	if m.ByteFallback {
		return nil, errors.New("byte_fallback: true is not supported (byte-level BPE only)")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, fmt.Errorf("continuing_subword_prefix: %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("end_of_word_suffix: %q is not supported", *m.EndOfWordSuffix)
	}
	b := &bpe{
		vocab:        m.Vocab,
		merges:       make(map[uint64]merge, len(m.Merges)),
		unk:          -1,
		fuseUnk:      m.FuseUnk,
		ignoreMerges: m.IgnoreMerges,
	}
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("vocab[%q]: negative id %d", tok, id)
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token: %q is not in the vocabulary", *m.UnkToken)
		}
		b.unk = id
	}
	for c := 0; c < 256; c++ {
		b.byteID[c] = -1
		if id, ok := m.Vocab[string(byteToRune[c])]; ok {
			b.byteID[c] = id
		}
	}
	for i, raw := range m.Merges {
		l, r, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("merges[%d]: %w", i, err)
		}
		li, ok1 := m.Vocab[l]
		ri, ok2 := m.Vocab[r]
		mi, ok3 := m.Vocab[l+r]
		switch {
		case !ok1:
			return nil, fmt.Errorf("merges[%d]: token %q is not in the vocabulary", i, l)
		case !ok2:
			return nil, fmt.Errorf("merges[%d]: token %q is not in the vocabulary", i, r)
		case !ok3:
			return nil, fmt.Errorf("merges[%d]: merged token %q is not in the vocabulary", i, l+r)
		}
		k := pairKey(li, ri)
		if _, dup := b.merges[k]; !dup { // the first (lowest) rank wins
			b.merges[k] = merge{rank: int32(i), id: mi}
		}
	}
	return b, nil
}

// heapThreshold is the word length (in symbols) from which the merge loop
// uses a priority queue instead of rescanning all pairs.
const heapThreshold = 48

// encode appends the ids of one pre-token (raw bytes) to ids.
func (m *bpe) encode(w string, ids []int32) []int32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[byteLevelString(w)]; ok {
			return append(ids, id)
		}
	}
	var stack [heapThreshold]int32
	sym := stack[:0]
	if len(w) > heapThreshold {
		sym = make([]int32, 0, len(w))
	}
	for i := 0; i < len(w); i++ {
		id := m.byteID[w[i]]
		if id < 0 {
			if m.unk < 0 {
				continue // dropped, as Hugging Face does without unk_token
			}
			if m.fuseUnk && len(sym) > 0 && sym[len(sym)-1] == m.unk {
				continue
			}
			id = m.unk
		}
		sym = append(sym, id)
	}
	if len(sym) >= heapThreshold {
		sym = m.mergeHeap(sym)
	} else {
		sym = m.mergeScan(sym)
	}
	return append(ids, sym...)
}

// mergeScan repeatedly merges the leftmost pair of lowest rank. It keeps
// the merge of every adjacent pair in an array, so each step scans the array
// and looks up only the two pairs that the merge changed. It is quadratic in
// the word length but fast for the short words that dominate real text.
func (m *bpe) mergeScan(sym []int32) []int32 {
	if len(sym) < 2 {
		return sym
	}
	const none = int32(1<<31 - 1)
	var stack [heapThreshold]merge
	pairs := stack[:0] // pairs[i] merges sym[i] and sym[i+1]
	if len(sym)-1 > len(stack) {
		pairs = make([]merge, 0, len(sym)-1)
	}
	pairs = pairs[:len(sym)-1]
	lookup := func(i int) merge {
		if mg, ok := m.merges[pairKey(sym[i], sym[i+1])]; ok {
			return mg
		}
		return merge{rank: none}
	}
	for i := range pairs {
		pairs[i] = lookup(i)
	}
	for {
		best := -1
		bestRank := none
		for i, p := range pairs {
			if p.rank < bestRank {
				best, bestRank = i, p.rank
			}
		}
		if best < 0 {
			return sym
		}
		sym[best] = pairs[best].id
		sym = append(sym[:best+1], sym[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1] = lookup(best - 1)
		}
		if best < len(pairs) {
			pairs[best] = lookup(best)
		}
	}
}

// mergeHeap is mergeScan for long words: symbols form a linked list and
// candidate pairs a priority queue ordered by (rank, position).
func (m *bpe) mergeHeap(sym []int32) []int32 {
	n := len(sym)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := range sym {
		prev[i], next[i] = int32(i-1), int32(i+1)
	}
	next[n-1] = -1
	q := make(pairQueue, 0, n)
	for i := 0; i+1 < n; i++ {
		if mg, ok := m.merges[pairKey(sym[i], sym[i+1])]; ok {
			q = append(q, candidate{rank: mg.rank, pos: int32(i), left: sym[i], right: sym[i+1], id: mg.id})
		}
	}
	q.init()
	for len(q) > 0 {
		c := q.pop()
		i := c.pos
		j := next[i]
		// Skip stale candidates: the left symbol was merged away or
		// changed, or its right neighbour changed.
		if sym[i] != c.left || j < 0 || sym[j] != c.right {
			continue
		}
		sym[i] = c.id
		sym[j] = -1 // removed
		next[i] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = i
		}
		if p := prev[i]; p >= 0 {
			if mg, ok := m.merges[pairKey(sym[p], sym[i])]; ok {
				q.push(candidate{rank: mg.rank, pos: p, left: sym[p], right: sym[i], id: mg.id})
			}
		}
		if nx := next[i]; nx >= 0 {
			if mg, ok := m.merges[pairKey(sym[i], sym[nx])]; ok {
				q.push(candidate{rank: mg.rank, pos: i, left: sym[i], right: sym[nx], id: mg.id})
			}
		}
	}
	out := sym[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, sym[i])
	}
	return out
}

// candidate is a possible merge of the symbols at pos and next[pos].
type candidate struct {
	rank, pos       int32
	left, right, id int32
}

// pairQueue is a binary min-heap of candidates ordered by (rank, pos).
type pairQueue []candidate

func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || (c.rank == d.rank && c.pos < d.pos)
}

func (q pairQueue) init() {
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *pairQueue) push(c candidate) {
	*q = append(*q, c)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *pairQueue) pop() candidate {
	h := *q
	c := h[0]
	h[0] = h[len(h)-1]
	*q = h[:len(h)-1]
	q.down(0)
	return c
}

func (q pairQueue) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(q) {
			return
		}
		m := l
		if r := l + 1; r < len(q) && q[r].less(q[l]) {
			m = r
		}
		if !q[m].less(q[i]) {
			return
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
}
