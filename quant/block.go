package quant

import "fmt"

// FP8Block is the side of the square blocks sharing one UE8M0 scale in FP8
// weight matrices of DeepSeek-V4 checkpoints.
const FP8Block = 128

// FP4Group is the number of consecutive columns of a row sharing one UE8M0
// scale in packed FP4 matrices.
const FP4Group = 32

// FP8ScaleShape returns the shape [ceil(rows/128), ceil(cols/128)] of the
// scale tensor of a rows x cols FP8 matrix.
func FP8ScaleShape(rows, cols int) (scaleRows, scaleCols int) {
	return (rows + FP8Block - 1) / FP8Block, (cols + FP8Block - 1) / FP8Block
}

// QuantizeFP8Block quantizes the row-major rows x cols matrix w to e4m3fn with
// one UE8M0 scale per 128x128 block (edge blocks may be partial). For each
// block, with amax its largest magnitude clamped to >= 1e-30, the scale is
// 2^ceil(log2(amax/448)) and q = e4m3(clamp(w/scale, -448, 448)). It returns
// data, rows*cols e4m3 bytes, and scale, the [ceil(rows/128), ceil(cols/128)]
// scale bytes, both row-major.
func QuantizeFP8Block(w []float32, rows, cols int) (data, scale []byte) {
	checkShape(len(w), rows, cols)
	sr, sc := FP8ScaleShape(rows, cols)
	data = make([]byte, rows*cols)
	scale = make([]byte, sr*sc)
	for bi := range sr {
		r0, r1 := bi*FP8Block, min((bi+1)*FP8Block, rows)
		for bj := range sc {
			c0, c1 := bj*FP8Block, min((bj+1)*FP8Block, cols)
			var amax float32
			for r := r0; r < r1; r++ {
				for _, v := range w[r*cols+c0 : r*cols+c1] {
					amax = max(amax, abs32(v))
				}
			}
			amax = max(amax, 1e-30)
			s := Float32ToUE8M0(amax / E4M3MaxFinite)
			scale[bi*sc+bj] = s
			sv := UE8M0ToFloat32(s)
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					q := min(max(w[r*cols+c]/sv, -E4M3MaxFinite), E4M3MaxFinite)
					data[r*cols+c] = Float32ToE4M3(q)
				}
			}
		}
	}
	return data, scale
}

// DequantizeFP8Block returns the row-major rows x cols float32 matrix of the
// e4m3fn data with 128x128 block scales, as produced by QuantizeFP8Block:
// w[r][c] = e4m3(data[r*cols+c]) * 2^(scale[r/128][c/128]-127).
func DequantizeFP8Block(data, scale []byte, rows, cols int) []float32 {
	checkShape(len(data), rows, cols)
	sr, sc := FP8ScaleShape(rows, cols)
	if len(scale) != sr*sc {
		panic(fmt.Sprintf("quant: fp8 scale has %d bytes, want %d for %dx%d", len(scale), sr*sc, rows, cols))
	}
	w := make([]float32, rows*cols)
	for r := range rows {
		srow := scale[(r/FP8Block)*sc : (r/FP8Block+1)*sc]
		for c := range cols {
			w[r*cols+c] = E4M3ToFloat32(data[r*cols+c]) * UE8M0ToFloat32(srow[c/FP8Block])
		}
	}
	return w
}

// QuantizeFP4 quantizes the row-major rows x cols matrix w (cols a multiple of
// 32) to packed e2m1 with one UE8M0 scale per 32 consecutive columns of a row.
// For each group, with amax its largest magnitude clamped to >= 1e-30, the
// scale is 2^ceil(log2(amax/6)) and each code is Float32ToE2M1(w/scale). It
// returns data, rows x cols/2 bytes holding two codes each (the low nibble is
// the even column), and scale, rows x cols/32 bytes, both row-major.
func QuantizeFP4(w []float32, rows, cols int) (data, scale []byte) {
	checkShape(len(w), rows, cols)
	checkFP4Cols(cols)
	data = make([]byte, rows*cols/2)
	scale = make([]byte, rows*cols/FP4Group)
	for g := range scale {
		group := w[g*FP4Group : (g+1)*FP4Group]
		var amax float32
		for _, v := range group {
			amax = max(amax, abs32(v))
		}
		amax = max(amax, 1e-30)
		s := Float32ToUE8M0(amax / E2M1MaxFinite)
		scale[g] = s
		sv := UE8M0ToFloat32(s)
		out := data[g*FP4Group/2 : (g+1)*FP4Group/2]
		for i := range out {
			lo := Float32ToE2M1(group[2*i] / sv)
			hi := Float32ToE2M1(group[2*i+1] / sv)
			out[i] = lo | hi<<4
		}
	}
	return data, scale
}

// DequantizeFP4 returns the row-major rows x cols float32 matrix of packed
// e2m1 data with per-32-column scales, as produced by QuantizeFP4:
// w[r][c] = e2m1(nibble c of row r) * 2^(scale[r][c/32]-127), where column 2i
// is the low nibble and column 2i+1 the high nibble of data[r*cols/2+i].
func DequantizeFP4(data, scale []byte, rows, cols int) []float32 {
	checkFP4Cols(cols)
	checkShape(2*len(data), rows, cols)
	if len(scale) != rows*cols/FP4Group {
		panic(fmt.Sprintf("quant: fp4 scale has %d bytes, want %d for %dx%d", len(scale), rows*cols/FP4Group, rows, cols))
	}
	w := make([]float32, rows*cols)
	for i, b := range data {
		s := UE8M0ToFloat32(scale[2*i/FP4Group])
		w[2*i] = E2M1ToFloat32(b&0xF) * s
		w[2*i+1] = E2M1ToFloat32(b>>4) * s
	}
	return w
}

func checkShape(n, rows, cols int) {
	if rows < 0 || cols < 0 || n != rows*cols {
		panic(fmt.Sprintf("quant: %d values for a %dx%d matrix", n, rows, cols))
	}
}

func checkFP4Cols(cols int) {
	if cols%FP4Group != 0 {
		panic(fmt.Sprintf("quant: fp4 matrix has %d columns, not a multiple of %d", cols, FP4Group))
	}
}
