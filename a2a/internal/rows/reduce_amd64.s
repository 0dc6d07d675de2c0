//go:build amd64 && !purego

#include "textflag.h"

// Combine's weighted sums, a block of elements at a time: the sum of a
// block stays in a register while the block of every row is added into it
// (k in order), then the block is rounded and stored once. Every step is
// a separate multiply and add (no FMA), as a2a.MulAdd. bf16 rounds to
// nearest even with integer steps (as a2a.BF16FromFloat32: NaNs keep sign
// and top payload, quiet bit forced); fp16 rounds with VCVTPS2PH in
// round-to-nearest-even (immediate 0), which treats subnormals, overflow
// and NaNs as a2a.FP16FromFloat32 does.
//
// Arguments (all loops): dst+0 the token's output row, ys+8 the k row
// pointers, ws+16 the k weights, k+24, n+32 the elements (a multiple of
// the width), accumulate+40.
//
// Registers: DI dst, SI ys, DX ws, CX k, BX n, R8 accumulate, R9 the
// element index, R10 the row index, R11 the row.

DATA bf16Round<>+0(SB)/4, $0x00007fff
GLOBL bf16Round<>(SB), RODATA|NOPTR, $4
DATA lowBit<>+0(SB)/4, $0x00000001
GLOBL lowBit<>(SB), RODATA|NOPTR, $4
DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4
DATA infBits<>+0(SB)/4, $0x7f800000
GLOBL infBits<>(SB), RODATA|NOPTR, $4
DATA bf16Quiet<>+0(SB)/4, $0x00000040
GLOBL bf16Quiet<>(SB), RODATA|NOPTR, $4

#define ARGS \
	MOVQ dst+0(FP), DI \
	MOVQ ys+8(FP), SI \
	MOVQ ws+16(FP), DX \
	MOVQ k+24(FP), CX \
	MOVQ n+32(FP), BX \
	MOVBQZX accumulate+40(FP), R8 \
	XORQ R9, R9

// func combineBF16AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineBF16AVX2(SB), NOSPLIT, $0-41
	ARGS
	VPBROADCASTD bf16Round<>(SB), Y12
	VPBROADCASTD lowBit<>(SB), Y13
	VPBROADCASTD absMask<>(SB), Y14
	VPBROADCASTD infBits<>(SB), Y15
	VPBROADCASTD bf16Quiet<>(SB), Y11

bf16avx2Block:
	CMPQ R9, BX
	JAE  bf16avx2Done
	VXORPS Y0, Y0, Y0
	TESTQ R8, R8
	JZ    bf16avx2Sum
	VPMOVZXWD (DI)(R9*2), Y0
	VPSLLD    $16, Y0, Y0

bf16avx2Sum:
	XORQ R10, R10

bf16avx2Row:
	CMPQ R10, CX
	JAE  bf16avx2Encode
	MOVQ (SI)(R10*8), R11
	VPMOVZXWD    (R11)(R9*2), Y1
	VPSLLD       $16, Y1, Y1
	VBROADCASTSS (DX)(R10*4), Y2
	VMULPS       Y1, Y2, Y1 // w*y
	VADDPS       Y1, Y0, Y0 // acc + w*y
	INCQ         R10
	JMP          bf16avx2Row

bf16avx2Encode:
	// Round: (b + 0x7fff + (b>>16)&1) >> 16.
	VPSRLD $16, Y0, Y3
	VPAND  Y13, Y3, Y3
	VPADDD Y12, Y3, Y3
	VPADDD Y0, Y3, Y3
	VPSRLD $16, Y3, Y3
	// NaN (|b| > 0x7f800000): b>>16 | 0x40.
	VPSRLD    $16, Y0, Y4
	VPOR      Y11, Y4, Y4
	VPAND     Y14, Y0, Y5
	VPCMPGTD  Y15, Y5, Y5
	VPBLENDVB Y5, Y4, Y3, Y3
	// Eight dwords below 2^16 to eight words, in order.
	VEXTRACTI128 $1, Y3, X4
	VPACKUSDW    X4, X3, X3
	VMOVDQU      X3, (DI)(R9*2)
	ADDQ         $8, R9
	JMP          bf16avx2Block

bf16avx2Done:
	VZEROUPPER
	RET

// func combineFP16AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineFP16AVX2(SB), NOSPLIT, $0-41
	ARGS

fp16avx2Block:
	CMPQ R9, BX
	JAE  fp16avx2Done
	VXORPS Y0, Y0, Y0
	TESTQ R8, R8
	JZ    fp16avx2Sum
	VCVTPH2PS (DI)(R9*2), Y0

fp16avx2Sum:
	XORQ R10, R10

fp16avx2Row:
	CMPQ R10, CX
	JAE  fp16avx2Encode
	MOVQ (SI)(R10*8), R11
	VCVTPH2PS    (R11)(R9*2), Y1
	VBROADCASTSS (DX)(R10*4), Y2
	VMULPS       Y1, Y2, Y1
	VADDPS       Y1, Y0, Y0
	INCQ         R10
	JMP          fp16avx2Row

fp16avx2Encode:
	VCVTPS2PH $0, Y0, X3
	VMOVDQU   X3, (DI)(R9*2)
	ADDQ      $8, R9
	JMP       fp16avx2Block

fp16avx2Done:
	VZEROUPPER
	RET

// func combineFP32AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineFP32AVX2(SB), NOSPLIT, $0-41
	ARGS

fp32avx2Block:
	CMPQ R9, BX
	JAE  fp32avx2Done
	VXORPS Y0, Y0, Y0
	TESTQ R8, R8
	JZ    fp32avx2Sum
	VMOVUPS (DI)(R9*4), Y0

fp32avx2Sum:
	XORQ R10, R10

fp32avx2Row:
	CMPQ R10, CX
	JAE  fp32avx2Store
	MOVQ (SI)(R10*8), R11
	VMOVUPS      (R11)(R9*4), Y1
	VBROADCASTSS (DX)(R10*4), Y2
	VMULPS       Y1, Y2, Y1
	VADDPS       Y1, Y0, Y0
	INCQ         R10
	JMP          fp32avx2Row

fp32avx2Store:
	VMOVUPS Y0, (DI)(R9*4)
	ADDQ    $8, R9
	JMP     fp32avx2Block

fp32avx2Done:
	VZEROUPPER
	RET

// func combineBF16AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineBF16AVX512(SB), NOSPLIT, $0-41
	ARGS
	VPBROADCASTD bf16Round<>(SB), Z12
	VPBROADCASTD lowBit<>(SB), Z13
	VPBROADCASTD absMask<>(SB), Z14
	VPBROADCASTD infBits<>(SB), Z15
	VPBROADCASTD bf16Quiet<>(SB), Z11

bf16avx512Block:
	CMPQ R9, BX
	JAE  bf16avx512Done
	VPXORD Z0, Z0, Z0
	TESTQ  R8, R8
	JZ     bf16avx512Sum
	VPMOVZXWD (DI)(R9*2), Z0
	VPSLLD    $16, Z0, Z0

bf16avx512Sum:
	XORQ R10, R10

bf16avx512Row:
	CMPQ R10, CX
	JAE  bf16avx512Encode
	MOVQ (SI)(R10*8), R11
	VPMOVZXWD    (R11)(R9*2), Z1
	VPSLLD       $16, Z1, Z1
	VBROADCASTSS (DX)(R10*4), Z2
	VMULPS       Z1, Z2, Z1
	VADDPS       Z1, Z0, Z0
	INCQ         R10
	JMP          bf16avx512Row

bf16avx512Encode:
	VPSRLD $16, Z0, Z3
	VPANDD Z13, Z3, Z3
	VPADDD Z12, Z3, Z3
	VPADDD Z0, Z3, Z3
	VPSRLD $16, Z3, Z3
	// NaN lanes take b>>16 | 0x40.
	VPANDD    Z14, Z0, Z5
	VPCMPGTD  Z15, Z5, K1
	VPSRLD    $16, Z0, Z4
	VPORD     Z11, Z4, Z4
	VMOVDQA32 Z4, K1, Z3
	VPMOVDW   Z3, (DI)(R9*2)
	ADDQ      $16, R9
	JMP       bf16avx512Block

bf16avx512Done:
	VZEROUPPER
	RET

// func combineFP16AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineFP16AVX512(SB), NOSPLIT, $0-41
	ARGS

fp16avx512Block:
	CMPQ R9, BX
	JAE  fp16avx512Done
	VPXORD Z0, Z0, Z0
	TESTQ  R8, R8
	JZ     fp16avx512Sum
	VCVTPH2PS (DI)(R9*2), Z0

fp16avx512Sum:
	XORQ R10, R10

fp16avx512Row:
	CMPQ R10, CX
	JAE  fp16avx512Encode
	MOVQ (SI)(R10*8), R11
	VCVTPH2PS    (R11)(R9*2), Z1
	VBROADCASTSS (DX)(R10*4), Z2
	VMULPS       Z1, Z2, Z1
	VADDPS       Z1, Z0, Z0
	INCQ         R10
	JMP          fp16avx512Row

fp16avx512Encode:
	VCVTPS2PH $0, Z0, Y3
	VMOVDQU   Y3, (DI)(R9*2)
	ADDQ      $16, R9
	JMP       fp16avx512Block

fp16avx512Done:
	VZEROUPPER
	RET

// func combineFP32AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
TEXT ·combineFP32AVX512(SB), NOSPLIT, $0-41
	ARGS

fp32avx512Block:
	CMPQ R9, BX
	JAE  fp32avx512Done
	VPXORD Z0, Z0, Z0
	TESTQ  R8, R8
	JZ     fp32avx512Sum
	VMOVUPS (DI)(R9*4), Z0

fp32avx512Sum:
	XORQ R10, R10

fp32avx512Row:
	CMPQ R10, CX
	JAE  fp32avx512Store
	MOVQ (SI)(R10*8), R11
	VMOVUPS      (R11)(R9*4), Z1
	VBROADCASTSS (DX)(R10*4), Z2
	VMULPS       Z1, Z2, Z1
	VADDPS       Z1, Z0, Z0
	INCQ         R10
	JMP          fp32avx512Row

fp32avx512Store:
	VMOVUPS Z0, (DI)(R9*4)
	ADDQ    $16, R9
	JMP     fp32avx512Block

fp32avx512Done:
	VZEROUPPER
	RET
