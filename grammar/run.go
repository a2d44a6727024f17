package grammar

// The pushdown's configurations. A configuration is the node the text has
// reached and the stack of nodes to return to, innermost first. Stacks are
// persistent lists of frames: frame {node, parent} says "continue at node,
// then return to parent". A parent is encoded as
//
//	-1       the bottom of the stack (or, when masks are precomputed per
//	         node, the unknown context below the node)
//	>= 0     a frame of a shared arena (a Matcher's interned stacks)
//	<= -2    a frame pushed during this simulation (sim.local[-p-2])
//
// Nodes that accept (their rule's text may end) can also return: a
// configuration at such a node stands for the one at its parent frame too.
// closure makes that explicit, so that stepping never has to pop.

type frame struct{ node, parent int32 }

// sim steps configurations over bytes; base is the read-only arena that
// parents >= 0 refer to.
type sim struct {
	g     *Grammar
	base  []frame
	local []frame
}

func (s *sim) parentFrame(p int32) frame {
	if p >= 0 {
		return s.base[p]
	}
	return s.local[-p-2]
}

func (s *sim) push(node, parent int32) int32 {
	s.local = append(s.local, frame{node, parent})
	return -int32(len(s.local)) - 1
}

// step appends to out the configurations that c reaches by reading b.
func (s *sim) step(c frame, b byte, out []frame) []frame {
	g := s.g
	if t := g.next[int(c.node)*g.nclass+int(g.class[b])]; t >= 0 {
		out = appendUnique(out, frame{t, c.parent})
	}
	for _, k := range g.calls[c.node] {
		out = s.step(frame{k.start, s.push(k.ret, c.parent)}, b, out)
	}
	return out
}

// closure adds, for every configuration at an accepting node that has a
// frame to return to, the configuration after returning, and drops the
// configurations that can do nothing (no transition, no call, and no text
// may end there). It reports whether some configuration accepts with
// nothing below it (-1 parent): at the bottom of a stack that means the
// text may end; below a per-node precomputation, that the next byte may
// be read by the unknown context.
func (s *sim) closure(set []frame) ([]frame, bool) {
	g := s.g
	bottom := false
	for i := 0; i < len(set); i++ {
		c := set[i]
		if g.final[c.node] {
			if c.parent == -1 {
				bottom = true
			} else {
				set = appendUnique(set, s.parentFrame(c.parent))
			}
		}
	}
	out := set[:0]
	for _, c := range set {
		if g.hasOut[c.node] || (g.final[c.node] && c.parent == -1) {
			out = append(out, c)
		}
	}
	return out, bottom
}

func appendUnique(set []frame, c frame) []frame {
	for _, x := range set {
		if x == c {
			return set
		}
	}
	return append(set, c)
}

// Recognize reports whether the grammar matches text entirely (complete)
// and whether text is a prefix of some string it matches (prefix).
func (g *Grammar) Recognize(text []byte) (complete, prefix bool) {
	s := sim{g: g}
	set, _ := s.closure([]frame{{g.root, -1}})
	var next []frame
	for _, b := range text {
		next = next[:0]
		for _, c := range set {
			next = s.step(c, b, next)
		}
		next, _ = s.closure(next)
		if len(next) == 0 {
			return false, false
		}
		set, next = next, set
	}
	for _, c := range set {
		if c.parent == -1 && g.final[c.node] {
			return true, true
		}
	}
	return false, true
}
