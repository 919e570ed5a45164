/* SPDX-License-Identifier: MIT */
/*
 * sharded_lock - rsk_spinlock sharding a small critical section.
 *
 * A bank of "accounts" is split into one shard per CPU, each guarded by
 * that CPU's lock of one rsk_spinlock.  rsk_spinlock_lock() takes the lock
 * of the CPU the thread runs on (a restartable compare-and-store, no
 * atomic instruction) and returns its index: the thread then works on
 * that shard - even if it migrates meanwhile, since the lock, not the CPU,
 * protects the shard - and unlocks that index.  Threads contend only with
 * threads that were on the same CPU.  The section moves money between two
 * fields and counts the operation; the checks: no operation lost, every
 * shard's books balance.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <rseqkit/rseqkit.h>

#define THREADS 8
#define ROUNDS  200000

struct shard {
	long ops;	/* operations done on this shard */
	long credit;	/* credit + debit == 0 whenever the lock is free */
	long debit;
} __attribute__((aligned(RSK_PERCPU_ALIGN)));

static struct rsk_spinlock *lock;
static struct shard *shards;

static void *worker(void *arg)
{
	for (long i = 0; i < ROUNDS; i++) {
		int idx = rsk_spinlock_lock(lock);
		if (idx < 0)
			return (void *)1;
		shards[idx].ops++; /* plain code: the lock is held */
		shards[idx].credit += i % 7;
		shards[idx].debit -= i % 7;
		rsk_spinlock_unlock(lock, idx);
	}
	return arg;
}

int main(void)
{
	pthread_t th[THREADS];
	long ops = 0, unbalanced = 0;
	void *ret;
	int bad = 0;

	if (rsk_spinlock_create(&lock, RSK_INDEX_CPU) != 0)
		return 1;
	shards = aligned_alloc(RSK_PERCPU_ALIGN, sizeof(*shards) * (size_t)lock->nr);
	if (shards == NULL)
		return 1;
	for (int i = 0; i < lock->nr; i++)
		shards[i] = (struct shard){ 0, 0, 0 };
	for (int t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, worker, NULL) != 0)
			return 1;
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], &ret);
		bad |= ret != NULL;
	}
	for (int i = 0; i < lock->nr; i++) {
		ops += shards[i].ops;
		unbalanced += shards[i].credit + shards[i].debit != 0;
	}
	printf("%ld operations (want %ld), %ld unbalanced shards\n", ops,
	       (long)THREADS * ROUNDS, unbalanced);
	bad |= ops != (long)THREADS * ROUNDS || unbalanced != 0;
	free(shards);
	rsk_spinlock_destroy(lock);
	return bad;
}
