//go:build !purego

#include "textflag.h"

// pack4Perm puts the dwords of a VPACKUSDW/VPACKUSWB pair back in order.
DATA pack4Perm<>+0(SB)/4, $0
DATA pack4Perm<>+4(SB)/4, $4
DATA pack4Perm<>+8(SB)/4, $1
DATA pack4Perm<>+12(SB)/4, $5
DATA pack4Perm<>+16(SB)/4, $2
DATA pack4Perm<>+20(SB)/4, $6
DATA pack4Perm<>+24(SB)/4, $3
DATA pack4Perm<>+28(SB)/4, $7
GLOBL pack4Perm<>(SB), RODATA|NOPTR, $32

// REDUCE_MINMAX folds the eight lanes of Y0 (minima) and Y1 (maxima) into
// lane 0 of X0 and X1 (X2, X3 scratch).
#define REDUCE_MINMAX \
	VEXTRACTF128 $1, Y0, X2 \
	VMINPS       X2, X0, X0 \
	VEXTRACTF128 $1, Y1, X3 \
	VMAXPS       X3, X1, X1 \
	VPERMILPS    $0x4E, X0, X2 \
	VMINPS       X2, X0, X0 \
	VPERMILPS    $0x4E, X1, X3 \
	VMAXPS       X3, X1, X1 \
	VPERMILPS    $0xB1, X0, X2 \
	VMINPS       X2, X0, X0 \
	VPERMILPS    $0xB1, X1, X3 \
	VMAXPS       X3, X1, X1

// func minMaxAVX2(v *float32, n int) (lo, hi float32)
//
// The least and greatest of v's n values (n a non-zero multiple of 8).
TEXT ·minMaxAVX2(SB), NOSPLIT, $0-24
	MOVQ    v+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	ADDQ    $32, SI
	SUBQ    $8, CX

mmloop:
	CMPQ    CX, $0
	JE      mmdone
	VMOVUPS (SI), Y4
	VMINPS  Y4, Y0, Y0
	VMAXPS  Y4, Y1, Y1
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     mmloop

mmdone:
	REDUCE_MINMAX
	VMOVSS X0, lo+16(FP)
	VMOVSS X1, hi+20(FP)
	VZEROUPPER
	RET

// func residualAVX2(v, c, r *float32, n int) (lo, hi float32)
//
// r = v − c, and the least and greatest of r (n a non-zero multiple of 8).
TEXT ·residualAVX2(SB), NOSPLIT, $0-40
	MOVQ    v+0(FP), SI
	MOVQ    c+8(FP), DI
	MOVQ    r+16(FP), DX
	MOVQ    n+24(FP), CX
	VMOVUPS (SI), Y0
	VSUBPS  (DI), Y0, Y0
	VMOVUPS Y0, (DX)
	VMOVAPS Y0, Y1
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, DX
	SUBQ    $8, CX

rsloop:
	CMPQ    CX, $0
	JE      rsdone
	VMOVUPS (SI), Y4
	VSUBPS  (DI), Y4, Y4
	VMOVUPS Y4, (DX)
	VMINPS  Y4, Y0, Y0
	VMAXPS  Y4, Y1, Y1
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JMP     rsloop

rsdone:
	REDUCE_MINMAX
	VMOVSS X0, lo+32(FP)
	VMOVSS X1, hi+36(FP)
	VZEROUPPER
	RET

// CODE8 sets Y to the 4-bit codes (int32) of the eight floats at off(SI):
// min(15, int32((x−lo)·inv + 0.5)), rounded as the Go expression is.
#define CODE8(off, Y) \
	VMOVUPS    off(SI), Y \
	VSUBPS     Y12, Y, Y \
	VMULPS     Y13, Y, Y \
	VADDPS     Y14, Y, Y \
	VCVTTPS2DQ Y, Y \
	VPMINSD    Y15, Y, Y

// PAIR8 sets Y to code(v[j]) | code(v[32+j]) << 4 for the eight j from
// off/4 (Y11 scratch).
#define PAIR8(off, Y) \
	CODE8(off, Y) \
	CODE8(off+128, Y11) \
	VPSLLD $4, Y11, Y11 \
	VPOR   Y11, Y, Y

// func pack4AVX2(v *float32, c *byte, chunks int, lo, inv float32)
//
// Writes the 4-bit codes of chunks×64 floats at v to chunks×32 bytes at
// c, as pack4's loop over whole chunks does.
TEXT ·pack4AVX2(SB), NOSPLIT, $0-32
	MOVQ         v+0(FP), SI
	MOVQ         c+8(FP), DI
	MOVQ         chunks+16(FP), CX
	VBROADCASTSS lo+24(FP), Y12
	VBROADCASTSS inv+28(FP), Y13
	MOVL         $0x3f000000, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $15, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU      pack4Perm<>(SB), Y10

p4loop:
	CMPQ      CX, $0
	JE        p4done
	PAIR8(0, Y0)
	PAIR8(32, Y1)
	PAIR8(64, Y2)
	PAIR8(96, Y3)
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPACKUSWB Y2, Y0, Y0
	VPERMD    Y0, Y10, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $256, SI
	ADDQ      $32, DI
	DECQ      CX
	JMP       p4loop

p4done:
	VZEROUPPER
	RET

// func maxAbsBitsAVX2(v *float32, n int) uint32
//
// The largest of v's n values' bits without their sign (n a non-zero
// multiple of 8): the bits of the largest magnitude, for finite values.
TEXT ·maxAbsBitsAVX2(SB), NOSPLIT, $0-20
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x7fffffff, AX
	VMOVD        AX, X2
	VPBROADCASTD X2, Y2
	VPXOR        Y0, Y0, Y0

maloop:
	CMPQ    CX, $0
	JE      madone
	VPAND   (SI), Y2, Y1
	VPMAXUD Y1, Y0, Y0
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     maloop

madone:
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4E, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xB1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, AX
	MOVL         AX, ret+16(FP)
	VZEROUPPER
	RET

// CODE8I8 sets Y to the int8 codes (int32) of the eight floats at
// off(SI): int32(r + ±0.5) for r = x·inv, the half of r's sign.
#define CODE8I8(off, Y) \
	VMOVUPS    off(SI), Y \
	VMULPS     Y13, Y, Y \
	VPAND      Y14, Y, Y11 \
	VPOR       Y15, Y11, Y11 \
	VADDPS     Y11, Y, Y \
	VCVTTPS2DQ Y, Y

// func quantizeCodesAVX2(v *float32, c *int8, n int, inv float32)
//
// Writes the int8 codes of v's n values (a non-zero multiple of 32) to c,
// as quantize's loop does.
TEXT ·quantizeCodesAVX2(SB), NOSPLIT, $0-28
	MOVQ         v+0(FP), SI
	MOVQ         c+8(FP), DI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Y13
	MOVL         $0x80000000, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x3f000000, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VMOVDQU      pack4Perm<>(SB), Y10

qcloop:
	CMPQ      CX, $0
	JE        qcdone
	CODE8I8(0, Y0)
	CODE8I8(32, Y1)
	CODE8I8(64, Y2)
	CODE8I8(96, Y3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y10, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $128, SI
	ADDQ      $32, DI
	SUBQ      $32, CX
	JMP       qcloop

qcdone:
	VZEROUPPER
	RET
