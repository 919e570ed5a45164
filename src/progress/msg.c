/* SPDX-License-Identifier: MIT */
/*
 * One line on stderr for the library's checks (a rejected configuration,
 * a misused lock or pool word), written with msg.h's signal-safe
 * formatting: the checks can fire inside a signal handler or while the
 * allocator is rseqkit's own malloc, so no stdio and no malloc.
 */
#include "progress_internal.h"

void rsk_report_(const char *text, const void *addr, const char *more)
{
	struct msg m = { .n = 0 };

	msg_str(&m, "rseqkit: ");
	msg_str(&m, text);
	if (addr != NULL)
		msg_num(&m, (uintptr_t)addr, 16);
	msg_str(&m, more);
	msg_out(&m);
}
