//! `warren-init`: a zone's PID 1, as a separate small binary so each zone maps (and
//! dirties) as little as possible. `warren` itself also answers to this name.
//!
//! Linked statically with a C runtime (`crt-static`, as .cargo/config.toml sets), it
//! starts at its own entry point, `warren_init_start` (build.rs links it with
//! `--entry`), not at the C runtime's `_start`: neither glibc's start-up (TLS block,
//! IRELATIVE relocations, library paths on the heap) nor Rust's (the main thread's stack
//! guard read from /proc/self/maps, its `Thread`) runs, and `main` below is never
//! called, so a zone's init holds no heap and writes few data pages. What it runs may not call the C
//! library, allocate or panic: `warren::runtime::init::run` makes every system call
//! through `warren_sys::bare`. The memory functions the compiler's code calls are
//! defined here, in assembly: the C library's are IFUNCs that its start-up resolves.
//! docs/scaling.md, "warren-init", has the numbers.

fn main() {
    warren::runtime::init::main();
}

// The unit-test harness cargo builds from this file gets the same `--entry`: there it
// goes on to the C runtime's `_start`, and the harness starts as usual.
#[cfg(all(bare_start, test, target_arch = "x86_64"))]
core::arch::global_asm!(
    ".globl warren_init_start",
    "warren_init_start:",
    "jmp _start"
);

#[cfg(all(bare_start, test, target_arch = "aarch64"))]
core::arch::global_asm!(".globl warren_init_start", "warren_init_start:", "b _start");

#[cfg(all(bare_start, not(test)))]
mod start {
    #[cfg(target_arch = "x86_64")]
    core::arch::global_asm!(
        ".globl warren_init_start",
        ".type warren_init_start,@function",
        "warren_init_start:",
        "xor ebp, ebp",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {entry}",
        "ud2",
        entry = sym entry,
    );

    #[cfg(target_arch = "aarch64")]
    core::arch::global_asm!(
        ".globl warren_init_start",
        ".type warren_init_start,%function",
        "warren_init_start:",
        "mov x29, #0",
        "mov x30, #0",
        "mov x0, sp",
        "bl {entry}",
        "brk #0",
        entry = sym entry,
    );

    extern "C" fn entry(sp: *const usize) -> ! {
        // SAFETY: the entry point passes the stack pointer the kernel handed it,
        // unchanged.
        unsafe { warren_sys::init::start(sp) };
        warren::runtime::init::run()
    }

    // The memory functions the compiler's code calls (copies, zeroing, comparisons,
    // and strlen: LLVM makes a loop that looks for a NUL into a call to it),
    // in assembly: Rust definitions would be made local by LTO in an executable, and the
    // calls the code generator emits afterwards would then bind to the C library's
    // IFUNCs, which nothing resolved. Byte-wise (`rep movsb`/`stosb` on x86_64): init
    // copies little.
    #[cfg(target_arch = "x86_64")]
    core::arch::global_asm!(
        ".globl memcpy",
        ".type memcpy,@function",
        "memcpy:",
        "mov rax, rdi",
        "mov rcx, rdx",
        "rep movsb",
        "ret",
        ".globl memmove",
        ".type memmove,@function",
        "memmove:",
        "mov rax, rdi",
        "mov rcx, rdx",
        "cmp rdi, rsi",
        "jbe 2f",
        "lea r8, [rsi + rdx]",
        "cmp rdi, r8",
        "jae 2f",
        // Overlapping with dst above src: backwards.
        "lea rsi, [rsi + rdx - 1]",
        "lea rdi, [rdi + rdx - 1]",
        "std",
        "rep movsb",
        "cld",
        "ret",
        "2:",
        "rep movsb",
        "ret",
        ".globl memset",
        ".type memset,@function",
        "memset:",
        "mov r8, rdi",
        "mov eax, esi",
        "mov rcx, rdx",
        "rep stosb",
        "mov rax, r8",
        "ret",
        ".globl memcmp",
        ".type memcmp,@function",
        ".globl bcmp",
        ".type bcmp,@function",
        "memcmp:",
        "bcmp:",
        "xor eax, eax",
        "test rdx, rdx",
        "jz 2f",
        "1:",
        "movzx eax, byte ptr [rdi]",
        "movzx ecx, byte ptr [rsi]",
        "sub eax, ecx",
        "jnz 2f",
        "inc rdi",
        "inc rsi",
        "dec rdx",
        "jnz 1b",
        "2:",
        "ret",
        ".globl strlen",
        ".type strlen,@function",
        "strlen:",
        "xor eax, eax",
        "1:",
        "cmp byte ptr [rdi + rax], 0",
        "je 2f",
        "inc rax",
        "jmp 1b",
        "2:",
        "ret",
    );

    #[cfg(target_arch = "aarch64")]
    core::arch::global_asm!(
        ".globl memcpy",
        ".type memcpy,%function",
        "memcpy:",
        "mov x3, x0",
        "cbz x2, 2f",
        "1:",
        "ldrb w4, [x1], #1",
        "strb w4, [x3], #1",
        "subs x2, x2, #1",
        "b.ne 1b",
        "2:",
        "ret",
        ".globl memmove",
        ".type memmove,%function",
        "memmove:",
        "cmp x0, x1",
        "b.ls memcpy",
        "add x3, x1, x2",
        "cmp x0, x3",
        "b.hs memcpy",
        // Overlapping with dst above src: backwards.
        "add x4, x0, x2",
        "cbz x2, 2f",
        "1:",
        "ldrb w5, [x3, #-1]!",
        "strb w5, [x4, #-1]!",
        "subs x2, x2, #1",
        "b.ne 1b",
        "2:",
        "ret",
        ".globl memset",
        ".type memset,%function",
        "memset:",
        "mov x3, x0",
        "cbz x2, 2f",
        "1:",
        "strb w1, [x3], #1",
        "subs x2, x2, #1",
        "b.ne 1b",
        "2:",
        "ret",
        ".globl memcmp",
        ".type memcmp,%function",
        ".globl bcmp",
        ".type bcmp,%function",
        "memcmp:",
        "bcmp:",
        "mov w3, #0",
        "cbz x2, 2f",
        "1:",
        "ldrb w3, [x0], #1",
        "ldrb w4, [x1], #1",
        "subs w3, w3, w4",
        "b.ne 2f",
        "subs x2, x2, #1",
        "b.ne 1b",
        "2:",
        "mov w0, w3",
        "ret",
        ".globl strlen",
        ".type strlen,%function",
        "strlen:",
        "mov x1, x0",
        "1:",
        "ldrb w2, [x1], #1",
        "cbnz w2, 1b",
        "sub x0, x1, x0",
        "sub x0, x0, #1",
        "ret",
    );
}
