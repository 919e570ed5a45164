/* SPDX-License-Identifier: MIT */
/*
 * The control of the rseq_debug=1 boot (x86-64): a critical section that
 * makes a system call, which the rseq ABI forbids.  A kernel checking rseq
 * catches it: CONFIG_DEBUG_RSEQ before 6.19 kills the process (SIGSEGV);
 * rseq_debug=1 on 7.2 restarts the section at its abort handler on the
 * way back from the system call (exit 3 here).  A kernel that does not
 * check lets it run on (exit 0, or 3 if the thread happened to be
 * preempted in the system call).  Caught on the debug boot, it shows that
 * the clean runs of rseqkit beside it prove something.
 */
#include <stdio.h>
#include <rseqkit/thread.h>

int main(void)
{
	struct rsk_status st;
	struct rsk_abi_area *area;
	int aborted = 0;

	rsk_status(&st);
	area = rsk_area();
	if (!st.thread_registered || area == NULL) {
		printf("syscall-in-section: rseq not usable here (%s)\n", st.reason);
		return 2;
	}
	__asm__ __volatile__(
		".pushsection .data\n\t"
		".balign 32\n"
		"3:\n\t"
		".long 0, 0\n\t"
		".quad 1f, 2f - 1f, 4f\n\t"
		".popsection\n\t"
		"leaq 3b(%%rip), %%rax\n\t"
		"movq %%rax, 8(%[area])\n"
		"1:\n\t"
		"movl $39, %%eax\n\t" /* getpid */
		"syscall\n\t"
		"nop\n" /* the return address must lie inside the section */
		"2:\n\t"
		"jmp 5f\n\t"
		".byte 0x0f, 0xb9, 0x3d\n\t" /* the signature, as ud1 */
		".long 0x53053053\n"
		"4:\n\t"
		"movl $1, %[aborted]\n"
		"5:\n\t"
		"movq $0, 8(%[area])\n\t"
		: [aborted] "+m"(aborted)
		: [area] "r"(area)
		: "rax", "rcx", "r11", "memory");
	printf("syscall-in-section: %s\n", aborted ? "the kernel restarted the section" :
		       "a system call inside a section went unnoticed");
	return aborted ? 3 : 0;
}
