package engine

import (
	"container/list"
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model"
)

// prefixCache keeps snapshots of sequence state at aligned positions,
// indexed by a hash chain over blocks of align tokens, and evicts them least
// recently used. A snapshot is a sequence of its own in the pool; restoring
// it is a copy, so a hit reproduces the state bit for bit.
//
// Snapshots are taken where reuse is likely: at the last aligned position of
// each prompt; at the deepest aligned position a new request shares with
// tokens an earlier request has seen (a common system prompt, say); as a
// request decodes, at aligned positions every decodeSnapEvery tokens; and
// at a finished request's end when it is aligned (only the latest decode
// or end snapshot is kept per request, so a finished request leaves one at
// or near its end for the next turn of a conversation).
type prefixCache struct {
	align int
	seed  maphash.Seed
	snaps map[uint64]*list.Element // chain hash -> *snapshot
	lru   *list.List               // front: most recently used
	seen  map[uint64]bool          // chain hashes of blocks any request has held
}

type snapshot struct {
	hash   uint64
	tokens []int32 // the prefix, len a multiple of align
	seq    *cache.Seq
	owner  *seq // the request whose latest decode snapshot this is; nil once it ends
}

// minDecodeSnap is the fewest decoded tokens between a request's decode
// snapshots. A snapshot forks the request's state, sharing its append
// pages, so the next token's write copies the last, partly filled page of
// every kind; a model whose state is restorable at every position (align
// 1) would pay that at every token.
const minDecodeSnap = 64

// decodeSnapEvery is the interval of decode snapshots: the smallest
// multiple of align that is at least minDecodeSnap.
func (p *prefixCache) decodeSnapEvery() int {
	return (minDecodeSnap + p.align - 1) / p.align * p.align
}

// maxSeen bounds the block-hash memory; past it the set starts over.
const maxSeen = 1 << 20

// newPrefixCache makes a prefix cache restoring state at multiples of align
// tokens (model.PrefixAligner).
func newPrefixCache(align int) *prefixCache {
	return &prefixCache{align: align, seed: maphash.MakeSeed(), snaps: map[uint64]*list.Element{}, lru: list.New(), seen: map[uint64]bool{}}
}

// chain returns the chain hashes of the full blocks of toks: h[k] covers
// toks[:(k+1)*align].
func (p *prefixCache) chain(toks []int32) []uint64 {
	var hs []uint64
	var h maphash.Hash
	h.SetSeed(p.seed)
	var buf [4]byte
	var prev uint64
	for k := 0; (k+1)*p.align <= len(toks); k++ {
		h.Reset()
		var pb [8]byte // chain to the previous block
		binary.LittleEndian.PutUint64(pb[:], prev)
		h.Write(pb[:])
		for _, t := range toks[k*p.align : (k+1)*p.align] {
			binary.LittleEndian.PutUint32(buf[:], uint32(t))
			h.Write(buf[:])
		}
		prev = h.Sum64()
		hs = append(hs, prev)
	}
	return hs
}

// lookup returns the longest snapshot whose tokens prefix toks and leave at
// least one token of toks to compute (its logits are needed).
func (p *prefixCache) lookup(toks []int32) *snapshot {
	hs := p.chain(toks[:len(toks)-1])
	for k := len(hs) - 1; k >= 0; k-- {
		el, ok := p.snaps[hs[k]]
		if !ok {
			continue
		}
		s := el.Value.(*snapshot)
		if slices.Equal(s.tokens, toks[:len(s.tokens)]) {
			p.lru.MoveToFront(el)
			return s
		}
	}
	return nil
}

// plan returns the positions after from where a request with these tokens
// should be snapshotted during prefill, and records its blocks as seen.
func (p *prefixCache) plan(toks []int32, prompt, from int) []int {
	hs := p.chain(toks)
	var points []int
	// The deepest block an earlier request shared, if not cached yet.
	for k := len(hs) - 1; k >= 0; k-- {
		if p.seen[hs[k]] {
			if _, cached := p.snaps[hs[k]]; !cached && (k+1)*p.align > from && (k+1)*p.align < len(toks) {
				points = append(points, (k+1)*p.align)
			}
			break
		}
	}
	if end := prompt / p.align * p.align; end > from && end < len(toks) && !slices.Contains(points, end) {
		if _, cached := p.snaps[hashAt(hs, end/p.align)]; !cached {
			points = append(points, end)
		}
	}
	if len(p.seen) > maxSeen {
		clear(p.seen)
	}
	for _, h := range hs {
		p.seen[h] = true
	}
	slices.Sort(points)
	return points
}

func hashAt(hs []uint64, blocks int) uint64 {
	if blocks <= 0 || blocks > len(hs) {
		return 0
	}
	return hs[blocks-1]
}

// add stores a fork of live's state (live.Len() must be aligned) as the
// snapshot of toks[:live.Len()]: it shares live's append pages and copies
// its ring and recurrent state. It returns nil when the pool has no room.
func (p *prefixCache) add(m model.Model, pool *cache.Pool, live *cache.Seq, toks []int32, owner *seq) *snapshot {
	n := live.Len()
	hs := p.chain(toks[:n])
	h := hashAt(hs, n/p.align)
	if el, ok := p.snaps[h]; ok {
		p.lru.MoveToFront(el)
		return el.Value.(*snapshot)
	}
	cs, err := live.Fork()
	if err != nil {
		return nil
	}
	s := &snapshot{hash: h, tokens: slices.Clone(toks[:n]), seq: cs, owner: owner}
	p.snaps[h] = p.lru.PushFront(s)
	return s
}

// drop frees a snapshot.
func (p *prefixCache) drop(s *snapshot) {
	if el, ok := p.snaps[s.hash]; ok && el.Value.(*snapshot) == s {
		p.lru.Remove(el)
		delete(p.snaps, s.hash)
		s.seq.Release()
	}
}

// pages is the number of pool pages the snapshots hold that none of live
// holds: what the prefix cache costs beyond the running requests (snapshots
// share append pages with each other and with the requests they came from).
func (p *prefixCache) pages(live []*cache.Seq) int {
	all := slices.Clone(live)
	for el := p.lru.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*snapshot).seq)
	}
	return cache.DistinctPages(all...) - cache.DistinctPages(live...)
}
