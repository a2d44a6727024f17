package cpu

import "fmt"

// TopK writes into idx[:k] the indices of the k largest values of x, largest
// first; equal values go in index order, and NaNs rank above every number.
// It panics if k > len(x) or len(idx) < k. It keeps a heap of the k best
// indices in idx itself, so it runs in O(n + m log k) time, m being the number
// of values that enter the heap (about k·ln(n/k) for values in random order),
// and allocates nothing.
func (b *Backend) TopK(idx []int32, x []float32, k int) { topK(idx, x, k) }

// topK is TopK.
func topK(idx []int32, x []float32, k int) {
	if k > len(x) || len(idx) < k {
		panic(fmt.Sprintf("cpu: TopK of %d values into %d indices, k = %d", len(x), len(idx), k))
	}
	if k <= 0 {
		return
	}
	h := topHeap{idx: idx[:k], x: x}
	for i := range k {
		h.idx[i] = int32(i)
	}
	for i := k/2 - 1; i >= 0; i-- {
		h.down(i, k)
	}
	// The root is the worst index kept. A later index with an equal value
	// ranks below it, so only strictly greater values (or a NaN over a
	// number) replace it.
	worst := x[h.idx[0]]
	for i := k; i < len(x); i++ {
		v := x[i]
		if v > worst || v != v && worst == worst {
			h.idx[0] = int32(i)
			h.down(0, k)
			worst = x[h.idx[0]]
		}
	}
	// Heapsort: move the worst to the end, repeatedly, so the best come first.
	for end := k - 1; end > 0; end-- {
		h.idx[0], h.idx[end] = h.idx[end], h.idx[0]
		h.down(0, end)
	}
}

// topHeap is a min-heap of indices into x, ordered by rank: the root is the
// index that ranks last.
type topHeap struct {
	idx []int32
	x   []float32
}

// before reports whether index i ranks before index j: a larger value, a NaN
// over a number, or an equal value at a lower index.
func (h *topHeap) before(i, j int32) bool {
	a, b := h.x[i], h.x[j]
	switch {
	case a > b:
		return true
	case a < b:
		return false
	case a != a || b != b:
		if (a != a) != (b != b) {
			return a != a
		}
	}
	return i < j
}

// down restores the heap order below position p of idx[:n].
func (h *topHeap) down(p, n int) {
	idx := h.idx[:n]
	for {
		c := 2*p + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h.before(idx[c], idx[r]) {
			c = r // the child that ranks later
		}
		if !h.before(idx[p], idx[c]) {
			return
		}
		idx[p], idx[c] = idx[c], idx[p]
		p = c
	}
}
