/* SPDX-License-Identifier: MIT */
/*
 * The progress layer's messages on stderr: a formatted buffer written with
 * write(2), async-signal-safe (no stdio, no malloc, errno preserved), for
 * reports from gate waits, the fork handler and start-up.
 */
#ifndef RSEQKIT_PROGRESS_MSG_H
#define RSEQKIT_PROGRESS_MSG_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* ---- messages: write(2) of a formatted buffer (async-signal-safe) ---- */

struct msg {
	char b[384];
	size_t n;
};

static __attribute__((unused)) void msg_str(struct msg *m, const char *s)
{
	while (*s != '\0' && m->n < sizeof(m->b) - 1)
		m->b[m->n++] = *s++;
}

static __attribute__((unused)) void msg_num(struct msg *m, uintptr_t v, unsigned base)
{
	char d[24];
	int k = 0;

	if (base == 16)
		msg_str(m, "0x");
	do {
		d[k++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v != 0 && k < (int)sizeof(d));
	while (k > 0 && m->n < sizeof(m->b) - 1)
		m->b[m->n++] = d[--k];
}

static __attribute__((unused)) void msg_dec(struct msg *m, long v)
{
	if (v < 0) {
		msg_str(m, "-");
		v = -v;
	}
	msg_num(m, (uintptr_t)v, 10);
}

static __attribute__((unused)) void msg_out(struct msg *m)
{
	int saved = errno;
	size_t off = 0;

	m->b[m->n++] = '\n';
	while (off < m->n) {
		ssize_t r = write(STDERR_FILENO, m->b + off, m->n - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	errno = saved;
}

#endif
