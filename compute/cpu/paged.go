package cpu

import (
	"fmt"
	"unsafe"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// slots is one span's slots of a paged cache kind, in host memory.
type slots struct {
	pool        []float32
	pages       []int32
	perPage     int
	slotFloats  int
	pageFloats  int
	format      compute.SlotFormat
	width, rope int
}

// spanSlots resolves span s's slots of p.
func spanSlots(p compute.Paged, s int) slots {
	pages := I32(p.Pages)
	stride := p.Pages.Cols
	return slots{
		pool:       words(p.Pool, p.Pool.Len()/4),
		pages:      pages[s*stride : (s+1)*stride],
		perPage:    p.PerPage,
		slotFloats: p.SlotBytes / 4,
		pageFloats: p.Pool.Cols / 4,
		format:     p.Format,
		width:      p.Width,
		rope:       p.Rope,
	}
}

// slot returns slot k's memory, as float32 words.
func (p slots) slot(k int) []float32 {
	off := int(p.pages[k/p.perPage])*p.pageFloats + (k%p.perPage)*p.slotFloats
	return p.pool[off : off+p.slotFloats : off+p.slotFloats]
}

// bytes returns slot k's memory as bytes.
func (p slots) bytes(k int) []byte {
	w := p.slot(k)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w))
}

// read returns slot k's first n values: in place for f32 slots, decoded
// into buf (which must hold n) otherwise.
func (p slots) read(k, n int, buf []float32) []float32 {
	switch p.format {
	case compute.SlotF32:
		return p.slot(k)[:n]
	case compute.SlotBF16:
		quant.DecodeBF16(buf[:n], p.bytes(k))
	case compute.SlotFP8KV:
		quant.DecodeFP8KV(buf[:n], p.bytes(k), p.rope)
	case compute.SlotFP8Key:
		quant.DecodeFP8Key(buf[:n], p.bytes(k))
	case compute.SlotFP8MLA:
		quant.DecodeFP8MLA(buf[:n], p.bytes(k), p.rope)
	default:
		panic(fmt.Sprintf("cpu: cache slot format %v", p.format))
	}
	return buf[:n]
}

// write stores v in slot k.
func (p slots) write(k int, v []float32) {
	encode(p.bytes(k), v, p.format, p.rope)
}

func encode(dst []byte, v []float32, f compute.SlotFormat, rope int) {
	switch f {
	case compute.SlotF32:
		copy(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/4), v)
	case compute.SlotBF16:
		quant.EncodeBF16(dst, v)
	case compute.SlotFP8KV:
		quant.EncodeFP8KV(dst, v, rope)
	case compute.SlotFP8Key:
		quant.EncodeFP8Key(dst, v)
	case compute.SlotFP8MLA:
		quant.EncodeFP8MLA(dst, v, rope)
	default:
		panic(fmt.Sprintf("cpu: cache slot format %v", f))
	}
}

// slotBytes is the size of a width-wide vector in format f.
func slotBytes(width, rope int, f compute.SlotFormat) int {
	switch f {
	case compute.SlotBF16:
		return 2 * width
	case compute.SlotFP8KV:
		return quant.FP8KVBytes(width, rope)
	case compute.SlotFP8Key:
		return quant.FP8KeyBytes(width)
	case compute.SlotFP8MLA:
		return quant.FP8MLABytes(width, rope)
	}
	return 4 * width
}

// LoadRing implements compute.Attention.
func (b *Backend) LoadRing(dst compute.Tensor, ring compute.Paged, size int, sp compute.Spans) {
	dv, w, pos := F32(dst), dst.Cols, I32(sp.Pos)
	b.s.ringBuf = grow(b.s.ringBuf, w)
	buf := b.s.ringBuf
	for i, s := range b.s.spanList(sp) {
		r := spanSlots(ring, i)
		for t := s.start; t < s.start+s.n; t++ {
			copy(dv[t*w:(t+1)*w], r.read(int(pos[t])%size, w, buf))
		}
	}
}

// RoundTrip implements compute.Attention.
func (b *Backend) RoundTrip(dst, src compute.Tensor, f compute.SlotFormat, rope int) {
	checkShape("RoundTrip dst", dst, src.Rows, src.Cols)
	d, s, w := F32(dst), F32(src), src.Cols
	if f == compute.SlotF32 {
		copy(d, s)
		return
	}
	n := (slotBytes(w, rope, f) + 3) / 4 * 4
	if cap(b.s.slotBuf) < n {
		b.s.slotBuf = make([]byte, n)
	}
	buf := b.s.slotBuf[:n]
	for r := range src.Rows {
		encode(buf, s[r*w:(r+1)*w], f, rope)
		switch f {
		case compute.SlotBF16:
			quant.DecodeBF16(d[r*w:(r+1)*w], buf)
		case compute.SlotFP8KV:
			quant.DecodeFP8KV(d[r*w:(r+1)*w], buf, rope)
		case compute.SlotFP8Key:
			quant.DecodeFP8Key(d[r*w:(r+1)*w], buf)
		case compute.SlotFP8MLA:
			quant.DecodeFP8MLA(d[r*w:(r+1)*w], buf, rope)
		}
	}
}

// span is one row of compute.Spans.Tab.
type span struct{ start, n, pos0 int }

func spansOf(sp compute.Spans) []span {
	tab := I32(sp.Tab)
	out := make([]span, sp.Tab.Rows)
	for i := range out {
		out[i] = span{int(tab[3*i]), int(tab[3*i+1]), int(tab[3*i+2])}
	}
	return out
}

// StoreRing implements compute.Attention.
func (b *Backend) StoreRing(ring compute.Paged, size int, src compute.Tensor, sp compute.Spans) {
	sv, w := F32(src), src.Cols
	for i, s := range b.s.spanList(sp) {
		r := spanSlots(ring, i)
		for p := max(s.pos0, s.pos0+s.n-size); p < s.pos0+s.n; p++ {
			t := s.start + p - s.pos0
			r.write(p%size, sv[t*w:(t+1)*w])
		}
	}
}

// spanList is spansOf into a buffer of the state, valid until the next
// call of spanList (no op that holds it calls another that uses it).
func (s *state) spanList(sp compute.Spans) []span {
	tab := I32(sp.Tab)
	n := sp.Tab.Rows
	if cap(s.spanBuf) < n {
		s.spanBuf = make([]span, n, max(n, 2*cap(s.spanBuf)))
	}
	out := s.spanBuf[:n]
	for i := range out {
		out[i] = span{int(tab[3*i]), int(tab[3*i+1]), int(tab[3*i+2])}
	}
	return out
}
