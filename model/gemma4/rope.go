package gemma4

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// keyRopeFor returns the cosine and sine table the full K=V layers' derived
// keys rotate by, covering positions [0, n) at least. The table grows by
// doubling (up to the model's context) so that decoding does not rebuild
// it every step; its rows are computed on the host as RoPESplit computes
// its angles (float32(p)·f, cosine and sine in float64 rounded to float32).
func (m *Model) keyRopeFor(n int) (compute.Tensor, error) {
	if m.keyRope.Valid() && m.keyRope.Rows >= n {
		return m.keyRope, nil
	}
	inv := m.Cfg.Rope[Full].InvFreq()
	rows := max(n, 2*m.keyRope.Rows, 256)
	rows = min(rows, max(n, m.Cfg.MaxPosition))
	np := len(inv)
	t, err := m.be.Alloc(compute.F32, rows, 2*np)
	if err != nil {
		return compute.Tensor{}, fmt.Errorf("gemma4: key RoPE table of %d positions: %w", rows, err)
	}
	host := make([]float32, rows*2*np)
	for p := range rows {
		row := host[p*2*np : (p+1)*2*np]
		fp := float32(p)
		for j, f := range inv {
			s, c := math.Sincos(float64(fp * f))
			row[j], row[np+j] = float32(c), float32(s)
		}
	}
	m.be.Write(t, host)
	if m.keyRope.Valid() {
		m.be.Free(m.keyRope)
	}
	m.keyRope = t
	return t, nil
}
