package membw

import "testing"

func TestSum(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 100, 1000} {
		a := make([]uint64, n)
		var want uint64
		for i := range a {
			a[i] = uint64(i*i + 1)
			want += a[i]
		}
		if got := sum(a); got != want {
			t.Errorf("sum of %d values = %d, want %d", n, got, want)
		}
		if got := sumFast(a); got != want {
			t.Errorf("sumFast of %d values = %d, want %d", n, got, want)
		}
	}
}

// BenchmarkMeasure logs the bandwidth with one reader and with every core.
func BenchmarkMeasure(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(MeasureThreads(1), "GB/s-1thread")
		b.ReportMetric(Measure(), "GB/s-all")
	}
}
