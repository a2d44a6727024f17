package cpu

// matAcc computes out[i][j] += Σ_a x[i][a]·m[a][j] for i < n, j < cols, a < k,
// in float32, each sum accumulated in a's order before it is added to out.
// Rows of out, x and m start os, xs and ms values apart. panel is scratch
// of at least 4·k values.
//
// Four columns of m at a time are copied into panel, then two rows of x
// run against it, eight sums in registers: six loads per eight
// multiply-adds, where a row-by-row axpy needs three memory operations
// per one.
func matAcc(out []float32, os int, x []float32, xs int, m []float32, ms int, n, k, cols int, panel []float32) {
	j0 := 0
	for ; j0+4 <= cols; j0 += 4 {
		p := panel[:4*k]
		for a := range k {
			copy(p[4*a:4*a+4], m[a*ms+j0:a*ms+j0+4])
		}
		i := 0
		for ; i+2 <= n; i += 2 {
			x0, x1 := x[i*xs:i*xs+k], x[(i+1)*xs:(i+1)*xs+k]
			var c00, c01, c02, c03, c10, c11, c12, c13 float32
			q := p
			for a := 0; a < len(x0) && a < len(x1) && len(q) >= 4; a++ {
				u, v := x0[a], x1[a]
				q0, q1, q2, q3 := q[0], q[1], q[2], q[3]
				c00 += u * q0
				c01 += u * q1
				c02 += u * q2
				c03 += u * q3
				c10 += v * q0
				c11 += v * q1
				c12 += v * q2
				c13 += v * q3
				q = q[4:]
			}
			o0, o1 := out[i*os+j0:i*os+j0+4], out[(i+1)*os+j0:(i+1)*os+j0+4]
			o0[0] += c00
			o0[1] += c01
			o0[2] += c02
			o0[3] += c03
			o1[0] += c10
			o1[1] += c11
			o1[2] += c12
			o1[3] += c13
		}
		if i < n {
			x0 := x[i*xs : i*xs+k]
			var c0, c1, c2, c3 float32
			q := p
			for a := 0; a < len(x0) && len(q) >= 4; a++ {
				u := x0[a]
				c0 += u * q[0]
				c1 += u * q[1]
				c2 += u * q[2]
				c3 += u * q[3]
				q = q[4:]
			}
			o0 := out[i*os+j0 : i*os+j0+4]
			o0[0] += c0
			o0[1] += c1
			o0[2] += c2
			o0[3] += c3
		}
	}
	for ; j0 < cols; j0++ {
		for i := range n {
			var c float32
			for a := range k {
				c += x[i*xs+a] * m[a*ms+j0]
			}
			out[i*os+j0] += c
		}
	}
}
