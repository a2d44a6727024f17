#include "textflag.h"

// AMX routines of the opt-in KernelsAMX family (amx_linux_amd64.go). The Go
// assembler has no AMX mnemonics, so the instructions are spelled out as
// bytes (VEX prefix C4 E2, then pp, opcode, ModRM, SIB):
//
//	LDTILECFG (AX)              C4 E2 78 49 00
//	TILERELEASE                 C4 E2 78 49 C0
//	TILEZERO tmm_t              C4 E2 7B 49 C0|t<<3
//	TILELOADD tmm_t, (base)(idx*1)   C4 E2 7B 4B 04|t<<3 SIB
//	TILESTORED (base)(idx*1), tmm_t  C4 E2 7A 4B 04|t<<3 SIB
//	TDPBF16PS tmm_c, tmm_a, tmm_b    C4 E2 (15-b)<<3|2 5C C0|c<<3|a
//
// Tiles: tmm0-tmm3 accumulate C (16x16 float32 each), tmm4 and tmm5 hold two
// 16-row blocks of weights (16 rows x 32 bf16), tmm6 and tmm7 two groups of
// 16 tokens in VNNI layout (16 column pairs x 16 tokens x 2 bf16). Every
// tile instruction of a product runs inside one call, so a goroutine never
// moves to another thread with live tiles (assembly is not asynchronously
// preemptible); each routine ends with TILERELEASE and VZEROUPPER.

#define TILEZERO0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILEZERO1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define TILEZERO2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0
#define TILEZERO3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
// tmm4 = (SI)(DX*1), tmm5 = (DI)(DX*1), tmm6 = (AX)(CX*1), tmm7 = (BX)(CX*1)
#define LOADA0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16
#define LOADA1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x17
#define LOADB0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x08
#define LOADB1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x3C; BYTE $0x0B
// tmm0 += tmm4·tmm6, tmm1 += tmm4·tmm7, tmm2 += tmm5·tmm6, tmm3 += tmm5·tmm7
#define DP00 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xC4
#define DP01 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xCC
#define DP10 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xD5
#define DP11 BYTE $0xC4; BYTE $0xE2; BYTE $0x42; BYTE $0x5C; BYTE $0xDD
// (SI)(CX*1) = tmm_t
#define STORE0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x0E
#define STORE1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x0E
#define STORE2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x0E
#define STORE3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x0E
#define LDTILECFG_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

// func amxGemm(cfg *[64]byte, a *uint16, lda int, b0, b1 *uint16, c *float32, steps int)
//
// amxGemm multiplies 32 weight rows (a, two blocks of 16 at a stride of
// lda bytes) with one or two groups of 16 tokens (b0, and b1 unless nil;
// VNNI panels of 1 KiB per 32 columns) over steps x 32 columns, and stores
// the 16x16 float32 tiles to c: rows 0-15 x group 0 at c, x group 1 at
// c+1024 bytes, rows 16-31 x group 0 at c+2048, x group 1 at c+3072.
TEXT ·amxGemm(SB), NOSPLIT, $0-56
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), DX
	MOVQ DX, DI
	SHLQ $4, DI
	ADDQ SI, DI
	MOVQ b0+24(FP), AX
	MOVQ b1+32(FP), BX
	MOVQ $64, CX
	MOVQ steps+48(FP), R8
	TILEZERO0
	TILEZERO1
	TILEZERO2
	TILEZERO3
	TESTQ BX, BX
	JZ    one
	TESTQ R8, R8
	JZ    done

two:
	LOADA0
	LOADB0
	LOADB1
	LOADA1
	DP00
	DP01
	DP10
	DP11
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $1024, AX
	ADDQ $1024, BX
	DECQ R8
	JNZ  two
	JMP  done

one:
	TESTQ R8, R8
	JZ    done

oneloop:
	LOADA0
	LOADB0
	LOADA1
	DP00
	DP10
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $1024, AX
	DECQ R8
	JNZ  oneloop

done:
	MOVQ c+40(FP), SI
	STORE0
	ADDQ $1024, SI
	STORE1
	ADDQ $1024, SI
	STORE2
	ADDQ $1024, SI
	STORE3
	TILERELEASE
	VZEROUPPER
	RET

// func decFP8BZ(dst *uint16, w *byte, n int, s int)
//
// decFP8BZ is decFP8Z writing bf16: the n e4m3 values (a multiple of 16)
// times the UE8M0 scale s (at most maxFastScale), each exact in bf16.
TEXT ·decFP8BZ(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         w+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVQ         s+24(FP), BX
	ADDL         $8, BX
	SHLL         $23, BX
	VPBROADCASTD BX, Z14
	MOVL         $0xBF80BF80, BX
	VPBROADCASTD BX, Z15
	XORQ         AX, AX

db8loop:
	CMPQ      AX, CX
	JGE       db8done
	VPMOVSXBW (SI)(AX*1), Y0
	VPSLLW    $7, Y0, Y0
	VPAND     Y15, Y0, Y0
	VCVTPH2PS Y0, Z0
	VMULPS    Z14, Z0, Z0
	VPSRLD    $16, Z0, Z0
	VPMOVDW   Z0, (DI)(AX*2)
	ADDQ      $16, AX
	JMP       db8loop

db8done:
	VZEROUPPER
	RET

// func decFP4BZ(dst *uint16, w *byte, s *byte, groups int, tab *fp4Tables)
//
// decFP4BZ is decFP4Z writing bf16, de-interleaved per group.
TEXT ·decFP4BZ(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DX
	MOVQ    w+8(FP), R8
	MOVQ    s+16(FP), R12
	MOVQ    groups+24(FP), CX
	SHLQ    $4, CX
	MOVQ    tab+32(FP), SI
	VMOVUPS (SI), Z31
	XORQ    AX, AX

db4loop:
	CMPQ         AX, CX
	JGE          db4done
	MOVBLZX      (R12), DI
	VBROADCASTSS 64(SI)(DI*4), Z16
	VMULPS       Z31, Z16, Z16
	VPMOVZXBD    (R8)(AX*1), Z20
	VPERMPS      Z16, Z20, Z24
	VPSRLD       $4, Z20, Z20
	VPERMPS      Z16, Z20, Z25
	VPSRLD       $16, Z24, Z24
	VPSRLD       $16, Z25, Z25
	VPMOVDW      Z24, (DX)(AX*4)
	VPMOVDW      Z25, 32(DX)(AX*4)
	INCQ         R12
	ADDQ         $16, AX
	JMP          db4loop

db4done:
	VZEROUPPER
	RET
