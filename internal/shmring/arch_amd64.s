#include "textflag.h"

// func prefetchw(p unsafe.Pointer)
TEXT ·prefetchw(SB),NOSPLIT,$0-8
	MOVQ	p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08	// PREFETCHW (AX): the Go assembler has no mnemonic for it
	RET
