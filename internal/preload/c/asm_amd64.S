/* SPDX-License-Identifier: Apache-2.0 */
/*
 * asm_amd64.S — the interposer's two pieces of assembly.
 *
 * uet_copy_from_user(dst, src, n) copies n bytes from the caller's buffer,
 * which may be unmapped, into the ring. It returns 0, or the bytes not
 * copied when a load faulted: the SIGSEGV/SIGBUS handler (preload.c,
 * on_fault) moves a fault whose PC is in [uet_copy_begin, uet_copy_end) to
 * uet_copy_fixup, as the kernel's exception table does for copy_from_user.
 * Only loads from src can fault; the function uses no stack, so the fixup
 * returns from it as it is. rdx holds the bytes still to copy at every
 * instruction that can fault.
 *
 * vfork() marks the child, which runs on the parent's memory and on the
 * parent's thread's TLS until it execs or exits: the interposer must not
 * publish in the parent's ring in its name, nor change the parent's
 * descriptor table for the child's own dup2/close. glibc's vfork does the
 * same dance with the return address: the child's returns and calls reuse
 * the parent's stack.
 */
	.text

	.globl	uet_copy_from_user
	.hidden	uet_copy_from_user
	.globl	uet_copy_begin
	.hidden	uet_copy_begin
	.globl	uet_copy_end
	.hidden	uet_copy_end
	.globl	uet_copy_fixup
	.hidden	uet_copy_fixup
	.type	uet_copy_from_user,@function
	.p2align 4
uet_copy_from_user:
uet_copy_begin:
	cmp	$8, %rdx
	jb	2f
1:	mov	(%rsi), %rax		/* may fault */
	mov	%rax, (%rdi)
	add	$8, %rsi
	add	$8, %rdi
	sub	$8, %rdx
	cmp	$8, %rdx
	jae	1b
2:	test	%rdx, %rdx
	jz	4f
3:	movzbl	(%rsi), %eax		/* may fault */
	mov	%al, (%rdi)
	inc	%rsi
	inc	%rdi
	dec	%rdx
	jnz	3b
4:	xor	%eax, %eax
	ret
uet_copy_end:
uet_copy_fixup:
	mov	%rdx, %rax
	ret
	.size	uet_copy_from_user, .-uet_copy_from_user

	.globl	vfork
	.type	vfork,@function
	.p2align 4
vfork:
	pop	%rdx			/* the return address: the child will overwrite the stack slot */
	mov	$58, %eax		/* SYS_vfork */
	syscall
	push	%rdx
	movq	uet_in_vfork_child@gottpoff(%rip), %rcx
	test	%rax, %rax
	jnz	1f
	movb	$1, %fs:(%rcx)		/* the child: it shares this thread's TLS with the parent */
	ret
1:	movb	$0, %fs:(%rcx)		/* the parent, once the child exec'd or exited */
	cmp	$-4095, %rax
	jae	2f
	ret
2:	neg	%eax
	push	%rax			/* rsp is 16-aligned for the call after this push */
	call	__errno_location@PLT
	pop	%rcx
	mov	%ecx, (%rax)
	mov	$-1, %rax
	ret
	.size	vfork, .-vfork

	.section .note.GNU-stack,"",@progbits
