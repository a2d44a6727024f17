package cache

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

func sameSpecs(a, b []Spec) bool {
	return slices.EqualFunc(a, b, func(x, y Spec) bool {
		return x.Name == y.Name && x.SlotBytes == y.SlotBytes && x.Kind() == y.Kind() && x.TokensPerSlot == y.TokensPerSlot &&
			x.FixedSlots == y.FixedSlots && slices.Equal(x.Layers, y.Layers)
	})
}

// stateMagic starts a serialized sequence state; the byte after it is the
// format version.
const (
	stateMagic   = "STRATASQ"
	stateVersion = 2
)

// StateBytes is the size WriteState writes for a sequence of these kinds
// holding n tokens.
func StateBytes(specs []Spec, n int) int64 {
	b := int64(len(stateMagic) + 1 + 8 + 4)
	for _, sp := range specs {
		b += 2 + int64(len(sp.Name)) + 1 + 16 + 4*int64(len(sp.Layers))
		live := int64(sp.FixedSlots)
		if sp.Kind() == Append {
			live = int64(sp.Slots(n))
		}
		b += int64(len(sp.Layers)) * live * int64(sp.SlotBytes)
	}
	return b
}

// WriteState serializes the sequence's state: a header (magic, version,
// Len, the specs with their policies) and then, spec by spec and layer by
// layer, the bytes of every slot that holds state for Len tokens, as the
// backend stores them. It streams one page at a time. The format is
// documented in docs/handoff.md.
func (s *Seq) WriteState(w io.Writer) error {
	var hdr []byte
	hdr = append(hdr, stateMagic...)
	hdr = append(hdr, stateVersion)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(s.n))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(s.specs)))
	for _, sp := range s.specs {
		hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(sp.Name)))
		hdr = append(hdr, sp.Name...)
		hdr = append(hdr, byte(sp.Kind()))
		for _, v := range []int{sp.SlotBytes, sp.TokensPerSlot, sp.FixedSlots, len(sp.Layers)} {
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(v))
		}
		for _, l := range sp.Layers {
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(l))
		}
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	buf := make([]byte, s.pool.pageBytes)
	be, mem := s.pool.be, s.pool.mem
	for i, sp := range s.specs {
		live := s.live(i, s.n)
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			for p := 0; p*t.perPage < live; p++ {
				n := min(t.perPage, live-p*t.perPage) * t.slotBytes
				if err := be.Read(buf[:n], mem.Row(int(t.pages[p])).Elems(0, n)); err != nil {
					return fmt.Errorf("cache: reading %s state: %w", sp.Name, err)
				}
				if _, err := w.Write(buf[:n]); err != nil {
					return fmt.Errorf("cache: writing %s state: %w", sp.Name, err)
				}
			}
		}
	}
	return nil
}

// ReadState restores a state WriteState wrote into s, which must be fresh
// (Len 0) and have the same specs as the writer. A state of other kinds, of
// another version or truncated is rejected with an error saying so, and s
// is then left at Len 0. It reads at most StateBytes(specs, maxTokens)
// bytes; a state claiming more tokens is rejected before any is read.
func (s *Seq) ReadState(r io.Reader, maxTokens int) error {
	if s.n != 0 {
		return fmt.Errorf("cache: restoring state into a sequence that already holds %d tokens", s.n)
	}
	var head [len(stateMagic) + 1 + 8 + 4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return fmt.Errorf("cache: reading state header: %w", err)
	}
	if string(head[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("cache: not a sequence state (bad magic %q)", head[:len(stateMagic)])
	}
	if v := head[len(stateMagic)]; v != stateVersion {
		return fmt.Errorf("cache: sequence state version %d, this build reads version %d", v, stateVersion)
	}
	n64 := binary.LittleEndian.Uint64(head[len(stateMagic)+1:])
	nSpecs := binary.LittleEndian.Uint32(head[len(stateMagic)+9:])
	if nSpecs > 1<<16 || n64 > 1<<40 {
		return fmt.Errorf("cache: state header claims %d kinds and %d tokens", nSpecs, n64)
	}
	if maxTokens > 0 && n64 > uint64(maxTokens) {
		return fmt.Errorf("cache: state holds %d tokens, more than the %d allowed", n64, maxTokens)
	}
	specs := make([]Spec, nSpecs)
	for i := range specs {
		var l16 [2]byte
		if _, err := io.ReadFull(r, l16[:]); err != nil {
			return fmt.Errorf("cache: reading state header: %w", err)
		}
		name := make([]byte, binary.LittleEndian.Uint16(l16[:]))
		if _, err := io.ReadFull(r, name); err != nil {
			return fmt.Errorf("cache: reading state header: %w", err)
		}
		var f [17]byte
		if _, err := io.ReadFull(r, f[:]); err != nil {
			return fmt.Errorf("cache: reading state header: %w", err)
		}
		sp := Spec{Name: string(name), Policy: Policy(f[0]), SlotBytes: int(binary.LittleEndian.Uint32(f[1:])), TokensPerSlot: int(binary.LittleEndian.Uint32(f[5:])), FixedSlots: int(binary.LittleEndian.Uint32(f[9:]))}
		nl := binary.LittleEndian.Uint32(f[13:])
		if nl > 1<<16 {
			return fmt.Errorf("cache: state header claims %d layers for %s", nl, sp.Name)
		}
		lb := make([]byte, 4*nl)
		if _, err := io.ReadFull(r, lb); err != nil {
			return fmt.Errorf("cache: reading state header: %w", err)
		}
		for k := range nl {
			sp.Layers = append(sp.Layers, int(binary.LittleEndian.Uint32(lb[4*k:])))
		}
		specs[i] = sp
	}
	if !sameSpecs(s.specs, specs) {
		return fmt.Errorf("cache: the state's cache kinds do not match this model's (%d kinds, first %q)", len(specs), firstName(specs))
	}
	n := int(n64)
	if err := s.Reserve(n); err != nil {
		return err
	}
	buf := make([]byte, s.pool.pageBytes)
	be, mem := s.pool.be, s.pool.mem
	for i := range s.specs {
		live := s.live(i, n)
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			for p := 0; p*t.perPage < live; p++ {
				nb := min(t.perPage, live-p*t.perPage) * t.slotBytes
				if _, err := io.ReadFull(r, buf[:nb]); err != nil {
					return fmt.Errorf("cache: state of %s layer %d truncated: %w", s.specs[i].Name, s.specs[i].Layers[j], err)
				}
				be.Write(mem.Row(int(t.pages[p])).Elems(0, nb), buf[:nb])
			}
		}
	}
	s.n = n
	return nil
}

func firstName(specs []Spec) string {
	if len(specs) == 0 {
		return ""
	}
	return specs[0].Name
}
