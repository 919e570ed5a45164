/* SPDX-License-Identifier: MIT */
/*
 * quota.c - a structure of your own on per-CPU memory (<rseqkit/mempool.h>):
 * a budget of tokens spread over the CPUs.  Taking a token is one gated
 * compare-and-store on the current CPU's copy (fast path); when that copy
 * is empty, or the thread cannot run a section, the slow path takes a
 * token from any copy under that copy's gate (a cross-CPU operation).
 * Four threads take tokens until none is left: exactly BUDGET are taken,
 * with or without rseq (RSEQKIT_DISABLE=1).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <rseqkit/rseqkit.h>

#define BUDGET 100000
#define THREADS 4

struct quota {
	intptr_t tokens; /* this copy's tokens; copies are per CPU */
};

static struct rsk_mempool *pool;
static struct quota *q;

/* Every copy starts with its share of the budget (copy 0 gets the rest). */
static int init_share(void *copy, int idx, void *arg)
{
	struct quota *c = copy;
	int nr = *(int *)arg;

	c->tokens = BUDGET / nr + (idx == 0 ? BUDGET % nr : 0);
	return 0;
}

/* Slow path: one token from any copy, each under its gate (plain code
 * while the gate is closed: no section touches that copy).  Starts at
 * `from`, the caller's copy if it has one. */
static int take_slow(int from)
{
	for (int k = 0; k < pool->nr; k++) {
		int j = (from + k) % pool->nr;
		struct quota *c = rsk_percpu_ptr(q, j);
		intptr_t *gate = rsk_mempool_gate(pool, j);
		int got = 0;

		if (__atomic_load_n(&c->tokens, __ATOMIC_RELAXED) == 0)
			continue; /* a hint only: checked again under the gate */
		if (rsk_gate_close(gate, pool->mode, j) != 0)
			continue; /* the fence could not reach that CPU */
		if (c->tokens > 0) {
			__atomic_store_n(&c->tokens, c->tokens - 1, __ATOMIC_RELAXED);
			got = 1;
		}
		rsk_gate_open(gate);
		if (got)
			return 0;
	}
	return -ENOSPC;
}

/* Fast path: one gated compare-and-store on the current CPU's copy. */
static int take(void)
{
	for (int tries = 0; tries < 16; tries++) {
		int idx = rsk_index(pool->mode);
		struct quota *c;
		intptr_t t;
		int ret;

		if (idx < 0 || idx >= pool->nr)
			return take_slow(0); /* no rseq in this thread */
		c = rsk_percpu_ptr(q, idx);
		t = __atomic_load_n(&c->tokens, __ATOMIC_RELAXED);
		if (t == 0)
			return take_slow(idx); /* empty here: steal */
		ret = rsk_gated_cmpstore(pool->mode, idx, rsk_mempool_gate(pool, idx), &c->tokens, t,
					 t - 1);
		if (ret == RSK_OK)
			return 0;
		if (ret == RSK_STOPPED)
			return take_slow(idx); /* a slow path owns this copy */
		/* RSK_CMPFAIL (another thread took one) or RSK_ABORTED: again */
	}
	return take_slow(0); /* aborted too often (a debugger?) */
}

static void *worker(void *arg)
{
	long *taken = arg;

	while (take() == 0)
		(*taken)++;
	return NULL;
}

/* A cross-CPU reader: what is left, copy by copy (not a snapshot). */
static int add_tokens(void *copy, int idx, void *arg)
{
	(void)idx;
	*(intptr_t *)arg += __atomic_load_n(&((struct quota *)copy)->tokens, __ATOMIC_RELAXED);
	return 0;
}

int main(void)
{
	int nr = rsk_possible_cpus();
	struct rsk_mempool_config cfg = {
		.size = sizeof(struct quota),
		.mode = RSK_INDEX_CPU,
		.init = init_share,
		.init_arg = &nr,
	};
	struct rsk_mempool_stats st;
	pthread_t t[THREADS];
	long taken[THREADS] = {0}, total = 0;
	intptr_t left = 0;

	if (rsk_mempool_create(&pool, &cfg) != 0 || (q = rsk_mempool_alloc(pool)) == NULL)
		return 1;
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, &taken[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += taken[i];
	}
	rsk_mempool_for_each(pool, q, add_tokens, &left);
	rsk_mempool_stats(pool, &st);
	printf("taken %ld of %d, left %ld; %d copies, %zu of %zu bytes committed\n", total, BUDGET,
	       (long)left, st.copies, st.committed_bytes, st.reserved_bytes);
	rsk_mempool_free(pool, q);
	rsk_mempool_destroy(pool);
	return total == BUDGET && left == 0 ? 0 : 1;
}
