#include "textflag.h"

// Attention and indexer routines of the vector kernels (see vecAsm's
// accRows4, accRow1 and idxDots in attn_amd64.go). The Z routines use
// AVX-512, the Y routines AVX2 and FMA; both compute the same bits (every
// value is one chain of fused multiply-adds in a fixed order, whatever the
// vector width). Each routine ends with VZEROUPPER.

// func accRows4Z(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int)
TEXT ·accRows4Z(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         w+8(FP), AX
	MOVQ         rows+16(FP), BX
	MOVQ         n+24(FP), CX
	VBROADCASTSS 0(AX), Z4
	VBROADCASTSS 4(AX), Z5
	VBROADCASTSS 8(AX), Z6
	VBROADCASTSS 12(AX), Z7
	MOVQ         0(BX), R8
	MOVQ         8(BX), R9
	MOVQ         16(BX), R10
	MOVQ         24(BX), R11
	XORQ         SI, SI

acc4zloop:
	CMPQ        SI, CX
	JGE         acc4zdone
	VMOVUPS     (DI)(SI*4), Z0
	VFMADD231PS (R8)(SI*4), Z4, Z0
	VFMADD231PS (R9)(SI*4), Z5, Z0
	VFMADD231PS (R10)(SI*4), Z6, Z0
	VFMADD231PS (R11)(SI*4), Z7, Z0
	VMOVUPS     Z0, (DI)(SI*4)
	ADDQ        $16, SI
	JMP         acc4zloop

acc4zdone:
	VZEROUPPER
	RET

// func accRow1Z(y *float32, w *float32, row unsafe.Pointer, n int)
TEXT ·accRow1Z(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         w+8(FP), AX
	MOVQ         row+16(FP), R8
	MOVQ         n+24(FP), CX
	VBROADCASTSS 0(AX), Z4
	XORQ         SI, SI

acc1zloop:
	CMPQ        SI, CX
	JGE         acc1zdone
	VMOVUPS     (DI)(SI*4), Z0
	VFMADD231PS (R8)(SI*4), Z4, Z0
	VMOVUPS     Z0, (DI)(SI*4)
	ADDQ        $16, SI
	JMP         acc1zloop

acc1zdone:
	VZEROUPPER
	RET

// func accRows4Y(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int)
TEXT ·accRows4Y(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         w+8(FP), AX
	MOVQ         rows+16(FP), BX
	MOVQ         n+24(FP), CX
	VBROADCASTSS 0(AX), Y4
	VBROADCASTSS 4(AX), Y5
	VBROADCASTSS 8(AX), Y6
	VBROADCASTSS 12(AX), Y7
	MOVQ         0(BX), R8
	MOVQ         8(BX), R9
	MOVQ         16(BX), R10
	MOVQ         24(BX), R11
	XORQ         SI, SI

acc4yloop:
	CMPQ        SI, CX
	JGE         acc4ydone
	VMOVUPS     (DI)(SI*4), Y0
	VMOVUPS     32(DI)(SI*4), Y1
	VFMADD231PS (R8)(SI*4), Y4, Y0
	VFMADD231PS 32(R8)(SI*4), Y4, Y1
	VFMADD231PS (R9)(SI*4), Y5, Y0
	VFMADD231PS 32(R9)(SI*4), Y5, Y1
	VFMADD231PS (R10)(SI*4), Y6, Y0
	VFMADD231PS 32(R10)(SI*4), Y6, Y1
	VFMADD231PS (R11)(SI*4), Y7, Y0
	VFMADD231PS 32(R11)(SI*4), Y7, Y1
	VMOVUPS     Y0, (DI)(SI*4)
	VMOVUPS     Y1, 32(DI)(SI*4)
	ADDQ        $16, SI
	JMP         acc4yloop

acc4ydone:
	VZEROUPPER
	RET

// func accRow1Y(y *float32, w *float32, row unsafe.Pointer, n int)
TEXT ·accRow1Y(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         w+8(FP), AX
	MOVQ         row+16(FP), R8
	MOVQ         n+24(FP), CX
	VBROADCASTSS 0(AX), Y4
	XORQ         SI, SI

acc1yloop:
	CMPQ        SI, CX
	JGE         acc1ydone
	VMOVUPS     (DI)(SI*4), Y0
	VMOVUPS     32(DI)(SI*4), Y1
	VFMADD231PS (R8)(SI*4), Y4, Y0
	VFMADD231PS 32(R8)(SI*4), Y4, Y1
	VMOVUPS     Y0, (DI)(SI*4)
	VMOVUPS     Y1, 32(DI)(SI*4)
	ADDQ        $16, SI
	JMP         acc1yloop

acc1ydone:
	VZEROUPPER
	RET

// IDXFIN(d, c, a) folds one block of 16 head dots d into a key's
// accumulator a: a += max(d, 0) * c. VMAXPS returns its second source (the
// zero in Z31) unless d > 0, so NaN dots count as 0.
#define IDXFINZ(d, c, a) \
	VMAXPS Z31, d, d \
	VMULPS c, d, d   \
	VADDPS d, a, a

// func idxDots4x4Z(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)
//
// Z(4i+b) holds the dots of key i with heads 16b..16b+15 of the pass.
TEXT ·idxDots4x4Z(SB), NOSPLIT, $0-48
	MOVQ  keys+8(FP), AX
	MOVQ  0(AX), R8
	MOVQ  8(AX), R9
	MOVQ  16(AX), R10
	MOVQ  24(AX), R11
	MOVQ  qt+16(FP), BX
	MOVQ  qs+24(FP), DX
	SHLQ  $2, DX
	MOVQ  dim+40(FP), CX
	VXORPS Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	VMOVAPS Z0, Z8
	VMOVAPS Z0, Z9
	VMOVAPS Z0, Z10
	VMOVAPS Z0, Z11
	VMOVAPS Z0, Z12
	VMOVAPS Z0, Z13
	VMOVAPS Z0, Z14
	VMOVAPS Z0, Z15
	XORQ  SI, SI

i44zloop:
	CMPQ         SI, CX
	JGE          i44zdone
	VMOVUPS      0(BX), Z16
	VMOVUPS      64(BX), Z17
	VMOVUPS      128(BX), Z18
	VMOVUPS      192(BX), Z19
	VBROADCASTSS (R8)(SI*4), Z20
	VBROADCASTSS (R9)(SI*4), Z21
	VBROADCASTSS (R10)(SI*4), Z22
	VBROADCASTSS (R11)(SI*4), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         DX, BX
	INCQ         SI
	JMP          i44zloop

i44zdone:
	MOVQ    acc+0(FP), DI
	MOVQ    c+32(FP), AX
	VXORPS  Z31, Z31, Z31
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	VMOVUPS 0(DI), Z24
	VMOVUPS 64(DI), Z25
	VMOVUPS 128(DI), Z26
	VMOVUPS 192(DI), Z27
	IDXFINZ(Z0, Z16, Z24)
	IDXFINZ(Z1, Z17, Z24)
	IDXFINZ(Z2, Z18, Z24)
	IDXFINZ(Z3, Z19, Z24)
	IDXFINZ(Z4, Z16, Z25)
	IDXFINZ(Z5, Z17, Z25)
	IDXFINZ(Z6, Z18, Z25)
	IDXFINZ(Z7, Z19, Z25)
	IDXFINZ(Z8, Z16, Z26)
	IDXFINZ(Z9, Z17, Z26)
	IDXFINZ(Z10, Z18, Z26)
	IDXFINZ(Z11, Z19, Z26)
	IDXFINZ(Z12, Z16, Z27)
	IDXFINZ(Z13, Z17, Z27)
	IDXFINZ(Z14, Z18, Z27)
	IDXFINZ(Z15, Z19, Z27)
	VMOVUPS Z24, 0(DI)
	VMOVUPS Z25, 64(DI)
	VMOVUPS Z26, 128(DI)
	VMOVUPS Z27, 192(DI)
	VZEROUPPER
	RET

// func idxDots4x1Z(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)
TEXT ·idxDots4x1Z(SB), NOSPLIT, $0-48
	MOVQ   keys+8(FP), AX
	MOVQ   0(AX), R8
	MOVQ   8(AX), R9
	MOVQ   16(AX), R10
	MOVQ   24(AX), R11
	MOVQ   qt+16(FP), BX
	MOVQ   qs+24(FP), DX
	SHLQ   $2, DX
	MOVQ   dim+40(FP), CX
	VXORPS Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	XORQ   SI, SI

i41zloop:
	CMPQ         SI, CX
	JGE          i41zdone
	VMOVUPS      0(BX), Z16
	VBROADCASTSS (R8)(SI*4), Z20
	VBROADCASTSS (R9)(SI*4), Z21
	VBROADCASTSS (R10)(SI*4), Z22
	VBROADCASTSS (R11)(SI*4), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z16, Z21, Z1
	VFMADD231PS  Z16, Z22, Z2
	VFMADD231PS  Z16, Z23, Z3
	ADDQ         DX, BX
	INCQ         SI
	JMP          i41zloop

i41zdone:
	MOVQ    acc+0(FP), DI
	MOVQ    c+32(FP), AX
	VXORPS  Z31, Z31, Z31
	VMOVUPS 0(AX), Z16
	VMOVUPS 0(DI), Z24
	VMOVUPS 64(DI), Z25
	VMOVUPS 128(DI), Z26
	VMOVUPS 192(DI), Z27
	IDXFINZ(Z0, Z16, Z24)
	IDXFINZ(Z1, Z16, Z25)
	IDXFINZ(Z2, Z16, Z26)
	IDXFINZ(Z3, Z16, Z27)
	VMOVUPS Z24, 0(DI)
	VMOVUPS Z25, 64(DI)
	VMOVUPS Z26, 128(DI)
	VMOVUPS Z27, 192(DI)
	VZEROUPPER
	RET

// IDXFINY is IDXFINZ for one half of a block (Y15 holds zero).
#define IDXFINY(d, c, a) \
	VMAXPS Y15, d, d \
	VMULPS c, d, d   \
	VADDPS d, a, a

// func idxDots4x4Y(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)
//
// One key at a time: Y(2b+h) holds its dots with half h of block b.
TEXT ·idxDots4x4Y(SB), NOSPLIT, $0-48
	MOVQ   acc+0(FP), DI
	MOVQ   keys+8(FP), AX
	MOVQ   qs+24(FP), DX
	SHLQ   $2, DX
	MOVQ   dim+40(FP), CX
	MOVQ   c+32(FP), R12
	XORQ   R13, R13 // key index

i44ykey:
	CMPQ   R13, $4
	JGE    i44yend
	MOVQ   (AX)(R13*8), R8
	MOVQ   qt+16(FP), BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   SI, SI

i44yloop:
	CMPQ         SI, CX
	JGE          i44yfin
	VBROADCASTSS (R8)(SI*4), Y8
	VFMADD231PS  0(BX), Y8, Y0
	VFMADD231PS  32(BX), Y8, Y1
	VFMADD231PS  64(BX), Y8, Y2
	VFMADD231PS  96(BX), Y8, Y3
	VFMADD231PS  128(BX), Y8, Y4
	VFMADD231PS  160(BX), Y8, Y5
	VFMADD231PS  192(BX), Y8, Y6
	VFMADD231PS  224(BX), Y8, Y7
	ADDQ         DX, BX
	INCQ         SI
	JMP          i44yloop

i44yfin:
	VXORPS  Y15, Y15, Y15
	VMOVUPS 0(DI), Y9
	VMOVUPS 32(DI), Y10
	IDXFINY(Y0, 0(R12), Y9)
	IDXFINY(Y1, 32(R12), Y10)
	IDXFINY(Y2, 64(R12), Y9)
	IDXFINY(Y3, 96(R12), Y10)
	IDXFINY(Y4, 128(R12), Y9)
	IDXFINY(Y5, 160(R12), Y10)
	IDXFINY(Y6, 192(R12), Y9)
	IDXFINY(Y7, 224(R12), Y10)
	VMOVUPS Y9, 0(DI)
	VMOVUPS Y10, 32(DI)
	ADDQ    $64, DI
	INCQ    R13
	JMP     i44ykey

i44yend:
	VZEROUPPER
	RET

// func idxDots4x1Y(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)
//
// Y(2i+h) holds key i's dots with half h of the block.
TEXT ·idxDots4x1Y(SB), NOSPLIT, $0-48
	MOVQ   keys+8(FP), AX
	MOVQ   0(AX), R8
	MOVQ   8(AX), R9
	MOVQ   16(AX), R10
	MOVQ   24(AX), R11
	MOVQ   qt+16(FP), BX
	MOVQ   qs+24(FP), DX
	SHLQ   $2, DX
	MOVQ   dim+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   SI, SI

i41yloop:
	CMPQ         SI, CX
	JGE          i41ydone
	VMOVUPS      0(BX), Y8
	VMOVUPS      32(BX), Y9
	VBROADCASTSS (R8)(SI*4), Y10
	VBROADCASTSS (R9)(SI*4), Y11
	VBROADCASTSS (R10)(SI*4), Y12
	VBROADCASTSS (R11)(SI*4), Y13
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VFMADD231PS  Y8, Y11, Y2
	VFMADD231PS  Y9, Y11, Y3
	VFMADD231PS  Y8, Y12, Y4
	VFMADD231PS  Y9, Y12, Y5
	VFMADD231PS  Y8, Y13, Y6
	VFMADD231PS  Y9, Y13, Y7
	ADDQ         DX, BX
	INCQ         SI
	JMP          i41yloop

i41ydone:
	MOVQ    acc+0(FP), DI
	MOVQ    c+32(FP), AX
	VXORPS  Y15, Y15, Y15
	VMOVUPS 0(AX), Y8
	VMOVUPS 32(AX), Y9
	VMOVUPS 0(DI), Y10
	VMOVUPS 32(DI), Y11
	IDXFINY(Y0, Y8, Y10)
	IDXFINY(Y1, Y9, Y11)
	VMOVUPS Y10, 0(DI)
	VMOVUPS Y11, 32(DI)
	VMOVUPS 64(DI), Y10
	VMOVUPS 96(DI), Y11
	IDXFINY(Y2, Y8, Y10)
	IDXFINY(Y3, Y9, Y11)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y11, 96(DI)
	VMOVUPS 128(DI), Y10
	VMOVUPS 160(DI), Y11
	IDXFINY(Y4, Y8, Y10)
	IDXFINY(Y5, Y9, Y11)
	VMOVUPS Y10, 128(DI)
	VMOVUPS Y11, 160(DI)
	VMOVUPS 192(DI), Y10
	VMOVUPS 224(DI), Y11
	IDXFINY(Y6, Y8, Y10)
	IDXFINY(Y7, Y9, Y11)
	VMOVUPS Y10, 192(DI)
	VMOVUPS Y11, 224(DI)
	VZEROUPPER
	RET
