package grammar

import (
	"fmt"
	"math/bits"
	"sync"
)

// Index is a grammar bound to a vocabulary: it computes, once per grammar
// node and lazily, which tokens that node allows whatever the stack below
// it holds, and which depend on the stack (those that finish the node's
// rule and go on reading). Matchers made from one Index share that work,
// so a schema compiled once serves every request that uses it. It is safe
// for concurrent use.
type Index struct {
	g *Grammar
	v *Vocabulary

	mu    sync.Mutex
	nodes []*nodeMask
	// pool of walk scratch, to keep computing masks allocation-light
	scratch sync.Pool
}

// nodeMask is what one node allows: tokens accepted in any context (a
// bitset, or a list when there are few), and tokens that leave the node's
// rule before they end, which are checked against the real stack.
type nodeMask struct {
	set       []uint64
	list      []int32
	uncertain []int32
}

// NewIndex binds g to v.
func NewIndex(g *Grammar, v *Vocabulary) *Index {
	return &Index{g: g, v: v, nodes: make([]*nodeMask, g.Nodes())}
}

// Grammar is the index's grammar.
func (x *Index) Grammar() *Grammar { return x.g }

// Vocabulary is the index's vocabulary.
func (x *Index) Vocabulary() *Vocabulary { return x.v }

// NewMatcher starts matching at the beginning of the grammar.
func (x *Index) NewMatcher() *Matcher { return newMatcher(x) }

// node returns the mask of node n, computing it the first time.
func (x *Index) node(n int32) *nodeMask {
	x.mu.Lock()
	m := x.nodes[n]
	x.mu.Unlock()
	if m != nil {
		return m
	}
	m = x.walk(n)
	x.mu.Lock()
	if old := x.nodes[n]; old != nil {
		m = old
	} else {
		x.nodes[n] = m
	}
	x.mu.Unlock()
	return m
}

type walkScratch struct {
	buf     []frame
	off     []int32  // level d's configurations are buf[off[d]:off[d+1]]
	ctx     []bool   // a prefix shorter than the level left the node's rule
	local   []int32  // len(sim.local) at each level
	left    []bool   // some configuration of the level finished the node's rule
	set     []uint64 // accepted tokens
	unc     []int32
	scratch []frame
}

// walk classifies every token for node n: one pass over the trie in depth
// first order, stepping the configurations of each prefix from those of
// its parent and skipping a subtree as soon as its prefix is dead.
func (x *Index) walk(n int32) *nodeMask {
	g, v := x.g, x.v
	w, _ := x.scratch.Get().(*walkScratch)
	if w == nil {
		w = &walkScratch{}
	}
	defer x.scratch.Put(w)
	s := sim{g: g}
	maxDepth := v.maxDepth
	words := (v.Size() + 63) / 64
	if len(w.set) != words {
		w.set = make([]uint64, words)
	}
	clear(w.set)
	nacc := 0
	w.buf = append(w.buf[:0], frame{n, -1})
	w.off = append(w.off[:0], 0, 1)
	w.ctx = append(w.ctx[:0], false)
	w.local = append(w.local[:0], 0)
	w.left = append(w.left[:0], false)
	for len(w.off) < maxDepth+2 {
		w.off = append(w.off, 0)
		w.ctx = append(w.ctx, false)
		w.local = append(w.local, 0)
		w.left = append(w.left, false)
	}
	w.unc = w.unc[:0]
	for i := 0; i < len(v.byte); {
		d := v.depth[i]
		lo, hi := w.off[d-1], w.off[d]
		w.buf = w.buf[:hi]
		s.local = s.local[:w.local[d-1]]
		var level []frame
		left := false
		if c := w.buf[lo]; hi-lo == 1 && g.calls[c.node] == nil {
			// The common case, one configuration and a plain transition:
			// a table lookup. A node that does not accept has a way on
			// (every node can reach an accepting one), so there is
			// nothing for closure to do.
			if t := g.next[int(c.node)*g.nclass+int(g.class[v.byte[i]])]; t >= 0 {
				w.buf = append(w.buf, frame{t, c.parent})
				if g.final[t] {
					level, left = s.closure(w.buf[hi:])
					w.buf = append(w.buf[:hi], level...)
				}
			}
			level = w.buf[hi:]
		} else {
			for _, c := range w.buf[lo:hi] {
				w.scratch = s.step(c, v.byte[i], w.scratch[:0])
				for _, c2 := range w.scratch {
					w.buf = appendUniqueFrom(w.buf, int(hi), c2)
				}
			}
			level, left = s.closure(w.buf[hi:])
			w.buf = append(w.buf[:hi], level...)
		}
		w.off[d+1] = int32(len(w.buf))
		w.local[d] = int32(len(s.local))
		// Level 0 is the node itself: its own finishing is a separate
		// configuration of the matcher (closure), not this walk's concern.
		w.ctx[d] = w.ctx[d-1] || w.left[d-1]
		w.left[d] = left
		switch {
		case len(level) > 0:
			for _, t := range v.ids[v.first[i]:v.first[i+1]] {
				w.set[t>>6] |= 1 << (t & 63)
				nacc++
			}
			i++
		case w.ctx[d]:
			// Dead here, but an earlier prefix finished the rule: every
			// token below is up to the context.
			end := v.skip[i]
			w.unc = append(w.unc, v.ids[v.first[i]:v.first[end]]...)
			i = int(end)
		default:
			i = int(v.skip[i])
		}
	}
	m := &nodeMask{uncertain: append([]int32(nil), w.unc...)}
	if nacc > words {
		m.set = append([]uint64(nil), w.set...)
	} else {
		m.list = make([]int32, 0, nacc)
		for i, bits := range w.set {
			for bits != 0 {
				m.list = append(m.list, int32(i*64+trailingZeros64(bits)))
				bits &= bits - 1
			}
		}
	}
	return m
}

func appendUniqueFrom(buf []frame, from int, c frame) []frame {
	for _, x := range buf[from:] {
		if x == c {
			return buf
		}
	}
	return append(buf, c)
}

// String describes the index's progress.
func (x *Index) String() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, m := range x.nodes {
		if m != nil {
			n++
		}
	}
	return fmt.Sprintf("grammar of %d nodes over a %v: %d node masks computed", x.g.Nodes(), x.v, n)
}

// copyInto sets mask to m's context-free tokens.
func (m *nodeMask) copyInto(mask []uint64) {
	if m.set != nil {
		n := copy(mask, m.set)
		clear(mask[n:])
		return
	}
	clear(mask)
	for _, t := range m.list {
		mask[t>>6] |= 1 << (t & 63)
	}
}

// orInto ORs m's context-free tokens into mask.
func (m *nodeMask) orInto(mask []uint64) {
	if m.set != nil {
		for i, w := range m.set {
			mask[i] |= w
		}
		return
	}
	for _, t := range m.list {
		mask[t>>6] |= 1 << (t & 63)
	}
}

func trailingZeros64(x uint64) int { return bits.TrailingZeros64(x) }

func popcount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}
