/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/rseqkit.h - restartable sequences for Linux user space.
 *
 * The umbrella header: the version (version.h), registration and
 * identity (thread.h), the restartable primitive operations (ops.h), the
 * per-CPU data structures (percpu.h; counter.h, spinlock.h, stack.h,
 * ptrbuf.h, copybuf.h, pool.h); per-CPU memory for your own data
 * (mempool.h).  See rseqkit(7).
 */
#ifndef RSEQKIT_RSEQKIT_H
#define RSEQKIT_RSEQKIT_H

#include <rseqkit/version.h>
#include <rseqkit/abi.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>
#include <rseqkit/slice.h>
#include <rseqkit/counter.h>
#include <rseqkit/spinlock.h>
#include <rseqkit/stack.h>
#include <rseqkit/ptrbuf.h>
#include <rseqkit/copybuf.h>
#include <rseqkit/pool.h>
#include <rseqkit/mempool.h>

#endif /* RSEQKIT_RSEQKIT_H */
