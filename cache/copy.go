package cache

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// live is the number of slots of spec i that hold state for n tokens: every
// slot of a fixed kind, the first Slots(n) of a growing one.
func (s *Seq) live(i, n int) int {
	sp := s.specs[i]
	if sp.Growing() {
		return sp.Slots(n)
	}
	return sp.FixedSlots
}

func sameSpecs(a, b []Spec) bool {
	return slices.EqualFunc(a, b, func(x, y Spec) bool {
		return x.Name == y.Name && x.SlotBytes == y.SlotBytes && x.TokensPerSlot == y.TokensPerSlot &&
			x.FixedSlots == y.FixedSlots && slices.Equal(x.Layers, y.Layers)
	})
}

// CopyFrom makes s hold exactly src's state: it reserves room for src.Len
// tokens, copies every slot that holds state for them, and sets s.Len. Both
// must have the same specs. Used to restore prefix snapshots.
func (s *Seq) CopyFrom(src *Seq) error {
	if !sameSpecs(s.specs, src.specs) {
		return fmt.Errorf("cache: copy between sequences of different kinds")
	}
	if err := s.Reserve(src.Len); err != nil {
		return err
	}
	for i := range s.specs {
		n := src.live(i, src.Len)
		for j := range s.tables[i] {
			dst, from := &s.tables[i][j], &src.tables[i][j]
			for k := range n {
				copy(dst.Slot(k), from.Slot(k))
			}
		}
	}
	s.Len = src.Len
	return nil
}

// stateMagic starts a serialized sequence state; the byte after it is the
// format version.
const (
	stateMagic   = "STRATASQ"
	stateVersion = 1
)

// WriteState serializes the sequence's state: a header (magic, version, the
// specs, Len) and then, spec by spec and layer by layer, every slot that
// holds state for Len tokens as little-endian float32. The format is
// documented in docs/handoff.md.
func (s *Seq) WriteState(w io.Writer) error {
	var hdr []byte
	hdr = append(hdr, stateMagic...)
	hdr = append(hdr, stateVersion)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(s.Len))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(s.specs)))
	for _, sp := range s.specs {
		hdr = binary.LittleEndian.AppendUint16(hdr, uint16(len(sp.Name)))
		hdr = append(hdr, sp.Name...)
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
	var buf []byte
	for i, sp := range s.specs {
		n := s.live(i, s.Len)
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			buf = buf[:0]
			for k := range n {
				for _, v := range t.Slot(k) {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				}
			}
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("cache: writing %s state: %w", sp.Name, err)
			}
		}
	}
	return nil
}

// ReadState restores a state WriteState wrote into s, which must be fresh
// (Len 0) and have the same specs as the writer. A state of other kinds, of
// another version or truncated is rejected with an error saying so, and s
// is then left at Len 0.
func (s *Seq) ReadState(r io.Reader) error {
	if s.Len != 0 {
		return fmt.Errorf("cache: restoring state into a sequence that already holds %d tokens", s.Len)
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
		var f [16]byte
		if _, err := io.ReadFull(r, f[:]); err != nil {
			return fmt.Errorf("cache: reading state header: %w", err)
		}
		sp := Spec{Name: string(name), SlotBytes: int(binary.LittleEndian.Uint32(f[0:])), TokensPerSlot: int(binary.LittleEndian.Uint32(f[4:])), FixedSlots: int(binary.LittleEndian.Uint32(f[8:]))}
		nl := binary.LittleEndian.Uint32(f[12:])
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
	var buf []byte
	for i := range s.specs {
		live := s.live(i, n)
		for j := range s.tables[i] {
			t := &s.tables[i][j]
			need := live * t.slotFloats * 4
			if cap(buf) < need {
				buf = make([]byte, need)
			}
			buf = buf[:need]
			if _, err := io.ReadFull(r, buf); err != nil {
				return fmt.Errorf("cache: state of %s layer %d truncated: %w", s.specs[i].Name, s.specs[i].Layers[j], err)
			}
			for k := range live {
				sl := t.Slot(k)
				off := k * t.slotFloats * 4
				for x := range sl {
					sl[x] = math.Float32frombits(binary.LittleEndian.Uint32(buf[off+4*x:]))
				}
			}
		}
	}
	s.Len = n
	return nil
}

func firstName(specs []Spec) string {
	if len(specs) == 0 {
		return ""
	}
	return specs[0].Name
}
