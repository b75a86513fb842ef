/*
 * callback_stubs.S — the callback stub pool (see include/plugind_callbacks.h for the contract).
 *
 * Code, not generated code: everything here is in the worker's read-only .text, so callbacks work
 * under a seccomp filter that refuses writable+executable memory and memfd_create.
 *
 * Layout. Stub `slot` is 16 bytes at a 16-byte boundary: endbr64 (a stub is only ever reached by
 * an indirect call, so it is the branch target Intel IBT checks), the slot number into r11d, and a
 * direct jump to one shared body, plugind_callback_enter. r11 because it is caller-clobbered and
 * carries no argument (r10 is the static chain, al the vector count of variadic calls). Keeping
 * the logic in one body rather than in 64 copies keeps the pool small (1 KiB) and leaves a single
 * frame layout to get right; the stubs touch neither the stack nor any argument register.
 *
 * plugind_callback_enter, entered with the caller's return address on top of the stack (rsp is
 * 8 mod 16, as at any function entry), pushes rbp (rsp 0 mod 16), reserves 112 bytes (a multiple
 * of 16, so the stack stays aligned for the call), stores rdi..r9 at 0(%rsp) and the low 64 bits
 * of xmm0..xmm7 at 48(%rsp), and calls the dispatcher with (slot, integers, floats). The
 * dispatcher's struct return is left in rax and xmm0 untouched, which is where the stub's caller
 * looks for any scalar result. With no dispatcher installed it returns 0 and 0.0.
 *
 * Addresses. plugind_callback_stub_offsets (.rodata) holds, for each slot, the stub's offset from
 * the table itself: PC-relative, resolved by the static linker, so there is no dynamic relocation
 * (a PIE or a shared object needs no writable table) and the table does not depend on the stub
 * size the assembler settles on after relaxing the jumps.
 *
 * Unwinding. Every stub has its own FDE (nothing changes in it: the CFA is rsp+8 throughout), and
 * plugind_callback_enter describes its frame, so libgcc's unwinder and debuggers walk from the
 * dispatcher through the shared body straight to the stub's caller (a stub never appears as a
 * return address: it jumps, it does not call).
 *
 * AArch64 (AAPCS64) follows the same plan: a stub is `bti c` (the landing pad BTI checks for an
 * indirect call), the slot into w9 (a temporary that carries no argument; not x16/x17, which a
 * linker veneer may clobber, nor x8, the indirect result register), and a branch to the shared
 * body, which stores x0..x7 and d0..d7 (eight of each: AAPCS64 passes eight of each class in
 * registers) and calls the dispatcher. The dispatcher's 16-byte struct result comes back in x0
 * and x1 (a composite of mixed classes is not a floating-point aggregate), so the body moves x1
 * into d0, where a floating-point result is expected. With -mbranch-protection the body also
 * signs its return address (paciasp/autiasp, no-ops on cores without pointer authentication).
 */
#include "callback_stubs.h"

#if defined(__x86_64__) && defined(__ELF__)

/* Defined in callbacks.c; hidden, so the RIP-relative load below needs no GOT entry and links
 * into a PIE or a shared object alike. */
	.hidden	plugind_callback_current_dispatcher

	.text

	.p2align 4
	.type	plugind_callback_enter, @function
plugind_callback_enter:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	subq	$112, %rsp
	movq	%rdi, 0(%rsp)
	movq	%rsi, 8(%rsp)
	movq	%rdx, 16(%rsp)
	movq	%rcx, 24(%rsp)
	movq	%r8, 32(%rsp)
	movq	%r9, 40(%rsp)
	movq	%xmm0, 48(%rsp)
	movq	%xmm1, 56(%rsp)
	movq	%xmm2, 64(%rsp)
	movq	%xmm3, 72(%rsp)
	movq	%xmm4, 80(%rsp)
	movq	%xmm5, 88(%rsp)
	movq	%xmm6, 96(%rsp)
	movq	%xmm7, 104(%rsp)
	/* An aligned 64-bit load: atomic, and on x86-64 (TSO) an acquire load, pairing with the
	 * release store in plugind_callbacks_set_dispatcher. */
	movq	plugind_callback_current_dispatcher(%rip), %rax
	testq	%rax, %rax
	jnz	.Ldispatch
	xorl	%eax, %eax
	pxor	%xmm0, %xmm0
	jmp	.Lreturn
.Ldispatch:
	movl	%r11d, %edi
	movq	%rsp, %rsi
	leaq	48(%rsp), %rdx
	callq	*%rax
.Lreturn:
	leave
	.cfi_def_cfa %rsp, 8
	retq
	.cfi_endproc
	.size	plugind_callback_enter, . - plugind_callback_enter

	.irp	slot, PLUGIND_CALLBACK_STUB_SLOTS
	.p2align 4
	.type	plugind_callback_stub_\slot, @function
plugind_callback_stub_\slot:
	.cfi_startproc
	endbr64
	movl	$\slot, %r11d
	jmp	plugind_callback_enter
	.cfi_endproc
	.size	plugind_callback_stub_\slot, . - plugind_callback_stub_\slot
	.endr

/* With -fcf-protection the compiler marks its objects as IBT/SHSTK-compatible in
 * .note.gnu.property, and the linker keeps a feature only if every object claims it: claim the
 * same ones (stubs start with endbr64; every call is matched by a ret), as <cet.h> does. */
#if defined(__CET__)
	.section .note.gnu.property, "a", @note
	.p2align 3
	.long	4			/* name size */
	.long	16			/* descriptor size */
	.long	5			/* NT_GNU_PROPERTY_TYPE_0 */
	.asciz	"GNU"
	.long	0xc0000002		/* GNU_PROPERTY_X86_FEATURE_1_AND */
	.long	4
	.long	(__CET__ & 3)		/* bit 0 IBT, bit 1 SHSTK, as in __CET__ */
	.p2align 3
#endif


#elif defined(__aarch64__) && defined(__ELF__)

	.hidden	plugind_callback_current_dispatcher

	.text

	.p2align 4
	.type	plugind_callback_enter, %function
plugind_callback_enter:
	.cfi_startproc
#if defined(__ARM_FEATURE_PAC_DEFAULT)
	hint	#25			/* paciasp */
	.cfi_negate_ra_state
#endif
	/* Frame record at 0, x0..x7 at 16, d0..d7 at 80: 144 bytes, a multiple of 16. */
	stp	x29, x30, [sp, #-144]!
	.cfi_def_cfa_offset 144
	.cfi_offset x29, -144
	.cfi_offset x30, -136
	mov	x29, sp
	stp	x0, x1, [sp, #16]
	stp	x2, x3, [sp, #32]
	stp	x4, x5, [sp, #48]
	stp	x6, x7, [sp, #64]
	stp	d0, d1, [sp, #80]
	stp	d2, d3, [sp, #96]
	stp	d4, d5, [sp, #112]
	stp	d6, d7, [sp, #128]
	/* Acquire load, pairing with the release store in plugind_callbacks_set_dispatcher. */
	adrp	x10, plugind_callback_current_dispatcher
	add	x10, x10, :lo12:plugind_callback_current_dispatcher
	ldar	x10, [x10]
	cbz	x10, .Lnone
	mov	w0, w9
	add	x1, sp, #16
	add	x2, sp, #80
	blr	x10
	fmov	d0, x1
	b	.Lreturn
.Lnone:
	mov	x0, #0
	fmov	d0, xzr
.Lreturn:
	ldp	x29, x30, [sp], #144
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
#if defined(__ARM_FEATURE_PAC_DEFAULT)
	hint	#29			/* autiasp */
	.cfi_negate_ra_state
#endif
	ret
	.cfi_endproc
	.size	plugind_callback_enter, . - plugind_callback_enter

	.irp	slot, PLUGIND_CALLBACK_STUB_SLOTS
	.p2align 4
	.type	plugind_callback_stub_\slot, %function
plugind_callback_stub_\slot:
	.cfi_startproc
	hint	#34			/* bti c */
	mov	w9, #\slot
	b	plugind_callback_enter
	.cfi_endproc
	.size	plugind_callback_stub_\slot, . - plugind_callback_stub_\slot
	.endr

/* With -mbranch-protection the compiler marks its objects BTI- and PAC-compatible in
 * .note.gnu.property, and the linker keeps a feature only if every object claims it: claim the
 * ones this file honours (every stub starts with bti c; the body signs its return address). */
#if defined(__ARM_FEATURE_BTI_DEFAULT) || defined(__ARM_FEATURE_PAC_DEFAULT)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define PLUGIND_AARCH64_BTI 1
#else
#define PLUGIND_AARCH64_BTI 0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT)
#define PLUGIND_AARCH64_PAC 2
#else
#define PLUGIND_AARCH64_PAC 0
#endif
	.section .note.gnu.property, "a", %note
	.p2align 3
	.long	4			/* name size */
	.long	16			/* descriptor size */
	.long	5			/* NT_GNU_PROPERTY_TYPE_0 */
	.asciz	"GNU"
	.long	0xc0000000		/* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
	.long	4
	.long	(PLUGIND_AARCH64_BTI | PLUGIND_AARCH64_PAC)
	.p2align 3
#endif

#endif

/* The stubs' offsets, on every architecture that has stubs. */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__ELF__)
	.section .rodata
	.p2align 2
	.globl	plugind_callback_stub_offsets
	.hidden	plugind_callback_stub_offsets
	.type	plugind_callback_stub_offsets, %object
plugind_callback_stub_offsets:
	.irp	slot, PLUGIND_CALLBACK_STUB_SLOTS
	.long	plugind_callback_stub_\slot - plugind_callback_stub_offsets
	.endr
	.size	plugind_callback_stub_offsets, . - plugind_callback_stub_offsets
	.if	(. - plugind_callback_stub_offsets) != 4 * PLUGIND_CALLBACK_STUB_COUNT
	.error	"PLUGIND_CALLBACK_STUB_SLOTS must list PLUGIND_CALLBACK_STUB_COUNT slots"
	.endif

#endif

/* On every architecture, even when the file assembles to nothing: an object without this note
 * makes the linker assume it needs an executable stack and give the whole program one. */
#if defined(__ELF__)
	.section .note.GNU-stack, "", %progbits
#endif
