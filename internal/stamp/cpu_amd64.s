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

// func tpSelf() unsafe.Pointer
// The word at FS:0: in a thread of the C library (glibc's TLS variant II)
// its thread control block's pointer to itself, the thread pointer.
TEXT ·tpSelf(SB),NOSPLIT,$0-8
	BYTE $0x64; BYTE $0x48; BYTE $0x8B; BYTE $0x04; BYTE $0x25; LONG $0	// MOVQ FS:0, AX
	MOVQ	AX, ret+0(FP)
	RET

// func tpLoad32(off int) uint32
// The 32-bit word off bytes from the thread pointer (FS:0, as tpSelf).
TEXT ·tpLoad32(SB),NOSPLIT,$0-12
	MOVQ	off+0(FP), CX
	BYTE $0x64; BYTE $0x48; BYTE $0x8B; BYTE $0x04; BYTE $0x25; LONG $0	// MOVQ FS:0, AX
	MOVL	(AX)(CX*1), AX
	MOVL	AX, ret+8(FP)
	RET
