#include "go_asm.h"
#include "textflag.h"

// AVX-512 routines of the vector kernels (see vecAsm in vec_amd64.go).
// Row i's 16 lanes are one ZMM register; every product goes through
// VFMADD231PS with the weights as the second and the activations as the
// third source, as in the AVX2 routines. Each routine ends with VZEROUPPER,
// since Go code after it may run SSE instructions (an AVX-to-SSE transition
// with dirty upper halves costs hundreds of cycles on Intel).

#define LOAD4(r) \
	VMOVUPS 0(r), Z0 \
	VMOVUPS 64(r), Z1 \
	VMOVUPS 128(r), Z2 \
	VMOVUPS 192(r), Z3

#define STORE4(r) \
	VMOVUPS Z0, 0(r) \
	VMOVUPS Z1, 64(r) \
	VMOVUPS Z2, 128(r) \
	VMOVUPS Z3, 192(r)

#define ROWS4(w) \
	MOVQ 0(w), R8 \
	MOVQ 8(w), R9 \
	MOVQ 16(w), R10 \
	MOVQ 24(w), R11

// func dotF32Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotF32Z(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD4(DI)
	XORQ SI, SI

f32loop:
	CMPQ SI, CX
	JGE  f32done
	VMOVUPS     (DX)(SI*4), Z4
	VMOVUPS     (R8)(SI*4), Z5
	VMOVUPS     (R9)(SI*4), Z6
	VMOVUPS     (R10)(SI*4), Z7
	VMOVUPS     (R11)(SI*4), Z8
	VFMADD231PS Z4, Z5, Z0
	VFMADD231PS Z4, Z6, Z1
	VFMADD231PS Z4, Z7, Z2
	VFMADD231PS Z4, Z8, Z3
	ADDQ        $16, SI
	JMP         f32loop

f32done:
	STORE4(DI)
	VZEROUPPER
	RET

// func dotBF16Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotBF16Z(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD4(DI)
	XORQ SI, SI

bf16loop:
	CMPQ SI, CX
	JGE  bf16done
	VMOVUPS     (DX)(SI*4), Z4
	VPMOVZXWD   (R8)(SI*2), Z5
	VPMOVZXWD   (R9)(SI*2), Z6
	VPMOVZXWD   (R10)(SI*2), Z7
	VPMOVZXWD   (R11)(SI*2), Z8
	VPSLLD      $16, Z5, Z5
	VPSLLD      $16, Z6, Z6
	VPSLLD      $16, Z7, Z7
	VPSLLD      $16, Z8, Z8
	VFMADD231PS Z4, Z5, Z0
	VFMADD231PS Z4, Z6, Z1
	VFMADD231PS Z4, Z7, Z2
	VFMADD231PS Z4, Z8, Z3
	ADDQ        $16, SI
	JMP         bf16loop

bf16done:
	STORE4(DI)
	VZEROUPPER
	RET

// func dotF16Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotF16Z(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD4(DI)
	XORQ SI, SI

f16loop:
	CMPQ SI, CX
	JGE  f16done
	VMOVUPS     (DX)(SI*4), Z4
	VCVTPH2PS   (R8)(SI*2), Z5
	VCVTPH2PS   (R9)(SI*2), Z6
	VCVTPH2PS   (R10)(SI*2), Z7
	VCVTPH2PS   (R11)(SI*2), Z8
	VFMADD231PS Z4, Z5, Z0
	VFMADD231PS Z4, Z6, Z1
	VFMADD231PS Z4, Z7, Z2
	VFMADD231PS Z4, Z8, Z3
	ADDQ        $16, SI
	JMP         f16loop

f16done:
	STORE4(DI)
	VZEROUPPER
	RET

// E4M3 to float32, exactly: the byte sign-extended to 16 bits and shifted
// left by 7, with bit 14 cleared (mask 0xBF80), is the IEEE half whose value
// is the e4m3 value times 2^-8, normal or subnormal alike; VCVTPH2PS widens
// it exactly and a multiply by 2^(s-119) (s the UE8M0 scale) gives the
// weight. Halves never become float32 subnormals this way.
#define E4M3(src, y, z, mask, mul) \
	VPMOVSXBW src, y \
	VPSLLW    $7, y, y \
	VPAND     mask, y, y \
	VCVTPH2PS y, z \
	VMULPS    mul, z, z

// E4M3X2 is E4M3 for 32 codes at once (into lo, columns 0-15, and hi,
// 16-31), with the mask in Z15 and the multiplier in Z14.
#define E4M3X2(src, lo, loy, hi, hiy) \
	VPMOVSXBW     src, lo \
	VPSLLW        $7, lo, lo \
	VPANDD        Z15, lo, lo \
	VEXTRACTI64X4 $1, lo, hiy \
	VCVTPH2PS     loy, lo \
	VCVTPH2PS     hiy, hi \
	VMULPS        Z14, lo, lo \
	VMULPS        Z14, hi, hi

// E4M3X2H and E4M3H are E4M3X2 and E4M3 without the multiply: the codes
// as IEEE halves times 2^-8, widened. dotFP8RowsZ multiplies the
// activations by the block's multiplier instead, once for its four rows:
// h·(x·m) is the same real number as (h·m)·x whenever x·m is exact (the
// caller checks that), so each fused multiply-add rounds the same sum.
#define E4M3X2H(src, lo, loy, hi, hiy) \
	VPMOVSXBW     src, lo \
	VPSLLW        $7, lo, lo \
	VPANDD        Z15, lo, lo \
	VEXTRACTI64X4 $1, lo, hiy \
	VCVTPH2PS     loy, lo \
	VCVTPH2PS     hiy, hi

#define E4M3H(src, y, z, mask) \
	VPMOVSXBW src, y \
	VPSLLW    $7, y, y \
	VPAND     mask, y, y \
	VCVTPH2PS y, z

// FP8MUL broadcasts 2^(s-119) for the scale byte at src into z, through BX.
#define FP8MUL(src, z) \
	MOVBLZX      src, BX \
	ADDL         $8, BX \
	SHLL         $23, BX \
	VPBROADCASTD BX, z

// func dotFP8Z(acc *[4]lanes, w *[4]unsafe.Pointer, s *byte, x *float32, n, bc int)
TEXT ·dotFP8Z(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	LOAD4(DI)
	MOVQ w+8(FP), AX
	ROWS4(AX)
	MOVQ s+16(FP), AX
	MOVQ x+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ bc+40(FP), DI
	MOVL $0xBF80BF80, BX
	VPBROADCASTD BX, Z15
	XORQ SI, SI

fp8block:
	CMPQ    SI, CX
	JGE     fp8done
	MOVQ    SI, R12
	ADDQ    DI, R12
	CMPQ    R12, CX
	CMOVQGT CX, R12
	FP8MUL((AX), Z14)
	INCQ    AX

	// 32 columns at a time while the block has them: one 512-bit integer
	// conversion for two vectors of weights.
	LEAQ    32(SI), R13
	CMPQ    R13, R12
	JGT     fp8inner

fp8pair:
	VMOVUPS     (DX)(SI*4), Z12
	VMOVUPS     64(DX)(SI*4), Z13
	E4M3X2((R8)(SI*1), Z4, Y4, Z5, Y5)
	E4M3X2((R9)(SI*1), Z6, Y6, Z7, Y7)
	E4M3X2((R10)(SI*1), Z8, Y8, Z9, Y9)
	E4M3X2((R11)(SI*1), Z10, Y10, Z11, Y11)
	VFMADD231PS Z12, Z4, Z0
	VFMADD231PS Z12, Z6, Z1
	VFMADD231PS Z12, Z8, Z2
	VFMADD231PS Z12, Z10, Z3
	VFMADD231PS Z13, Z5, Z0
	VFMADD231PS Z13, Z7, Z1
	VFMADD231PS Z13, Z9, Z2
	VFMADD231PS Z13, Z11, Z3
	ADDQ        $32, SI
	LEAQ        32(SI), R13
	CMPQ        R13, R12
	JLE         fp8pair
	CMPQ        SI, R12
	JGE         fp8block

fp8inner:
	VMOVUPS     (DX)(SI*4), Z12
	E4M3((R8)(SI*1), Y4, Z4, Y15, Z14)
	E4M3((R9)(SI*1), Y5, Z5, Y15, Z14)
	E4M3((R10)(SI*1), Y6, Z6, Y15, Z14)
	E4M3((R11)(SI*1), Y7, Z7, Y15, Z14)
	VFMADD231PS Z12, Z4, Z0
	VFMADD231PS Z12, Z5, Z1
	VFMADD231PS Z12, Z6, Z2
	VFMADD231PS Z12, Z7, Z3
	ADDQ        $16, SI
	CMPQ        SI, R12
	JLT         fp8inner
	JMP         fp8block

fp8done:
	MOVQ acc+0(FP), DI
	STORE4(DI)
	VZEROUPPER
	RET

// E2M1 row: the group's table (the e2m1 values times the scale, one row of
// fp4Tables.scaled, base in SI), VPERMPS on the low nibbles (even columns)
// and on the high ones (odd columns), each multiplied with its half of the
// de-interleaved x.
#define E2M1ROW(wsrc, ssrc, tab, idx, lo, hi, acc) \
	MOVBLZX      ssrc, DI \
	SHLL         $6, DI \
	VMOVUPS      (SI)(DI*1), tab \
	VPMOVZXBD    wsrc, idx \
	VPERMPS      tab, idx, lo \
	VPSRLD       $4, idx, idx \
	VPERMPS      tab, idx, hi \
	VFMADD231PS  Z28, lo, acc \
	VFMADD231PS  Z29, hi, acc

// func dotFP4Z(acc *[4]lanes, w *byte, ws int, s *byte, ss int, x *float32, groups int, tab *fp4Tables)
TEXT ·dotFP4Z(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	LOAD4(DI)
	MOVQ w+8(FP), R8
	MOVQ ws+16(FP), BX
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	MOVQ s+24(FP), R12
	MOVQ ss+32(FP), BX
	LEAQ (R12)(BX*2), R13
	ADDQ BX, R13
	MOVQ x+40(FP), DX
	MOVQ groups+48(FP), CX
	SHLQ $4, CX
	MOVQ tab+56(FP), SI
	MOVQ fp4Tables_scaled(SI), SI
	XORQ AX, AX

fp4loop:
	CMPQ    AX, CX
	JGE     fp4done
	VMOVUPS (DX)(AX*8), Z28
	VMOVUPS 64(DX)(AX*8), Z29
	E2M1ROW((R8)(AX*1), (R12), Z16, Z20, Z24, Z4, Z0)
	E2M1ROW((R9)(AX*1), (R12)(BX*1), Z17, Z21, Z25, Z5, Z1)
	E2M1ROW((R10)(AX*1), (R12)(BX*2), Z18, Z22, Z26, Z6, Z2)
	E2M1ROW((R11)(AX*1), (R13), Z19, Z23, Z27, Z7, Z3)
	INCQ    R12
	INCQ    R13
	ADDQ    $16, AX
	JMP     fp4loop

fp4done:
	MOVQ acc+0(FP), DI
	STORE4(DI)
	VZEROUPPER
	RET

// func decBF16Z(dst *float32, w *byte, n int)
TEXT ·decBF16Z(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

dbf16loop:
	CMPQ      AX, CX
	JGE       dbf16done
	VPMOVZXWD (SI)(AX*2), Z0
	VPSLLD    $16, Z0, Z0
	VMOVUPS   Z0, (DI)(AX*4)
	ADDQ      $16, AX
	JMP       dbf16loop

dbf16done:
	VZEROUPPER
	RET

// func decF16Z(dst *float32, w *byte, n int)
TEXT ·decF16Z(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

df16loop:
	CMPQ      AX, CX
	JGE       df16done
	VCVTPH2PS (SI)(AX*2), Z0
	VMOVUPS   Z0, (DI)(AX*4)
	ADDQ      $16, AX
	JMP       df16loop

df16done:
	VZEROUPPER
	RET

// func decFP8Z(dst *float32, w *byte, n int, s int)
TEXT ·decFP8Z(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), BX
	ADDL $8, BX
	SHLL $23, BX
	VPBROADCASTD BX, Z14
	MOVL $0xBF80BF80, BX
	VPBROADCASTD BX, Z15
	XORQ AX, AX

dfp8loop:
	CMPQ    AX, CX
	JGE     dfp8done
	E4M3((SI)(AX*1), Y0, Z0, Y15, Z14)
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     dfp8loop

dfp8done:
	VZEROUPPER
	RET

// func decFP4Z(dst *float32, w *byte, s *byte, groups int, tab *fp4Tables)
TEXT ·decFP4Z(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DX
	MOVQ w+8(FP), R8
	MOVQ s+16(FP), R12
	MOVQ groups+24(FP), CX
	SHLQ $4, CX
	MOVQ tab+32(FP), SI
	VMOVUPS (SI), Z31
	XORQ AX, AX

dfp4loop:
	CMPQ         AX, CX
	JGE          dfp4done
	MOVBLZX      (R12), DI
	VBROADCASTSS 64(SI)(DI*4), Z16
	VMULPS       Z31, Z16, Z16
	VPMOVZXBD    (R8)(AX*1), Z20
	VPERMPS      Z16, Z20, Z24
	VPSRLD       $4, Z20, Z20
	VPERMPS      Z16, Z20, Z25
	VMOVUPS      Z24, (DX)(AX*8)
	VMOVUPS      Z25, 64(DX)(AX*8)
	INCQ         R12
	ADDQ         $16, AX
	JMP          dfp4loop

dfp4done:
	VZEROUPPER
	RET

// func nanE4M3Z(p *byte, n int) bool
TEXT ·nanE4M3Z(SB), NOSPLIT, $0-17
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7F7F7F7F, BX
	VPBROADCASTD BX, Z1
	VPXORD       Z2, Z2, Z2
	XORQ         AX, AX

nanloop:
	CMPQ    AX, CX
	JGE     nandone
	VPANDD  (SI)(AX*1), Z1, Z0
	VPMAXUB Z0, Z2, Z2
	ADDQ    $64, AX
	JMP     nanloop

nandone:
	VPCMPEQB Z1, Z2, K1
	KORTESTQ K1, K1
	SETNE    ret+16(FP)
	VZEROUPPER
	RET

// GEMM83ROW multiplies row w (loaded into Z27) with the three tokens
// (Z24-Z26) into the accumulators a0 (token 0), a1, a2.
#define GEMM83ROW(w, a0, a1, a2) \
	VMOVUPS     w, Z27 \
	VFMADD231PS Z24, Z27, a0 \
	VFMADD231PS Z25, Z27, a1 \
	VFMADD231PS Z26, Z27, a2

// func gemm83Z(acc *[24]lanes, w *float32, ws int, xs *[4]unsafe.Pointer, n int)
//
// gemm83Z adds row i of the eight rows at w (stride ws float32s) times
// token t of xs[0..2] to acc[8t+i], over n columns: 24 accumulators in
// registers, 11 loads for 24 FMAs, and the tokens' columns read once per
// eight rows.
TEXT ·gemm83Z(SB), NOSPLIT, $0-40
	MOVQ    acc+0(FP), DI
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	VMOVUPS 512(DI), Z8
	VMOVUPS 576(DI), Z9
	VMOVUPS 640(DI), Z10
	VMOVUPS 704(DI), Z11
	VMOVUPS 768(DI), Z12
	VMOVUPS 832(DI), Z13
	VMOVUPS 896(DI), Z14
	VMOVUPS 960(DI), Z15
	VMOVUPS 1024(DI), Z16
	VMOVUPS 1088(DI), Z17
	VMOVUPS 1152(DI), Z18
	VMOVUPS 1216(DI), Z19
	VMOVUPS 1280(DI), Z20
	VMOVUPS 1344(DI), Z21
	VMOVUPS 1408(DI), Z22
	VMOVUPS 1472(DI), Z23
	MOVQ    w+8(FP), R8
	MOVQ    ws+16(FP), BX
	SHLQ    $2, BX
	LEAQ    (R8)(BX*2), R9
	ADDQ    BX, R9          // row 3
	LEAQ    (R9)(BX*2), R10
	ADDQ    BX, R10         // row 6
	MOVQ    xs+24(FP), AX
	MOVQ    0(AX), R11
	MOVQ    8(AX), R12
	MOVQ    16(AX), R13
	MOVQ    n+32(FP), CX
	SHRQ    $4, CX
	JZ      g83done

g83loop:
	VMOVUPS (R11), Z24
	VMOVUPS (R12), Z25
	VMOVUPS (R13), Z26
	GEMM83ROW((R8), Z0, Z8, Z16)
	GEMM83ROW((R8)(BX*1), Z1, Z9, Z17)
	GEMM83ROW((R8)(BX*2), Z2, Z10, Z18)
	GEMM83ROW((R9), Z3, Z11, Z19)
	GEMM83ROW((R9)(BX*1), Z4, Z12, Z20)
	GEMM83ROW((R9)(BX*2), Z5, Z13, Z21)
	GEMM83ROW((R10), Z6, Z14, Z22)
	GEMM83ROW((R10)(BX*1), Z7, Z15, Z23)
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, R10
	ADDQ    $64, R11
	ADDQ    $64, R12
	ADDQ    $64, R13
	DECQ    CX
	JNZ     g83loop

g83done:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	VMOVUPS Z8, 512(DI)
	VMOVUPS Z9, 576(DI)
	VMOVUPS Z10, 640(DI)
	VMOVUPS Z11, 704(DI)
	VMOVUPS Z12, 768(DI)
	VMOVUPS Z13, 832(DI)
	VMOVUPS Z14, 896(DI)
	VMOVUPS Z15, 960(DI)
	VMOVUPS Z16, 1024(DI)
	VMOVUPS Z17, 1088(DI)
	VMOVUPS Z18, 1152(DI)
	VMOVUPS Z19, 1216(DI)
	VMOVUPS Z20, 1280(DI)
	VMOVUPS Z21, 1344(DI)
	VMOVUPS Z22, 1408(DI)
	VMOVUPS Z23, 1472(DI)
	VZEROUPPER
	RET

// HSUMZ stores at dst the sum of the 16 lanes of z by sumLanesGo's tree:
// s[i] = (l[i] + l[i+4]) + (l[i+8] + l[i+12]), then (s[0] + s[2]) +
// (s[1] + s[3]). t1, t2 are temporaries, x2, x3 the XMM names of t2 and
// another temporary.
#define HSUMZ(z, t1, t2, x2, x3, dst) \
	VSHUFF32X4 $0xB1, z, z, t1 \
	VADDPS     t1, z, t1       \
	VSHUFF32X4 $0x4E, t1, t1, t2 \
	VADDPS     t2, t1, t2      \
	VPERMILPS  $0x4E, x2, x3   \
	VADDPS     x3, x2, x3      \
	VPERMILPS  $0x01, x3, x2   \
	VADDSS     x2, x3, x3      \
	VMOVSS     x3, dst

// func dotFP4RowsZ(y *float32, w *byte, ws int, s *byte, ss int, x *float32, groups int, quads int, tab *fp4Tables)
//
// dotFP4Z for quads groups of four consecutive rows (rows at w + r*ws,
// scales at s + r*ss), each group's four sums reduced as sumLanesGo does
// and stored at y.
TEXT ·dotFP4RowsZ(SB), NOSPLIT, $0-72
	MOVQ    y+0(FP), R14
	MOVQ    x+40(FP), DX
	MOVQ    groups+48(FP), CX
	SHLQ    $4, CX
	MOVQ    tab+64(FP), SI
	MOVQ    fp4Tables_scaled(SI), SI

fp4rquad:
	CMPQ   quads+56(FP), $0
	JLE    fp4rdone
	MOVQ   w+8(FP), R8
	MOVQ   ws+16(FP), BX
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	LEAQ   (R10)(BX*1), R11
	LEAQ   (R11)(BX*4), R15
	ADDQ   BX, R15
	MOVQ   s+24(FP), R12
	MOVQ   ss+32(FP), BX
	LEAQ   (R12)(BX*2), R13
	ADDQ   BX, R13
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ   AX, AX

	// The rows are contiguous: R15 walks the quad after next, a cache
	// line a turn (16 bytes of each of a quad's four rows), ahead of the
	// hardware prefetcher on short rows.
fp4rloop:
	CMPQ       AX, CX
	JGE        fp4rsum
	PREFETCHT0 (R15)(AX*4)
	VMOVUPS    (DX)(AX*8), Z28
	VMOVUPS 64(DX)(AX*8), Z29
	E2M1ROW((R8)(AX*1), (R12), Z16, Z20, Z24, Z4, Z0)
	E2M1ROW((R9)(AX*1), (R12)(BX*1), Z17, Z21, Z25, Z5, Z1)
	E2M1ROW((R10)(AX*1), (R12)(BX*2), Z18, Z22, Z26, Z6, Z2)
	E2M1ROW((R11)(AX*1), (R13), Z19, Z23, Z27, Z7, Z3)
	INCQ    R12
	INCQ    R13
	ADDQ    $16, AX
	JMP     fp4rloop

fp4rsum:
	HSUMZ(Z0, Z4, Z5, X5, X6, 0(R14))
	HSUMZ(Z1, Z4, Z5, X5, X6, 4(R14))
	HSUMZ(Z2, Z4, Z5, X5, X6, 8(R14))
	HSUMZ(Z3, Z4, Z5, X5, X6, 12(R14))
	ADDQ $16, R14
	MOVQ ws+16(FP), AX
	SHLQ $2, AX
	ADDQ AX, w+8(FP)
	MOVQ ss+32(FP), AX
	SHLQ $2, AX
	ADDQ AX, s+24(FP)
	DECQ quads+56(FP)
	JMP  fp4rquad

fp4rdone:
	VZEROUPPER
	RET

// func dotFP8RowsZ(y *float32, w *byte, ws int, s *byte, x *float32, n, bc, quads int)
//
// dotFP8Z for quads groups of four consecutive rows (at w + r*ws) sharing
// the block scales at s, each group's four sums reduced as sumLanesGo does
// and stored at y.
TEXT ·dotFP8RowsZ(SB), NOSPLIT, $0-64
	MOVQ         y+0(FP), R14
	MOVQ         x+32(FP), DX
	MOVQ         n+40(FP), CX
	MOVQ         bc+48(FP), DI
	MOVL         $0xBF80BF80, BX
	VPBROADCASTD BX, Z15

fp8rquad:
	CMPQ quads+56(FP), $0
	JLE  fp8rdone
	MOVQ w+8(FP), R8
	MOVQ ws+16(FP), BX
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	LEAQ (R11)(BX*4), R15
	ADDQ BX, R15
	MOVQ s+24(FP), AX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ SI, SI

fp8rblock:
	CMPQ    SI, CX
	JGE     fp8rsum
	MOVQ    SI, R12
	ADDQ    DI, R12
	CMPQ    R12, CX
	CMOVQGT CX, R12
	FP8MUL((AX), Z14)
	INCQ    AX

	// 32 columns at a time while the block has them: one 512-bit integer
	// conversion for two vectors of weights.
	LEAQ    32(SI), R13
	CMPQ    R13, R12
	JGT     fp8rinner

	// The rows are contiguous: R15 walks the quad after next, 128 bytes
	// a turn of 32 columns (the hardware prefetcher falls behind on rows
	// of 1024 columns: 5 against 8 GB/s from memory on one core).
fp8rpair:
	PREFETCHT0  (R15)(SI*4)
	PREFETCHT0  64(R15)(SI*4)
	VMULPS      (DX)(SI*4), Z14, Z12
	VMULPS      64(DX)(SI*4), Z14, Z13
	E4M3X2H((R8)(SI*1), Z4, Y4, Z5, Y5)
	E4M3X2H((R9)(SI*1), Z6, Y6, Z7, Y7)
	E4M3X2H((R10)(SI*1), Z8, Y8, Z9, Y9)
	E4M3X2H((R11)(SI*1), Z10, Y10, Z11, Y11)
	VFMADD231PS Z12, Z4, Z0
	VFMADD231PS Z12, Z6, Z1
	VFMADD231PS Z12, Z8, Z2
	VFMADD231PS Z12, Z10, Z3
	VFMADD231PS Z13, Z5, Z0
	VFMADD231PS Z13, Z7, Z1
	VFMADD231PS Z13, Z9, Z2
	VFMADD231PS Z13, Z11, Z3
	ADDQ        $32, SI
	LEAQ        32(SI), R13
	CMPQ        R13, R12
	JLE         fp8rpair
	CMPQ        SI, R12
	JGE         fp8rblock

fp8rinner:
	VMULPS      (DX)(SI*4), Z14, Z12
	E4M3H((R8)(SI*1), Y4, Z4, Y15)
	E4M3H((R9)(SI*1), Y5, Z5, Y15)
	E4M3H((R10)(SI*1), Y6, Z6, Y15)
	E4M3H((R11)(SI*1), Y7, Z7, Y15)
	VFMADD231PS Z12, Z4, Z0
	VFMADD231PS Z12, Z5, Z1
	VFMADD231PS Z12, Z6, Z2
	VFMADD231PS Z12, Z7, Z3
	ADDQ        $16, SI
	CMPQ        SI, R12
	JLT         fp8rinner
	JMP         fp8rblock

fp8rsum:
	HSUMZ(Z0, Z4, Z5, X5, X6, 0(R14))
	HSUMZ(Z1, Z4, Z5, X5, X6, 4(R14))
	HSUMZ(Z2, Z4, Z5, X5, X6, 8(R14))
	HSUMZ(Z3, Z4, Z5, X5, X6, 12(R14))
	ADDQ $16, R14
	MOVQ ws+16(FP), BX
	SHLQ $2, BX
	ADDQ BX, w+8(FP)
	DECQ quads+56(FP)
	JMP  fp8rquad

fp8rdone:
	VZEROUPPER
	RET

// func absRangeZ(x *float32, n int) (lo, hi uint32)
//
// The smallest nonzero and the largest of the magnitudes' bits of the
// float32s x[0:n] (lo 0xFFFFFFFF if none is nonzero); n is a multiple of 16.
TEXT ·absRangeZ(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z3
	VPTERNLOGD   $0xFF, Z1, Z1, Z1
	VPXORD       Z2, Z2, Z2
	XORQ         DX, DX

absrz:
	CMPQ     DX, CX
	JGE      absrzdone
	VPANDD   (SI)(DX*4), Z3, Z0
	VPMAXUD  Z0, Z2, Z2
	VPTESTMD Z0, Z0, K1
	VPMINUD  Z0, Z1, K1, Z1
	ADDQ     $16, DX
	JMP      absrz

absrzdone:
	VEXTRACTI64X4 $1, Z1, Y4
	VPMINUD       Y4, Y1, Y1
	VEXTRACTI64X4 $1, Z2, Y5
	VPMAXUD       Y5, Y2, Y2
	VEXTRACTI128  $1, Y1, X4
	VPMINUD       X4, X1, X1
	VEXTRACTI128  $1, Y2, X5
	VPMAXUD       X5, X2, X2
	VPSHUFD       $0x4E, X1, X4
	VPMINUD       X4, X1, X1
	VPSHUFD       $0x4E, X2, X5
	VPMAXUD       X5, X2, X2
	VPSHUFD       $0xB1, X1, X4
	VPMINUD       X4, X1, X1
	VPSHUFD       $0xB1, X2, X5
	VPMAXUD       X5, X2, X2
	VMOVD         X1, AX
	MOVL          AX, lo+16(FP)
	VMOVD         X2, AX
	MOVL          AX, hi+20(FP)
	VZEROUPPER
	RET

// func axpyZ(y *float32, a float32, x *float32, n int)
TEXT ·axpyZ(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	VBROADCASTSS a+8(FP), Z1
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	XORQ         AX, AX

axpyzloop:
	CMPQ    AX, CX
	JGE     axpyzdone
	VMULPS  (SI)(AX*4), Z1, Z2
	VADDPS  (DI)(AX*4), Z2, Z2
	VMOVUPS Z2, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     axpyzloop

axpyzdone:
	VZEROUPPER
	RET
