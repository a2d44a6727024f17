package bpe

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// Merge is a learned merge: the byte strings of its two parts, as raw bytes
// (not in the byte-level spelling).
type Merge struct {
	Left, Right string
}

// Options control Train.
type Options struct {
	// Tokens is how many tokens the model may have in all: the 256 single
	// bytes plus one per distinct merged string. Training stops when it is
	// reached or when no pair occurs at least MinCount times.
	Tokens int
	// MinCount is the least count of a pair that may be merged (at least 1;
	// 0 means 2).
	MinCount int64
	// Progress, if not nil, is called from time to time with the number of
	// tokens so far.
	Progress func(tokens int)
}

// Train learns merges from counts, the number of times each pre-token
// occurs. Pre-tokens are raw bytes. Merges are returned in the order they
// were learned, which is their rank.
//
// A merge whose result has the same bytes as an earlier token (for example
// "ab"+"c" after "a"+"bc") is kept, as in Hugging Face tokenizers, but adds
// no token.
func Train(counts map[string]int64, opt Options) ([]Merge, error) {
	if opt.Tokens < 256 {
		return nil, fmt.Errorf("bpe: %d tokens is fewer than the 256 bytes", opt.Tokens)
	}
	minCount := opt.MinCount
	if minCount <= 0 {
		minCount = 2
	}
	t := newTrainer(counts)
	var merges []Merge
	for t.ntokens() < opt.Tokens {
		best, ok := t.best(minCount)
		if !ok {
			break
		}
		merges = append(merges, Merge{t.tokens[best.left()], t.tokens[best.right()]})
		t.merge(best)
		if opt.Progress != nil && (len(merges)%500 == 0) {
			opt.Progress(t.ntokens())
		}
	}
	if opt.Progress != nil {
		opt.Progress(t.ntokens())
	}
	return merges, nil
}

// pair is two symbol ids, left in the high half.
type pair uint64

func mkPair(a, b int32) pair { return pair(uint64(uint32(a))<<32 | uint64(uint32(b))) }
func (p pair) left() int32   { return int32(uint32(p >> 32)) }
func (p pair) right() int32  { return int32(uint32(p)) }

// A word is a distinct pre-token: its symbols and how often it occurs.
type word struct {
	syms  []int32
	count int64
}

type trainer struct {
	words  []word
	tokens []string         // symbol id -> bytes
	ids    map[string]int32 // bytes -> symbol id
	counts map[pair]int64   // pair -> weighted occurrences
	where  map[pair][]int32 // pair -> words that may contain it
	queue  pairHeap
}

func newTrainer(counts map[string]int64) *trainer {
	t := &trainer{
		ids:    make(map[string]int32),
		counts: make(map[pair]int64),
		where:  make(map[pair][]int32),
	}
	for b := 0; b < 256; b++ {
		s := string([]byte{byte(b)})
		t.ids[s] = int32(b)
		t.tokens = append(t.tokens, s)
	}
	keys := make([]string, 0, len(counts))
	for k, c := range counts {
		if len(k) > 1 && c > 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // word order fixes nothing observable, but keeps runs identical
	t.words = make([]word, len(keys))
	for i, k := range keys {
		syms := make([]int32, len(k))
		for j := 0; j < len(k); j++ {
			syms[j] = int32(k[j])
		}
		t.words[i] = word{syms: syms, count: counts[k]}
		for j := 0; j+1 < len(syms); j++ {
			p := mkPair(syms[j], syms[j+1])
			t.counts[p] += counts[k]
			if w := t.where[p]; len(w) == 0 || w[len(w)-1] != int32(i) {
				t.where[p] = append(w, int32(i))
			}
		}
	}
	t.queue = pairHeap{t: t}
	for p, c := range t.counts {
		t.queue.items = append(t.queue.items, heapItem{p, c})
	}
	heap.Init(&t.queue)
	return t
}

// ntokens is the number of distinct tokens so far.
func (t *trainer) ntokens() int { return len(t.tokens) }

// best returns the pair to merge next, or false when none has minCount.
func (t *trainer) best(minCount int64) (pair, bool) {
	for t.queue.Len() > 0 {
		top := t.queue.items[0]
		cur := t.counts[top.p]
		if cur != top.count {
			// Stale: the pair's count fell since it was queued.
			if cur > 0 {
				t.queue.items[0].count = cur
				heap.Fix(&t.queue, 0)
			} else {
				heap.Pop(&t.queue)
			}
			continue
		}
		if cur < minCount {
			return 0, false
		}
		heap.Pop(&t.queue)
		return top.p, true
	}
	return 0, false
}

// merge replaces every occurrence of p, left to right, by its merged symbol
// and updates the pair counts.
func (t *trainer) merge(p pair) {
	a, b := p.left(), p.right()
	s := t.tokens[a] + t.tokens[b]
	c, ok := t.ids[s]
	if !ok {
		c = int32(len(t.tokens))
		t.tokens = append(t.tokens, s)
		t.ids[s] = c
	}
	ws := t.where[p]
	delete(t.where, p)
	slices.Sort(ws)
	ws = slices.Compact(ws)
	touched := make(map[pair]bool)
	for _, wi := range ws {
		w := &t.words[wi]
		syms := w.syms
		if !containsPair(syms, a, b) {
			continue
		}
		for j := 0; j+1 < len(syms); j++ {
			t.counts[mkPair(syms[j], syms[j+1])] -= w.count
		}
		out := syms[:0:0]
		for j := 0; j < len(syms); j++ {
			if j+1 < len(syms) && syms[j] == a && syms[j+1] == b {
				out = append(out, c)
				j++
			} else {
				out = append(out, syms[j])
			}
		}
		w.syms = out
		for j := 0; j+1 < len(out); j++ {
			q := mkPair(out[j], out[j+1])
			t.counts[q] += w.count
			if out[j] == c || out[j+1] == c {
				touched[q] = true
				if l := t.where[q]; len(l) == 0 || l[len(l)-1] != wi {
					t.where[q] = append(l, wi)
				}
			}
		}
	}
	delete(t.counts, p)
	// Pairs with the new symbol are new, so they have no queue entry yet.
	// Other pairs can only have lost occurrences; best corrects their stale
	// entries lazily. Push in a fixed order so that the heap's layout, and
	// so every later choice among equals, does not depend on map order.
	qs := make([]pair, 0, len(touched))
	for q := range touched {
		if t.counts[q] > 0 {
			qs = append(qs, q)
		}
	}
	slices.Sort(qs)
	for _, q := range qs {
		heap.Push(&t.queue, heapItem{q, t.counts[q]})
	}
}

func containsPair(syms []int32, a, b int32) bool {
	for j := 0; j+1 < len(syms); j++ {
		if syms[j] == a && syms[j+1] == b {
			return true
		}
	}
	return false
}

type heapItem struct {
	p     pair
	count int64
}

// pairHeap orders pairs by count, highest first, then by the bytes of the
// left symbol and of the right symbol, smallest first.
type pairHeap struct {
	t     *trainer
	items []heapItem
}

func (h *pairHeap) Len() int { return len(h.items) }
func (h *pairHeap) Less(i, j int) bool {
	x, y := h.items[i], h.items[j]
	if x.count != y.count {
		return x.count > y.count
	}
	if c := strings.Compare(h.t.tokens[x.p.left()], h.t.tokens[y.p.left()]); c != 0 {
		return c < 0
	}
	return h.t.tokens[x.p.right()] < h.t.tokens[y.p.right()]
}
func (h *pairHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *pairHeap) Push(x any)    { h.items = append(h.items, x.(heapItem)) }
func (h *pairHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
