#include "textflag.h"

// __CPUNODE_SEG: GDT_ENTRY_CPUNODE (15) * 8 + 3 (user privilege).
#define CPUNODE_SEG $0x7b

// func lsl() (limit uint32, ok bool)
TEXT ·lsl(SB),NOSPLIT,$0-5
	MOVL	CPUNODE_SEG, AX
	MOVL	$0, BX
	LSLL	AX, BX
	SETEQ	CX
	MOVL	BX, limit+0(FP)
	MOVB	CX, ok+4(FP)
	RET

// func curm() uintptr
TEXT ·curm(SB),NOSPLIT,$0-8
	MOVQ	(TLS), AX	// g
	MOVQ	48(AX), AX	// g.m: stack (16), stackguard0, stackguard1, _panic, _defer
	MOVQ	AX, ret+0(FP)
	RET
