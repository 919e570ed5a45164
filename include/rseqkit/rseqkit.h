/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/rseqkit.h - restartable sequences for Linux user space.
 *
 * The umbrella header: registration and identity (thread.h), the
 * restartable primitive operations (ops.h), the per-CPU data structures
 * (percpu.h; counter.h, spinlock.h, stack.h, ptrbuf.h, copybuf.h,
 * pool.h); per-CPU memory for your own data (mempool.h).  See
 * rseqkit(7).
 */
#ifndef RSEQKIT_RSEQKIT_H
#define RSEQKIT_RSEQKIT_H

#define RSEQKIT_VERSION_MAJOR 0
#define RSEQKIT_VERSION_MINOR 1
#define RSEQKIT_VERSION_PATCH 0

#include <rseqkit/abi.h>
#include <rseqkit/thread.h>
#include <rseqkit/ops.h>
#include <rseqkit/progress.h>
#include <rseqkit/counter.h>
#include <rseqkit/spinlock.h>
#include <rseqkit/stack.h>
#include <rseqkit/ptrbuf.h>
#include <rseqkit/copybuf.h>
#include <rseqkit/pool.h>
#include <rseqkit/mempool.h>

#endif /* RSEQKIT_RSEQKIT_H */
