package quant

import (
	"encoding/binary"
	"math"
)

// Cache vectors in the layouts DeepSeek's FP8 inference stores them (the
// handbook's KV ledger sizes them so: 584 bytes for a 512-wide KV entry
// with 64 RoPE channels, 132 bytes for a 128-wide indexer key).

// KVBlock is the number of channels sharing one scale in the FP8 KV layout.
const KVBlock = 64

// FP8KVBytes is the size of a d-wide vector whose last rope channels stay
// bf16: d-rope e4m3 bytes, 2·rope bf16 bytes, one UE8M0 scale per KVBlock
// e4m3 channels, the scales padded to a multiple of 8 bytes.
func FP8KVBytes(d, rope int) int {
	nope := d - rope
	scales := (nope + KVBlock - 1) / KVBlock
	return nope + 2*rope + (scales+7)/8*8
}

// EncodeFP8KV stores x (d = len(x) channels, the last rope of them RoPE
// channels) into dst (FP8KVBytes(d, rope) bytes): each block of KVBlock
// non-RoPE channels as e4m3 of x/s with s = 2^ceil(log2(amax/448)) its
// power-of-two scale, the RoPE channels as bf16 (round to nearest even).
func EncodeFP8KV(dst []byte, x []float32, rope int) {
	d := len(x)
	nope := d - rope
	sc := dst[nope+2*rope:]
	for b, c0 := 0, 0; c0 < nope; b, c0 = b+1, c0+KVBlock {
		c1 := min(c0+KVBlock, nope)
		var amax float32
		for _, v := range x[c0:c1] {
			amax = max(amax, abs32(v))
		}
		s := Float32ToUE8M0(max(amax, 1e-30) / E4M3MaxFinite)
		sc[b] = s
		sv := UE8M0ToFloat32(s)
		for c := c0; c < c1; c++ {
			dst[c] = Float32ToE4M3(min(max(x[c]/sv, -E4M3MaxFinite), E4M3MaxFinite))
		}
	}
	for b := (nope + KVBlock - 1) / KVBlock; b < len(sc); b++ {
		sc[b] = 0
	}
	for i, v := range x[nope:] {
		binary.LittleEndian.PutUint16(dst[nope+2*i:], Float32ToBF16(v))
	}
}

// DecodeFP8KV is EncodeFP8KV's inverse: dst (d channels) from src.
func DecodeFP8KV(dst []float32, src []byte, rope int) {
	d := len(dst)
	nope := d - rope
	sc := src[nope+2*rope:]
	for c := range nope {
		dst[c] = E4M3ToFloat32(src[c]) * UE8M0ToFloat32(sc[c/KVBlock])
	}
	for i := range rope {
		dst[nope+i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[nope+2*i:]))
	}
}

// FP8KeyBytes is the size of a d-wide indexer key: d e4m3 bytes and one
// float32 scale.
func FP8KeyBytes(d int) int { return d + 4 }

// EncodeFP8Key stores x as e4m3 of x/s with s = amax/448 (float32).
func EncodeFP8Key(dst []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	s := max(amax, 1e-30) / E4M3MaxFinite
	for i, v := range x {
		dst[i] = Float32ToE4M3(min(max(v/s, -E4M3MaxFinite), E4M3MaxFinite))
	}
	binary.LittleEndian.PutUint32(dst[len(x):], math.Float32bits(s))
}

// DecodeFP8Key is EncodeFP8Key's inverse.
func DecodeFP8Key(dst []float32, src []byte) {
	s := math.Float32frombits(binary.LittleEndian.Uint32(src[len(dst):]))
	for i := range dst {
		dst[i] = E4M3ToFloat32(src[i]) * s
	}
}

// EncodeBF16 stores x as bf16 (round to nearest even), 2 bytes per value.
func EncodeBF16(dst []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint16(dst[2*i:], Float32ToBF16(v))
	}
}

// DecodeBF16 is EncodeBF16's inverse.
func DecodeBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
