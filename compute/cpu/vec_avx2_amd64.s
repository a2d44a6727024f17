#include "go_asm.h"
#include "textflag.h"

// AVX2 routines of the vector kernels (see vecAsm in vec_amd64.go). Row i's
// 16 lanes are two YMM registers, lanes 0-7 and 8-15, so these compute the
// AVX-512 routines' bits: the same products, in the same order in each lane.
// Every product goes through VFMADD231PS with the weights as the second and
// the activations as the third source. Each routine ends with VZEROUPPER.

#define LOAD8(r) \
	VMOVUPS 0(r), Y0 \
	VMOVUPS 32(r), Y1 \
	VMOVUPS 64(r), Y2 \
	VMOVUPS 96(r), Y3 \
	VMOVUPS 128(r), Y4 \
	VMOVUPS 160(r), Y5 \
	VMOVUPS 192(r), Y6 \
	VMOVUPS 224(r), Y7

#define STORE8(r) \
	VMOVUPS Y0, 0(r) \
	VMOVUPS Y1, 32(r) \
	VMOVUPS Y2, 64(r) \
	VMOVUPS Y3, 96(r) \
	VMOVUPS Y4, 128(r) \
	VMOVUPS Y5, 160(r) \
	VMOVUPS Y6, 192(r) \
	VMOVUPS Y7, 224(r)

#define ROWS4(w) \
	MOVQ 0(w), R8 \
	MOVQ 8(w), R9 \
	MOVQ 16(w), R10 \
	MOVQ 24(w), R11

// func dotF32Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotF32Y(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD8(DI)
	XORQ SI, SI

f32loop:
	CMPQ SI, CX
	JGE  f32done
	VMOVUPS     (R8)(SI*4), Y8
	VMOVUPS     32(R8)(SI*4), Y9
	VMOVUPS     (R9)(SI*4), Y10
	VMOVUPS     32(R9)(SI*4), Y11
	VFMADD231PS (DX)(SI*4), Y8, Y0
	VFMADD231PS 32(DX)(SI*4), Y9, Y1
	VFMADD231PS (DX)(SI*4), Y10, Y2
	VFMADD231PS 32(DX)(SI*4), Y11, Y3
	VMOVUPS     (R10)(SI*4), Y8
	VMOVUPS     32(R10)(SI*4), Y9
	VMOVUPS     (R11)(SI*4), Y10
	VMOVUPS     32(R11)(SI*4), Y11
	VFMADD231PS (DX)(SI*4), Y8, Y4
	VFMADD231PS 32(DX)(SI*4), Y9, Y5
	VFMADD231PS (DX)(SI*4), Y10, Y6
	VFMADD231PS 32(DX)(SI*4), Y11, Y7
	ADDQ        $16, SI
	JMP         f32loop

f32done:
	STORE8(DI)
	VZEROUPPER
	RET

#define BF16ROW(r, lo, hi) \
	VPMOVZXWD (r)(SI*2), lo \
	VPMOVZXWD 16(r)(SI*2), hi \
	VPSLLD    $16, lo, lo \
	VPSLLD    $16, hi, hi

// func dotBF16Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotBF16Y(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD8(DI)
	XORQ SI, SI

bf16loop:
	CMPQ SI, CX
	JGE  bf16done
	BF16ROW(R8, Y8, Y9)
	BF16ROW(R9, Y10, Y11)
	VFMADD231PS (DX)(SI*4), Y8, Y0
	VFMADD231PS 32(DX)(SI*4), Y9, Y1
	VFMADD231PS (DX)(SI*4), Y10, Y2
	VFMADD231PS 32(DX)(SI*4), Y11, Y3
	BF16ROW(R10, Y8, Y9)
	BF16ROW(R11, Y10, Y11)
	VFMADD231PS (DX)(SI*4), Y8, Y4
	VFMADD231PS 32(DX)(SI*4), Y9, Y5
	VFMADD231PS (DX)(SI*4), Y10, Y6
	VFMADD231PS 32(DX)(SI*4), Y11, Y7
	ADDQ        $16, SI
	JMP         bf16loop

bf16done:
	STORE8(DI)
	VZEROUPPER
	RET

#define F16ROW(r, lo, hi) \
	VCVTPH2PS (r)(SI*2), lo \
	VCVTPH2PS 16(r)(SI*2), hi

// func dotF16Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)
TEXT ·dotF16Y(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	ROWS4(AX)
	LOAD8(DI)
	XORQ SI, SI

f16loop:
	CMPQ SI, CX
	JGE  f16done
	F16ROW(R8, Y8, Y9)
	F16ROW(R9, Y10, Y11)
	VFMADD231PS (DX)(SI*4), Y8, Y0
	VFMADD231PS 32(DX)(SI*4), Y9, Y1
	VFMADD231PS (DX)(SI*4), Y10, Y2
	VFMADD231PS 32(DX)(SI*4), Y11, Y3
	F16ROW(R10, Y8, Y9)
	F16ROW(R11, Y10, Y11)
	VFMADD231PS (DX)(SI*4), Y8, Y4
	VFMADD231PS 32(DX)(SI*4), Y9, Y5
	VFMADD231PS (DX)(SI*4), Y10, Y6
	VFMADD231PS 32(DX)(SI*4), Y11, Y7
	ADDQ        $16, SI
	JMP         f16loop

f16done:
	STORE8(DI)
	VZEROUPPER
	RET

// E4M3 to float32 as in the AVX-512 routines: the e4m3 value times 2^-8 as
// an IEEE half (VPMOVSXBW, VPSLLW, VPAND with 0xBF80), widened by
// VCVTPH2PS, times 2^(s-119) in Y14.

// func dotFP8Y(acc *[4]lanes, w *[4]unsafe.Pointer, s *byte, x *float32, n, bc int)
TEXT ·dotFP8Y(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	LOAD8(DI)
	MOVQ w+8(FP), AX
	ROWS4(AX)
	MOVQ s+16(FP), AX
	MOVQ x+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ bc+40(FP), DI
	MOVL $0xBF80BF80, BX
	VMOVD BX, X15
	VPBROADCASTD X15, Y15
	XORQ SI, SI

fp8block:
	CMPQ    SI, CX
	JGE     fp8done
	MOVQ    SI, R12
	ADDQ    DI, R12
	CMPQ    R12, CX
	CMOVQGT CX, R12
	MOVBLZX (AX), BX
	ADDL    $8, BX
	SHLL    $23, BX
	VMOVD    BX, X14
	VPBROADCASTD X14, Y14
	INCQ    AX

fp8inner:
	VPMOVSXBW    (R8)(SI*1), Y8
	VPSLLW       $7, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTPH2PS    X8, Y9
	VEXTRACTI128 $1, Y8, X10
	VCVTPH2PS    X10, Y10
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VFMADD231PS  (DX)(SI*4), Y9, Y0
	VFMADD231PS  32(DX)(SI*4), Y10, Y1
	VPMOVSXBW    (R9)(SI*1), Y11
	VPSLLW       $7, Y11, Y11
	VPAND        Y15, Y11, Y11
	VCVTPH2PS    X11, Y12
	VEXTRACTI128 $1, Y11, X13
	VCVTPH2PS    X13, Y13
	VMULPS       Y14, Y12, Y12
	VMULPS       Y14, Y13, Y13
	VFMADD231PS  (DX)(SI*4), Y12, Y2
	VFMADD231PS  32(DX)(SI*4), Y13, Y3
	VPMOVSXBW    (R10)(SI*1), Y8
	VPSLLW       $7, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTPH2PS    X8, Y9
	VEXTRACTI128 $1, Y8, X10
	VCVTPH2PS    X10, Y10
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VFMADD231PS  (DX)(SI*4), Y9, Y4
	VFMADD231PS  32(DX)(SI*4), Y10, Y5
	VPMOVSXBW    (R11)(SI*1), Y11
	VPSLLW       $7, Y11, Y11
	VPAND        Y15, Y11, Y11
	VCVTPH2PS    X11, Y12
	VEXTRACTI128 $1, Y11, X13
	VCVTPH2PS    X13, Y13
	VMULPS       Y14, Y12, Y12
	VMULPS       Y14, Y13, Y13
	VFMADD231PS  (DX)(SI*4), Y12, Y6
	VFMADD231PS  32(DX)(SI*4), Y13, Y7
	ADDQ         $16, SI
	CMPQ         SI, R12
	JLT          fp8inner
	JMP          fp8block

fp8done:
	MOVQ acc+0(FP), DI
	STORE8(DI)
	VZEROUPPER
	RET

// E2M1HALF decodes the 8 codes in idx (one per dword, in the low nibble):
// the magnitude by VPERMPS from tab (the 8 magnitudes times the scale), the
// sign from bit 3. The result is in v; t is a temporary.
#define E2M1HALF(tab, idx, v, t) \
	VPERMPS tab, idx, v \
	VPSLLD  $28, idx, t \
	VPAND   Y14, t, t \
	VPOR    t, v, v

// E2M1ROW multiplies one row's group (16 bytes at wreg + AX, scale byte at
// ssrc) with the de-interleaved x at (DX)(AX*8), into the accumulators lo,
// hi; the magnitudes times the scale come from fp4Tables.scaled (base in
// SI), the sign from E2M1HALF.
#define E2M1ROW(wreg, ssrc, lo, hi) \
	MOVBLZX      ssrc, DI \
	SHLL         $6, DI \
	VMOVUPS      (SI)(DI*1), Y8 \
	VPMOVZXBD    (wreg)(AX*1), Y9 \
	VPMOVZXBD    8(wreg)(AX*1), Y10 \
	E2M1HALF(Y8, Y9, Y11, Y12) \
	VFMADD231PS  (DX)(AX*8), Y11, lo \
	E2M1HALF(Y8, Y10, Y11, Y12) \
	VFMADD231PS  32(DX)(AX*8), Y11, hi \
	VPSRLD       $4, Y9, Y9 \
	VPSRLD       $4, Y10, Y10 \
	E2M1HALF(Y8, Y9, Y11, Y12) \
	VFMADD231PS  64(DX)(AX*8), Y11, lo \
	E2M1HALF(Y8, Y10, Y11, Y12) \
	VFMADD231PS  96(DX)(AX*8), Y11, hi

// func dotFP4Y(acc *[4]lanes, w *byte, ws int, s *byte, ss int, x *float32, groups int, tab *fp4Tables)
TEXT ·dotFP4Y(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	LOAD8(DI)
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
	VBROADCASTSS 1088(SI), Y14
	MOVQ fp4Tables_scaled(SI), SI
	XORQ AX, AX

fp4loop:
	CMPQ AX, CX
	JGE  fp4done
	E2M1ROW(R8, (R12), Y0, Y1)
	E2M1ROW(R9, (R12)(BX*1), Y2, Y3)
	E2M1ROW(R10, (R12)(BX*2), Y4, Y5)
	E2M1ROW(R11, (R13), Y6, Y7)
	INCQ R12
	INCQ R13
	ADDQ $16, AX
	JMP  fp4loop

fp4done:
	MOVQ acc+0(FP), DI
	STORE8(DI)
	VZEROUPPER
	RET

// func decBF16Y(dst *float32, w *byte, n int)
TEXT ·decBF16Y(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

dbf16loop:
	CMPQ      AX, CX
	JGE       dbf16done
	VPMOVZXWD (SI)(AX*2), Y0
	VPMOVZXWD 16(SI)(AX*2), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVUPS   Y0, (DI)(AX*4)
	VMOVUPS   Y1, 32(DI)(AX*4)
	ADDQ      $16, AX
	JMP       dbf16loop

dbf16done:
	VZEROUPPER
	RET

// func decF16Y(dst *float32, w *byte, n int)
TEXT ·decF16Y(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

df16loop:
	CMPQ      AX, CX
	JGE       df16done
	VCVTPH2PS (SI)(AX*2), Y0
	VCVTPH2PS 16(SI)(AX*2), Y1
	VMOVUPS   Y0, (DI)(AX*4)
	VMOVUPS   Y1, 32(DI)(AX*4)
	ADDQ      $16, AX
	JMP       df16loop

df16done:
	VZEROUPPER
	RET

// func decFP8Y(dst *float32, w *byte, n int, s int)
TEXT ·decFP8Y(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), BX
	ADDL $8, BX
	SHLL $23, BX
	VMOVD BX, X14
	VPBROADCASTD X14, Y14
	MOVL $0xBF80BF80, BX
	VMOVD BX, X15
	VPBROADCASTD X15, Y15
	XORQ AX, AX

dfp8loop:
	CMPQ         AX, CX
	JGE          dfp8done
	VPMOVSXBW    (SI)(AX*1), Y8
	VPSLLW       $7, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTPH2PS    X8, Y9
	VEXTRACTI128 $1, Y8, X10
	VCVTPH2PS    X10, Y10
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VMOVUPS      Y9, (DI)(AX*4)
	VMOVUPS      Y10, 32(DI)(AX*4)
	ADDQ         $16, AX
	JMP          dfp8loop

dfp8done:
	VZEROUPPER
	RET

// func decFP4Y(dst *float32, w *byte, s *byte, groups int, tab *fp4Tables)
TEXT ·decFP4Y(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DX
	MOVQ w+8(FP), R8
	MOVQ s+16(FP), R12
	MOVQ groups+24(FP), CX
	SHLQ $4, CX
	MOVQ tab+32(FP), SI
	VMOVUPS (SI), Y15
	VBROADCASTSS 1088(SI), Y14
	XORQ AX, AX

dfp4loop:
	CMPQ         AX, CX
	JGE          dfp4done
	MOVBLZX      (R12), DI
	VBROADCASTSS 64(SI)(DI*4), Y8
	VMULPS       Y15, Y8, Y8
	VPMOVZXBD    (R8)(AX*1), Y9
	VPMOVZXBD    8(R8)(AX*1), Y10
	E2M1HALF(Y8, Y9, Y11, Y12)
	VMOVUPS      Y11, (DX)(AX*8)
	E2M1HALF(Y8, Y10, Y11, Y12)
	VMOVUPS      Y11, 32(DX)(AX*8)
	VPSRLD       $4, Y9, Y9
	VPSRLD       $4, Y10, Y10
	E2M1HALF(Y8, Y9, Y11, Y12)
	VMOVUPS      Y11, 64(DX)(AX*8)
	E2M1HALF(Y8, Y10, Y11, Y12)
	VMOVUPS      Y11, 96(DX)(AX*8)
	INCQ         R12
	ADDQ         $16, AX
	JMP          dfp4loop

dfp4done:
	VZEROUPPER
	RET

// func gemm2Y(acc unsafe.Pointer, w unsafe.Pointer, ws int, xa, xb unsafe.Pointer, n int)
//
// gemm2Y runs one half of the 16 lanes (the caller offsets every pointer by
// 0 or 8 float32s): the four rows at w (stride ws float32s) times the tokens
// xa and xb over n columns, reading 8 of every 16; token xa's row i
// accumulates at acc + 64i, token xb's at acc + 256 + 64i.
TEXT ·gemm2Y(SB), NOSPLIT, $0-48
	MOVQ    acc+0(FP), DI
	MOVQ    w+8(FP), R8
	MOVQ    ws+16(FP), BX
	SHLQ    $2, BX
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	MOVQ    xa+24(FP), R12
	MOVQ    xb+32(FP), R13
	MOVQ    n+40(FP), CX
	SHLQ    $2, CX
	VMOVUPS 0(DI), Y0
	VMOVUPS 64(DI), Y1
	VMOVUPS 128(DI), Y2
	VMOVUPS 192(DI), Y3
	VMOVUPS 256(DI), Y4
	VMOVUPS 320(DI), Y5
	VMOVUPS 384(DI), Y6
	VMOVUPS 448(DI), Y7
	XORQ    AX, AX

gemmloop:
	CMPQ        AX, CX
	JGE         gemmdone
	VMOVUPS     (R8)(AX*1), Y8
	VMOVUPS     (R9)(AX*1), Y9
	VMOVUPS     (R10)(AX*1), Y10
	VMOVUPS     (R11)(AX*1), Y11
	VMOVUPS     (R12)(AX*1), Y12
	VMOVUPS     (R13)(AX*1), Y13
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y12, Y9, Y1
	VFMADD231PS Y12, Y10, Y2
	VFMADD231PS Y12, Y11, Y3
	VFMADD231PS Y13, Y8, Y4
	VFMADD231PS Y13, Y9, Y5
	VFMADD231PS Y13, Y10, Y6
	VFMADD231PS Y13, Y11, Y7
	ADDQ        $64, AX
	JMP         gemmloop

gemmdone:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 64(DI)
	VMOVUPS Y2, 128(DI)
	VMOVUPS Y3, 192(DI)
	VMOVUPS Y4, 256(DI)
	VMOVUPS Y5, 320(DI)
	VMOVUPS Y6, 384(DI)
	VMOVUPS Y7, 448(DI)
	VZEROUPPER
	RET

// func nanE4M3Y(p *byte, n int) bool
TEXT ·nanE4M3Y(SB), NOSPLIT, $0-17
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7F7F7F7F, BX
	VMOVD         BX, X1
	VPBROADCASTD X1, Y1
	VPXOR        Y2, Y2, Y2
	XORQ         AX, AX

nanloop:
	CMPQ    AX, CX
	JGE     nandone
	VPAND   (SI)(AX*1), Y1, Y0
	VPMAXUB Y0, Y2, Y2
	VPAND   32(SI)(AX*1), Y1, Y0
	VPMAXUB Y0, Y2, Y2
	ADDQ    $64, AX
	JMP     nanloop

nandone:
	VPCMPEQB  Y1, Y2, Y2
	VPMOVMSKB Y2, BX
	TESTL     BX, BX
	SETNE     ret+16(FP)
	VZEROUPPER
	RET

// HSUMY stores at dst the sum of the 16 lanes in lo (lanes 0-7, XMM name
// xlo) and hi (8-15, xhi) by sumLanesGo's tree; xa, xb are temporaries.
#define HSUMY(lo, xlo, hi, xhi, xa, xb, dst) \
	VEXTRACTF128 $1, lo, xa  \
	VADDPS       xa, xlo, xa \
	VEXTRACTF128 $1, hi, xb  \
	VADDPS       xb, xhi, xb \
	VADDPS       xb, xa, xa  \
	VPERMILPS    $0x4E, xa, xb \
	VADDPS       xb, xa, xb  \
	VPERMILPS    $0x01, xb, xa \
	VADDSS       xa, xb, xb  \
	VMOVSS       xb, dst

// func dotFP4RowsY(y *float32, w *byte, ws int, s *byte, ss int, x *float32, groups int, quads int, tab *fp4Tables)
//
// dotFP4Y for quads groups of four consecutive rows, as dotFP4RowsZ.
TEXT ·dotFP4RowsY(SB), NOSPLIT, $0-72
	MOVQ         y+0(FP), R14
	MOVQ         x+40(FP), DX
	MOVQ         groups+48(FP), CX
	SHLQ         $4, CX
	MOVQ         tab+64(FP), SI
	VBROADCASTSS 1088(SI), Y14
	MOVQ         fp4Tables_scaled(SI), SI

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
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   AX, AX

	// R15 walks the quad after next, as in dotFP4RowsZ.
fp4rloop:
	CMPQ       AX, CX
	JGE        fp4rsum
	PREFETCHT0 (R15)(AX*4)
	E2M1ROW(R8, (R12), Y0, Y1)
	E2M1ROW(R9, (R12)(BX*1), Y2, Y3)
	E2M1ROW(R10, (R12)(BX*2), Y4, Y5)
	E2M1ROW(R11, (R13), Y6, Y7)
	INCQ R12
	INCQ R13
	ADDQ $16, AX
	JMP  fp4rloop

fp4rsum:
	HSUMY(Y0, X0, Y1, X1, X12, X13, 0(R14))
	HSUMY(Y2, X2, Y3, X3, X12, X13, 4(R14))
	HSUMY(Y4, X4, Y5, X5, X12, X13, 8(R14))
	HSUMY(Y6, X6, Y7, X7, X12, X13, 12(R14))
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

// dotFP8RowsY multiplies the activations by the block's multiplier (as
// dotFP8RowsZ does; E4M3X2H in vec_avx512_amd64.s says why the bits stay).
//
// func dotFP8RowsY(y *float32, w *byte, ws int, s *byte, x *float32, n, bc, quads int)
//
// dotFP8Y for quads groups of four consecutive rows (at w + r*ws) sharing
// the block scales at s, each group's four sums reduced as sumLanesGo does
// and stored at y.
TEXT ·dotFP8RowsY(SB), NOSPLIT, $0-64
	MOVQ         y+0(FP), R14
	MOVQ         x+32(FP), DX
	MOVQ         n+40(FP), CX
	MOVQ         bc+48(FP), DI
	MOVL         $0xBF80BF80, BX
	VMOVD        BX, X15
	VPBROADCASTD X15, Y15

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
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ SI, SI

fp8rblock:
	CMPQ    SI, CX
	JGE     fp8rsum
	MOVQ    SI, R12
	ADDQ    DI, R12
	CMPQ    R12, CX
	CMOVQGT CX, R12
	MOVBLZX (AX), BX
	ADDL    $8, BX
	SHLL    $23, BX
	VMOVD    BX, X14
	VPBROADCASTD X14, Y14
	INCQ    AX

	// R15 walks the quad after next, as in dotFP8RowsZ.
fp8rinner:
	PREFETCHT0   (R15)(SI*4)
	VMULPS       (DX)(SI*4), Y14, Y11
	VMULPS       32(DX)(SI*4), Y14, Y12
	VPMOVSXBW    (R8)(SI*1), Y8
	VPSLLW       $7, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTPH2PS    X8, Y9
	VEXTRACTI128 $1, Y8, X10
	VCVTPH2PS    X10, Y10
	VFMADD231PS  Y11, Y9, Y0
	VFMADD231PS  Y12, Y10, Y1
	VPMOVSXBW    (R9)(SI*1), Y13
	VPSLLW       $7, Y13, Y13
	VPAND        Y15, Y13, Y13
	VCVTPH2PS    X13, Y9
	VEXTRACTI128 $1, Y13, X10
	VCVTPH2PS    X10, Y10
	VFMADD231PS  Y11, Y9, Y2
	VFMADD231PS  Y12, Y10, Y3
	VPMOVSXBW    (R10)(SI*1), Y8
	VPSLLW       $7, Y8, Y8
	VPAND        Y15, Y8, Y8
	VCVTPH2PS    X8, Y9
	VEXTRACTI128 $1, Y8, X10
	VCVTPH2PS    X10, Y10
	VFMADD231PS  Y11, Y9, Y4
	VFMADD231PS  Y12, Y10, Y5
	VPMOVSXBW    (R11)(SI*1), Y13
	VPSLLW       $7, Y13, Y13
	VPAND        Y15, Y13, Y13
	VCVTPH2PS    X13, Y9
	VEXTRACTI128 $1, Y13, X10
	VCVTPH2PS    X10, Y10
	VFMADD231PS  Y11, Y9, Y6
	VFMADD231PS  Y12, Y10, Y7
	ADDQ         $16, SI
	CMPQ         SI, R12
	JLT          fp8rinner
	JMP          fp8rblock

fp8rsum:
	HSUMY(Y0, X0, Y1, X1, X12, X13, 0(R14))
	HSUMY(Y2, X2, Y3, X3, X12, X13, 4(R14))
	HSUMY(Y4, X4, Y5, X5, X12, X13, 8(R14))
	HSUMY(Y6, X6, Y7, X7, X12, X13, 12(R14))
	ADDQ $16, R14
	MOVQ ws+16(FP), BX
	SHLQ $2, BX
	ADDQ BX, w+8(FP)
	DECQ quads+56(FP)
	JMP  fp8rquad

fp8rdone:
	VZEROUPPER
	RET

// func absRangeY(x *float32, n int) (lo, hi uint32)
//
// absRangeZ in AVX2: zeros are set to all ones before the minimum.
TEXT ·absRangeY(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7fffffff, AX
	MOVQ         AX, X3
	VPBROADCASTD X3, Y3
	VPCMPEQD     Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y6, Y6, Y6
	XORQ         DX, DX

absry:
	CMPQ     DX, CX
	JGE      absrydone
	VPAND    (SI)(DX*4), Y3, Y0
	VPMAXUD  Y0, Y2, Y2
	VPCMPEQD Y6, Y0, Y7
	VPOR     Y7, Y0, Y0
	VPMINUD  Y0, Y1, Y1
	VPAND    32(SI)(DX*4), Y3, Y0
	VPMAXUD  Y0, Y2, Y2
	VPCMPEQD Y6, Y0, Y7
	VPOR     Y7, Y0, Y0
	VPMINUD  Y0, Y1, Y1
	ADDQ     $16, DX
	JMP      absry

absrydone:
	VEXTRACTI128 $1, Y1, X4
	VPMINUD      X4, X1, X1
	VEXTRACTI128 $1, Y2, X5
	VPMAXUD      X5, X2, X2
	VPSHUFD      $0x4E, X1, X4
	VPMINUD      X4, X1, X1
	VPSHUFD      $0x4E, X2, X5
	VPMAXUD      X5, X2, X2
	VPSHUFD      $0xB1, X1, X4
	VPMINUD      X4, X1, X1
	VPSHUFD      $0xB1, X2, X5
	VPMAXUD      X5, X2, X2
	VMOVD        X1, AX
	MOVL         AX, lo+16(FP)
	VMOVD        X2, AX
	MOVL         AX, hi+20(FP)
	VZEROUPPER
	RET

// func axpyY(y *float32, a float32, x *float32, n int)
TEXT ·axpyY(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	VBROADCASTSS a+8(FP), Y1
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	XORQ         AX, AX

axpyyloop:
	CMPQ    AX, CX
	JGE     axpyydone
	VMULPS  (SI)(AX*4), Y1, Y2
	VADDPS  (DI)(AX*4), Y2, Y2
	VMOVUPS Y2, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     axpyyloop

axpyydone:
	VZEROUPPER
	RET
