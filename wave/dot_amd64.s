//go:build !purego

#include "textflag.h"

// HSUM_Y0_INT32_TO_AX adds the eight int32 lanes of Y0 into AX (X1 is
// scratch): the integer kernels' reduction.
#define HSUM_Y0_INT32_TO_AX \
	VEXTRACTI128 $1, Y0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0x4E, X0, X1 \
	VPADDD       X1, X0, X0 \
	VPSHUFD      $0xB1, X0, X1 \
	VPADDD       X1, X0, X0 \
	VMOVD        X0, AX

// func dotAVX2(a, b *float32, n int) float32
//
// Four 8-wide FMA accumulators over 32 floats per iteration, then 8-wide
// steps, then a scalar tail.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop32:
	CMPQ        CX, $32
	JL          loop8
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JMP         loop32

loop8:
	CMPQ        CX, $8
	JL          reduce
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         loop8

reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0

tail:
	CMPQ        CX, $0
	JE          done
	VMOVSS      (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ        $4, SI
	ADDQ        $4, DI
	DECQ        CX
	JMP         tail

done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// ROWS4_ZERO8 points R9, R10 and R11 at the rows DX bytes apart after
// DI's, and zeroes the accumulators Y0-Y7: the four-row kernels' start.
#define ROWS4_ZERO8 \
	LEAQ   (DI)(DX*1), R9 \
	LEAQ   (R9)(DX*1), R10 \
	LEAQ   (R10)(DX*1), R11 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

// func dot4AVX2(v, c *float32, stride, n int, out *[4]float32)
//
// The dot products of v with the four vectors at c, c+stride, c+2·stride
// and c+3·stride (stride and n in floats, n a multiple of 16): two 8-wide
// FMA accumulators a vector over 16 floats per iteration, each load of v
// serving four products, then the four sums reduced together.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-40
	MOVQ   v+0(FP), SI
	MOVQ   c+8(FP), DI
	MOVQ   stride+16(FP), DX
	SHLQ   $2, DX
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), R8
	ROWS4_ZERO8

d4loop16:
	CMPQ        CX, $16
	JL          d4reduce
	VMOVUPS     (SI), Y8
	VMOVUPS     32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS (R9), Y8, Y2
	VFMADD231PS 32(R9), Y9, Y3
	VFMADD231PS (R10), Y8, Y4
	VFMADD231PS 32(R10), Y9, Y5
	VFMADD231PS (R11), Y8, Y6
	VFMADD231PS 32(R11), Y9, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, R9
	ADDQ        $64, R10
	ADDQ        $64, R11
	SUBQ        $16, CX
	JMP         d4loop16

d4reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y5, Y4, Y4
	VADDPS       Y7, Y6, Y6
	VHADDPS      Y2, Y0, Y0
	VHADDPS      Y6, Y4, Y4
	VHADDPS      Y4, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVUPS      X0, (R8)
	VZEROUPPER
	RET

// func dot2x4AVX2(v0, v1, c *float32, stride, n int, out *[8]float32)
//
// The dot products of v0 and of v1 with the four vectors at c,
// c+stride, c+2·stride and c+3·stride (stride and n in floats, n a
// multiple of 8): out[j] = v0·cj, out[4+j] = v1·cj. One 8-wide FMA
// accumulator a product; each load of a centroid serves both vectors.
TEXT ·dot2x4AVX2(SB), NOSPLIT, $0-48
	MOVQ   v0+0(FP), SI
	MOVQ   v1+8(FP), BX
	MOVQ   c+16(FP), DI
	MOVQ   stride+24(FP), DX
	SHLQ   $2, DX
	MOVQ   n+32(FP), CX
	MOVQ   out+40(FP), R8
	ROWS4_ZERO8

d24loop8:
	CMPQ        CX, $8
	JL          d24reduce
	VMOVUPS     (SI), Y8
	VMOVUPS     (BX), Y9
	VMOVUPS     (DI), Y10
	VFMADD231PS Y10, Y8, Y0
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS     (R9), Y11
	VFMADD231PS Y11, Y8, Y1
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS     (R10), Y12
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS     (R11), Y13
	VFMADD231PS Y13, Y8, Y3
	VFMADD231PS Y13, Y9, Y7
	ADDQ        $32, SI
	ADDQ        $32, BX
	ADDQ        $32, DI
	ADDQ        $32, R9
	ADDQ        $32, R10
	ADDQ        $32, R11
	SUBQ        $8, CX
	JMP         d24loop8

d24reduce:
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VHADDPS      Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVUPS      X0, (R8)
	VHADDPS      Y5, Y4, Y4
	VHADDPS      Y7, Y6, Y6
	VHADDPS      Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VMOVUPS      X4, 16(R8)
	VZEROUPPER
	RET

// func prefetch(p *float32)
//
// Hints the first four cache lines at p into all cache levels.
TEXT ·prefetch(SB), NOSPLIT, $0-8
	MOVQ       p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func dotI8AVX2(q *float32, c *int8, n int) float32
//
// The dot product of float32 q with int8 codes c: codes are sign-extended
// and converted to float32 eight at a time, then fused-multiply-added.
TEXT ·dotI8AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), SI
	MOVQ   c+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

i8loop32:
	CMPQ        CX, $32
	JL          i8loop8
	VPMOVSXBD   (DI), Y4
	VPMOVSXBD   8(DI), Y5
	VPMOVSXBD   16(DI), Y6
	VPMOVSXBD   24(DI), Y7
	VCVTDQ2PS   Y4, Y4
	VCVTDQ2PS   Y5, Y5
	VCVTDQ2PS   Y6, Y6
	VCVTDQ2PS   Y7, Y7
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y5, Y1
	VFMADD231PS 64(SI), Y6, Y2
	VFMADD231PS 96(SI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $32, DI
	SUBQ        $32, CX
	JMP         i8loop32

i8loop8:
	CMPQ        CX, $8
	JL          i8reduce
	VPMOVSXBD   (DI), Y4
	VCVTDQ2PS   Y4, Y4
	VFMADD231PS (SI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $8, DI
	SUBQ        $8, CX
	JMP         i8loop8

i8reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0

i8tail:
	CMPQ        CX, $0
	JE          i8done
	MOVBQSX     (DI), AX
	VCVTSI2SSQ  AX, X1, X1
	VFMADD231SS (SI), X1, X0
	ADDQ        $4, SI
	INCQ        DI
	DECQ        CX
	JMP         i8tail

i8done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func prefetchCode(p *int8)
//
// Hints six cache lines (a 384-byte code) at p.
TEXT ·prefetchCode(SB), NOSPLIT, $0-8
	MOVQ       p+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	PREFETCHT0 256(AX)
	PREFETCHT0 320(AX)
	RET

// func prefetchLine(p unsafe.Pointer)
TEXT ·prefetchLine(SB), NOSPLIT, $0-8
	MOVQ       p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func prefetchRange(p unsafe.Pointer, n uintptr)
//
// Hints the line of each of p, p+64, … below p+n, then that of p+n-1
// (when p starts mid-line, the last line): one call for a range, where
// a loop over prefetchLine paid a call a line.
TEXT ·prefetchRange(SB), NOSPLIT, $0-16
	MOVQ       p+0(FP), AX
	MOVQ       n+8(FP), CX
	LEAQ       -1(AX)(CX*1), DX

prefetchRangeLoop:
	PREFETCHT0 (AX)
	ADDQ       $64, AX
	CMPQ       AX, DX
	JLS        prefetchRangeLoop
	PREFETCHT0 (DX)
	RET

// func dotQ16AVX2(q *int16, c *int8, n int) int32
//
// The dot product of int16 q with int8 codes c, exact in int32 while
// n·max|q|·127 fits (see quantizeQuery): codes are sign-extended to int16
// sixteen at a time and multiplied pairwise-added (VPMADDWD) into int32
// lanes.
TEXT ·dotQ16AVX2(SB), NOSPLIT, $0-28
	MOVQ  q+0(FP), SI
	MOVQ  c+8(FP), DI
	MOVQ  n+16(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

q16loop64:
	CMPQ      CX, $64
	JL        q16loop16
	VPMOVSXBW (DI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMOVSXBW 32(DI), Y6
	VPMOVSXBW 48(DI), Y7
	VPMADDWD  (SI), Y4, Y4
	VPMADDWD  32(SI), Y5, Y5
	VPMADDWD  64(SI), Y6, Y6
	VPMADDWD  96(SI), Y7, Y7
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	VPADDD    Y6, Y2, Y2
	VPADDD    Y7, Y3, Y3
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $64, CX
	JMP       q16loop64

q16loop16:
	CMPQ      CX, $16
	JL        q16reduce
	VPMOVSXBW (DI), Y4
	VPMADDWD  (SI), Y4, Y4
	VPADDD    Y4, Y0, Y0
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $16, CX
	JMP       q16loop16

q16reduce:
	VPADDD       Y1, Y0, Y0
	VPADDD       Y3, Y2, Y2
	VPADDD       Y2, Y0, Y0
	HSUM_Y0_INT32_TO_AX

q16tail:
	CMPQ    CX, $0
	JE      q16done
	MOVWLSX (SI), BX
	MOVBLSX (DI), DX
	IMULL   DX, BX
	ADDL    BX, AX
	ADDQ    $2, SI
	INCQ    DI
	DECQ    CX
	JMP     q16tail

q16done:
	VZEROUPPER
	MOVL AX, ret+24(FP)
	RET

// func dotU4AVX2(q *int8, c *byte, chunks int) int32
//
// The dot product of the int8 query q with a 4-bit code c (see
// quant4.go), 64 dimensions (32 code bytes) per chunk: a load is split
// into its low and high nibbles (32 consecutive dimensions each),
// multiplied by the query's bytes and pair-added into int16
// (VPMADDUBSW: at most 2·15·127 per lane, no saturation), then widened
// and pair-added into int32 lanes (VPMADDWD by ones).
TEXT ·dotU4AVX2(SB), NOSPLIT, $0-28
	MOVQ         q+0(FP), SI
	MOVQ         c+8(FP), DI
	MOVQ         chunks+16(FP), CX
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	MOVL         $0x0f0f0f0f, AX
	VMOVD        AX, X7
	VPBROADCASTD X7, Y7
	MOVL         $0x00010001, AX
	VMOVD        AX, X6
	VPBROADCASTD X6, Y6

u4loop2:
	CMPQ       CX, $2
	JL         u4loop1
	VMOVDQU    (DI), Y2
	VMOVDQU    32(DI), Y8
	VPSRLW     $4, Y2, Y3
	VPSRLW     $4, Y8, Y9
	VPAND      Y7, Y2, Y2
	VPAND      Y7, Y3, Y3
	VPAND      Y7, Y8, Y8
	VPAND      Y7, Y9, Y9
	VPMADDUBSW (SI), Y2, Y2
	VPMADDUBSW 32(SI), Y3, Y3
	VPMADDUBSW 64(SI), Y8, Y8
	VPMADDUBSW 96(SI), Y9, Y9
	VPADDW     Y3, Y2, Y2
	VPADDW     Y9, Y8, Y8
	VPMADDWD   Y6, Y2, Y2
	VPMADDWD   Y6, Y8, Y8
	VPADDD     Y2, Y0, Y0
	VPADDD     Y8, Y1, Y1
	ADDQ       $128, SI
	ADDQ       $64, DI
	SUBQ       $2, CX
	JMP        u4loop2

u4loop1:
	CMPQ       CX, $0
	JE         u4reduce
	VMOVDQU    (DI), Y2
	VPSRLW     $4, Y2, Y3
	VPAND      Y7, Y2, Y2
	VPAND      Y7, Y3, Y3
	VPMADDUBSW (SI), Y2, Y2
	VPMADDUBSW 32(SI), Y3, Y3
	VPADDW     Y3, Y2, Y2
	VPMADDWD   Y6, Y2, Y2
	VPADDD     Y2, Y0, Y0

u4reduce:
	VPADDD       Y1, Y0, Y0
	HSUM_Y0_INT32_TO_AX
	VZEROUPPER
	MOVL         AX, ret+24(FP)
	RET
