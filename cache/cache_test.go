package cache

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

var testSpecs = []Spec{
	{Name: "window", Layers: []int{0, 1}, SlotBytes: 16, Policy: Ring, FixedSlots: 5},
	{Name: "compressed", Layers: []int{1}, SlotBytes: 16, Policy: Append, TokensPerSlot: 4},
	{Name: "state", Layers: []int{0}, SlotBytes: 64, Policy: Recurrent, FixedSlots: 3},
}

// ringSpecs has no recurrent kind, so rollbacks restore ring slots in place.
var ringSpecs = testSpecs[:2]

func newPool(t *testing.T, pageBytes, pages int) *Pool {
	t.Helper()
	p, err := NewPool(cpu.New(1), pageBytes, pages)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// slotF32 is slot k of spec i, layer j as float32s, in place (CPU backend).
func slotF32(s *Seq, i, j, k int) []float32 { return cpu.F32(s.Slot(i, j, k).As(compute.F32)) }

// write sets, for the tokens [from, to) of s, the state a model would:
// append slots closed by them, the ring slot of each position, and the
// recurrent state after each token, every value a function of the position.
func write(s *Seq, from, to int, salt float32) {
	if err := s.Reserve(to); err != nil {
		panic(err)
	}
	for i, sp := range s.specs {
		for j := range s.tables[i] {
			for p := from; p < to; p++ {
				var sl []float32
				switch sp.Kind() {
				case Append:
					if (p+1)%sp.TokensPerSlot != 0 {
						continue
					}
					sl = slotF32(s, i, j, p/sp.TokensPerSlot)
				case Ring:
					sl = slotF32(s, i, j, p%sp.FixedSlots)
				case Recurrent:
					for k := range sp.FixedSlots {
						for x, v := range slotF32(s, i, j, k) {
							slotF32(s, i, j, k)[x] = v*0.5 + float32(p) + salt
						}
					}
					continue
				}
				for x := range sl {
					sl[x] = float32(i*1000+j*100+p) + float32(x)/16 + salt
				}
			}
		}
	}
	s.Advance(to - from)
}

// dump is every live slot of s, in order.
func dump(s *Seq) []float32 {
	var out []float32
	for i := range s.specs {
		for j := range s.tables[i] {
			for k := range s.live(i, s.n) {
				out = append(out, slotF32(s, i, j, k)...)
			}
		}
	}
	return out
}

func TestPoolAccounting(t *testing.T) {
	p := newPool(t, 64, 20)
	s, err := NewSeq(p, testSpecs)
	if err != nil {
		t.Fatal(err)
	}
	// window: 2 layers x ceil(5/4) = 4 pages; state: 1 layer x 3 = 3 pages.
	if got := p.UsedPages(); got["window"] != 4 || got["state"] != 3 || got["compressed"] != 0 {
		t.Fatalf("fixed pages %v", got)
	}
	if err := s.Reserve(33); err != nil { // 8 compressed slots: 2 pages
		t.Fatal(err)
	}
	if got := p.UsedPages()["compressed"]; got != 2 || s.Pages() != 9 || TotalPages(testSpecs, 33, 64) != 9 {
		t.Fatalf("compressed pages %d, seq %d, spec %d", got, s.Pages(), TotalPages(testSpecs, 33, 64))
	}
	// All or none: 11 free pages cannot hold 48 more slots (12 pages).
	if err := s.Reserve(33 + 4*48); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("reserve beyond the pool: %v", err)
	}
	if p.FreePages() != 11 {
		t.Fatalf("a failed reserve kept pages: %d free", p.FreePages())
	}
	s.Release()
	if p.FreePages() != 20 || len(p.UsedPages()) != 0 {
		t.Fatalf("release left %d free, used %v", p.FreePages(), p.UsedPages())
	}
	if _, err := NewSeq(p, []Spec{{Name: "big", Layers: []int{0}, SlotBytes: 128, FixedSlots: 1}}); err == nil {
		t.Fatal("a slot larger than a page was accepted")
	}
}

// TestForkShares: a fork shares every append page that holds state and
// copies only the ring and recurrent kinds; the two sequences then evolve
// independently (the shared partial page is copied on the first write),
// and releasing both frees everything.
func TestForkShares(t *testing.T) {
	p := newPool(t, 64, 100)
	a, _ := NewSeq(p, testSpecs)
	write(a, 0, 19, 0) // 4 compressed slots: one full page, nothing partial
	write(a, 19, 22, 0)
	free := p.FreePages()
	b, err := a.Fork()
	if err != nil {
		t.Fatal(err)
	}
	// The fork took only fixed pages: window 4 + state 3.
	if took := free - p.FreePages(); took != 7 {
		t.Fatalf("fork took %d pages, want 7 (the compressed pages are shared)", took)
	}
	if DistinctPages(a, b) != a.Pages()+7 {
		t.Fatalf("distinct pages %d, a holds %d", DistinctPages(a, b), a.Pages())
	}
	want := dump(a)
	if got := dump(b); !equal(got, want) || b.Len() != 22 {
		t.Fatalf("fork differs from its source")
	}
	// Both grow with different tokens; slot 5 (positions 20-23) sits in
	// the shared page that holds state, so each copies it before writing.
	before := appendSlots(a, 22)
	write(a, 22, 40, 0.25)
	write(b, 22, 40, 0.75)
	if !equal(appendSlots(a, 22), before) || !equal(appendSlots(b, 22), before) {
		t.Fatal("a write changed the shared prefix")
	}
	if equal(appendSlots(a, 40), appendSlots(b, 40)) {
		t.Fatal("forks share state they wrote separately")
	}
	a.Release()
	b.Release()
	if p.FreePages() != 100 {
		t.Fatalf("%d pages free after releasing both, want 100", p.FreePages())
	}
}

// appendSlots is the append slots that hold state for n tokens.
func appendSlots(s *Seq, n int) []float32 {
	var out []float32
	for i, sp := range s.specs {
		if sp.Kind() != Append {
			continue
		}
		for j := range s.tables[i] {
			for k := range sp.Slots(n) {
				out = append(out, slotF32(s, i, j, k)...)
			}
		}
	}
	return out
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRollback: a marked feed rolled back to keep tokens leaves exactly the
// state of feeding only those: for ring kinds by restoring the rejected
// positions' slots, for recurrent kinds by restoring the state before the
// feed and asking for the kept tokens to be fed again.
func TestRollback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		specs  []Spec
		refeed bool
	}{{"ring", ringSpecs, false}, {"recurrent", testSpecs, true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, 64, 200)
			for keep := range 5 {
				ref, _ := NewSeq(p, tc.specs)
				write(ref, 0, 13, 0)
				write(ref, 13, 13+keep, 0)
				s, _ := NewSeq(p, tc.specs)
				write(s, 0, 13, 0)
				u, err := s.Mark(4)
				if err != nil {
					t.Fatal(err)
				}
				write(s, 13, 13+keep, 0)
				write(s, 13+keep, 17, 9) // rejected drafts
				n := u.Rollback(keep)
				if tc.refeed {
					if n != keep || s.Len() != 13 {
						t.Fatalf("keep %d: refeed %d, len %d; want %d, 13", keep, n, s.Len(), keep)
					}
					write(s, 13, 13+keep, 0)
				} else if n != 0 || s.Len() != 13+keep {
					t.Fatalf("keep %d: refeed %d, len %d", keep, n, s.Len())
				}
				if !equal(dump(s), dump(ref)) {
					t.Fatalf("keep %d: state after rollback differs from feeding only the kept tokens", keep)
				}
				s.Release()
				ref.Release()
			}
			if p.FreePages() != 200 {
				t.Fatalf("%d pages free", p.FreePages())
			}
		})
	}
	p := newPool(t, 64, 100)
	s, _ := NewSeq(p, testSpecs)
	if _, err := s.Mark(6); err == nil || !strings.Contains(err.Error(), "ring holds 5") {
		t.Fatalf("marking more than a ring: %v", err)
	}
}

func TestStateRoundTrip(t *testing.T) {
	p := newPool(t, 64, 100)
	a, _ := NewSeq(p, testSpecs)
	write(a, 0, 19, 0.5)
	var wa bytes.Buffer
	if err := a.WriteState(&wa); err != nil {
		t.Fatal(err)
	}
	if int64(wa.Len()) != StateBytes(testSpecs, 19) {
		t.Fatalf("state of %d bytes, StateBytes says %d", wa.Len(), StateBytes(testSpecs, 19))
	}
	c, _ := NewSeq(p, testSpecs)
	if err := c.ReadState(bytes.NewReader(wa.Bytes()), 0); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 19 || !equal(dump(a), dump(c)) {
		t.Fatal("state does not survive a round trip")
	}
	d, _ := NewSeq(p, testSpecs)
	if err := d.ReadState(bytes.NewReader(wa.Bytes()), 18); err == nil || !strings.Contains(err.Error(), "more than the 18 allowed") {
		t.Fatalf("a state over the limit: %v", err)
	}
}

func TestReadStateRejects(t *testing.T) {
	p := newPool(t, 64, 100)
	a, _ := NewSeq(p, testSpecs)
	write(a, 0, 9, 1)
	var w bytes.Buffer
	a.WriteState(&w)
	good := w.Bytes()
	other := append([]Spec(nil), testSpecs...)
	other[2].FixedSlots = 2
	policy := append([]Spec(nil), testSpecs...)
	policy[2].Policy = Ring
	tests := []struct {
		name  string
		data  []byte
		specs []Spec
		want  string
	}{
		{"magic", append([]byte("NOTSTATE"), good[8:]...), testSpecs, "bad magic"},
		{"version", append(append([]byte(stateMagic), 9), good[9:]...), testSpecs, "version 9"},
		{"truncated", good[:len(good)-5], testSpecs, "truncated"},
		{"other kinds", good, other, "do not match"},
		{"other policy", good, policy, "do not match"},
		{"empty", nil, testSpecs, "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSeq(p, tc.specs)
			defer s.Release()
			err := s.ReadState(bytes.NewReader(tc.data), 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzReadState(f *testing.F) {
	p, _ := NewPool(cpu.New(1), 64, 200)
	a, _ := NewSeq(p, testSpecs)
	if err := a.Reserve(9); err != nil {
		f.Fatal(err)
	}
	a.Advance(9)
	var w bytes.Buffer
	a.WriteState(&w)
	f.Add(w.Bytes())
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewSeq(p, testSpecs)
		if err != nil { // every input's sequence is released: the pool cannot run out
			t.Fatalf("NewSeq: %v (%d of %d pages free: an earlier input leaked pages)", err, p.FreePages(), p.NumPages())
		}
		defer s.Release()
		if err := s.ReadState(bytes.NewReader(data), 1000); err != nil {
			return
		}
		var out bytes.Buffer
		if err := s.WriteState(&out); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, out.Bytes()) {
			t.Fatal("an accepted state does not re-serialize to itself")
		}
	})
}
