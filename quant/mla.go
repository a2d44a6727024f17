package quant

import (
	"encoding/binary"
	"math"
)

// MLABlock is the number of latent channels sharing one scale in the FP8
// MLA layout.
const MLABlock = 128

// FP8MLABytes is the size of a d-wide MLA latent slot whose last rope
// channels stay bf16, in the layout of FlashMLA's FP8 sparse kernels for
// DeepSeek-V3.2: the d-rope latent channels as e4m3, then one float32
// scale per MLABlock of them, then the rope channels as bf16 (512 + 16 +
// 128 = 656 bytes for the released 512-wide latent with 64 RoPE channels).
func FP8MLABytes(d, rope int) int {
	nope := d - rope
	return nope + 4*((nope+MLABlock-1)/MLABlock) + 2*rope
}

// EncodeFP8MLA stores x (d = len(x) channels, the last rope of them RoPE
// channels) into dst (FP8MLABytes(d, rope) bytes): each block of MLABlock
// latent channels as e4m3 of x/s, s = 2^ceil(log2(amax/448)) the block's
// power-of-two scale stored as a float32, and the RoPE channels as bf16
// (round to nearest even).
func EncodeFP8MLA(dst []byte, x []float32, rope int) {
	nope := len(x) - rope
	nb := (nope + MLABlock - 1) / MLABlock
	sc := dst[nope : nope+4*nb]
	for b := range nb {
		c0, c1 := b*MLABlock, min((b+1)*MLABlock, nope)
		var amax float32
		for _, v := range x[c0:c1] {
			amax = max(amax, abs32(v))
		}
		s := UE8M0ToFloat32(Float32ToUE8M0(max(amax, 1e-30) / E4M3MaxFinite))
		binary.LittleEndian.PutUint32(sc[4*b:], math.Float32bits(s))
		for c := c0; c < c1; c++ {
			dst[c] = Float32ToE4M3(min(max(x[c]/s, -E4M3MaxFinite), E4M3MaxFinite))
		}
	}
	ro := dst[nope+4*nb:]
	for i, v := range x[nope:] {
		binary.LittleEndian.PutUint16(ro[2*i:], Float32ToBF16(v))
	}
}

// DecodeFP8MLA is EncodeFP8MLA's inverse: dst (d channels) from src.
func DecodeFP8MLA(dst []float32, src []byte, rope int) {
	nope := len(dst) - rope
	nb := (nope + MLABlock - 1) / MLABlock
	sc := src[nope : nope+4*nb]
	for c := range nope {
		dst[c] = E4M3ToFloat32(src[c]) * math.Float32frombits(binary.LittleEndian.Uint32(sc[4*(c/MLABlock):]))
	}
	ro := src[nope+4*nb:]
	for i := range rope {
		dst[nope+i] = BF16ToFloat32(binary.LittleEndian.Uint16(ro[2*i:]))
	}
}
