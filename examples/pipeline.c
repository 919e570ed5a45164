/* SPDX-License-Identifier: MIT */
/*
 * pipeline - an object pool in a producer/consumer pipeline.  Producers
 * allocate messages from an rsk_pool, fill them and send their pointers
 * through a pipe; consumers check and free them.  Objects are allocated on
 * the producers' CPUs and freed on the consumers': alloc pops from the
 * current CPU's cache, free pushes onto it (one restartable section each),
 * and the pool's depot moves batches between caches that run empty or
 * full.  Frees release and allocations acquire, so a message is read
 * intact on any CPU.  Checks: every message arrives intact; at the end no
 * object is in use and, the caches drained, every slab can be unmapped.
 */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <rseqkit/rseqkit.h>

#define PRODUCERS 2
#define CONSUMERS 2
#define MESSAGES  100000 /* per producer */

struct msg { long seq, check; };
static struct rsk_pool *pool;
static int fds[2];
static long received, errors;

static void *producer(void *arg)
{
	for (long i = 0; i < MESSAGES; i++) {
		struct msg *m = rsk_pool_alloc(pool);
		if (m == NULL)
			return (void *)1;
		*m = (struct msg){ i, ~i };
		if (write(fds[1], &m, sizeof(m)) != (ssize_t)sizeof(m)) /* atomic: < PIPE_BUF */
			return (void *)1;
	}
	return arg;
}

static void *consumer(void *arg)
{
	struct msg *m;

	while (read(fds[0], &m, sizeof(m)) == (ssize_t)sizeof(m)) {
		if (m->check != ~m->seq || rsk_pool_free(pool, m) != 0)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&received, 1, __ATOMIC_RELAXED);
	}
	return arg;
}

int main(void)
{
	struct rsk_pool_config cfg = { .size = sizeof(struct msg), .cache_capacity = 64,
				       .mode = RSK_INDEX_CPU };
	struct rsk_pool_stats st;
	pthread_t th[PRODUCERS + CONSUMERS];
	long want = (long)PRODUCERS * MESSAGES;
	void *ret;

	if (rsk_pool_create(&pool, &cfg) != 0 || pipe(fds) != 0)
		return 1;
	for (int i = 0; i < PRODUCERS + CONSUMERS; i++)
		if (pthread_create(&th[i], NULL, i < PRODUCERS ? producer : consumer, NULL))
			return 1;
	for (int i = 0; i < PRODUCERS + CONSUMERS; i++) {
		pthread_join(th[i], &ret);
		errors += ret != NULL;
		if (i == PRODUCERS - 1)
			close(fds[1]); /* producers done: consumers read end of file */
	}
	rsk_pool_stats(pool, &st);
	printf("received %ld of %ld, errors %ld; in use %zu, cached %zu, slabs %zu\n", received,
	       want, errors, st.in_use, st.cached, st.slabs);
	errors += st.in_use != 0 || rsk_pool_drain(pool, -1) != 0 || rsk_pool_trim(pool) < 0 ||
		  rsk_pool_stats(pool, &st) != 0 || st.slabs != 0;
	rsk_pool_destroy(pool);
	return errors != 0 || received != want;
}
