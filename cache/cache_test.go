package cache

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var testSpecs = []Spec{
	{Name: "window", Layers: []int{0, 1}, SlotBytes: 16, FixedSlots: 5},
	{Name: "compressed", Layers: []int{1}, SlotBytes: 16, TokensPerSlot: 4},
	{Name: "state", Layers: []int{0}, SlotBytes: 64, FixedSlots: 3},
}

func fill(s *Seq, n int, base float32) {
	for i := range s.specs {
		for j := range s.tables[i] {
			for k := range s.live(i, n) {
				sl := s.Table(i, j).Slot(k)
				for x := range sl {
					sl[x] = base + float32(i*1000+j*100+k*10+x)
				}
			}
		}
	}
	s.Len = n
}

func TestPoolAccounting(t *testing.T) {
	p, err := NewPool(64, 20)
	if err != nil {
		t.Fatal(err)
	}
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

func TestCopyAndState(t *testing.T) {
	p, _ := NewPool(64, 100)
	a, _ := NewSeq(p, testSpecs)
	if err := a.Reserve(19); err != nil {
		t.Fatal(err)
	}
	fill(a, 19, 0.5)
	b, _ := NewSeq(p, testSpecs)
	if err := b.CopyFrom(a); err != nil {
		t.Fatal(err)
	}
	var wa, wb bytes.Buffer
	if err := a.WriteState(&wa); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteState(&wb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wa.Bytes(), wb.Bytes()) || b.Len != 19 {
		t.Fatal("copy differs from its source")
	}
	c, _ := NewSeq(p, testSpecs)
	if err := c.ReadState(bytes.NewReader(wa.Bytes())); err != nil {
		t.Fatal(err)
	}
	var wc bytes.Buffer
	c.WriteState(&wc)
	if !bytes.Equal(wa.Bytes(), wc.Bytes()) {
		t.Fatal("state does not survive a round trip")
	}
}

func TestReadStateRejects(t *testing.T) {
	p, _ := NewPool(64, 100)
	a, _ := NewSeq(p, testSpecs)
	a.Reserve(9)
	fill(a, 9, 1)
	var w bytes.Buffer
	a.WriteState(&w)
	good := w.Bytes()
	other := append([]Spec(nil), testSpecs...)
	other[2].FixedSlots = 2
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
		{"empty", nil, testSpecs, "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := NewSeq(p, tc.specs)
			defer s.Release()
			err := s.ReadState(bytes.NewReader(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzReadState(f *testing.F) {
	p, _ := NewPool(64, 200)
	a, _ := NewSeq(p, testSpecs)
	a.Reserve(9)
	fill(a, 9, 1)
	var w bytes.Buffer
	a.WriteState(&w)
	f.Add(w.Bytes())
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := NewSeq(p, testSpecs)
		if err != nil {
			t.Skip("pool exhausted")
		}
		defer s.Release()
		if err := s.ReadState(bytes.NewReader(data)); err != nil {
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
