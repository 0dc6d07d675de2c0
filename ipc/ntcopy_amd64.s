#include "textflag.h"

// func copyStream(dst, src uintptr, n uintptr)
//
// Copies n bytes (a multiple of 128) with 32-byte loads and non-temporal
// 32-byte stores; dst must be 32-byte aligned. The SFENCE at the end
// orders the streaming stores before anything the caller does next.
TEXT ·copyStream(SB), NOSPLIT, $0-24
	MOVQ	dst+0(FP), DI
	MOVQ	src+8(FP), SI
	MOVQ	n+16(FP), CX
	SHRQ	$7, CX
	JZ	done
loop:
	VMOVDQU	(SI), Y0
	VMOVDQU	32(SI), Y1
	VMOVDQU	64(SI), Y2
	VMOVDQU	96(SI), Y3
	VMOVNTDQ	Y0, (DI)
	VMOVNTDQ	Y1, 32(DI)
	VMOVNTDQ	Y2, 64(DI)
	VMOVNTDQ	Y3, 96(DI)
	ADDQ	$128, SI
	ADDQ	$128, DI
	DECQ	CX
	JNZ	loop
	SFENCE
	VZEROUPPER
done:
	RET
