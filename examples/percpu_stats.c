/* SPDX-License-Identifier: MIT */
/*
 * percpu_stats - per-CPU statistics counters in a multi-threaded program.
 *
 * Eight worker threads "serve requests" and count them, and the bytes they
 * moved, in two rsk_counter objects: each add is one restartable add on the
 * current CPU's part, no lock prefix and no shared cache line.  A reporter
 * reads the running totals while the workers run (rsk_counter_sum: relaxed,
 * not a snapshot) and the exact totals after they finish.
 */
#include <pthread.h>
#include <stdio.h>
#include <rseqkit/rseqkit.h>

#define THREADS  8
#define REQUESTS 200000

static struct rsk_counter *requests, *bytes;

static void *worker(void *arg)
{
	intptr_t size = (intptr_t)arg + 1; /* bytes per request: 1..THREADS */

	for (int i = 0; i < REQUESTS; i++) {
		if (rsk_counter_add(requests, 1) < 0 || rsk_counter_add(bytes, size) < 0)
			return (void *)1;
	}
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	intptr_t nreq = 0, nbytes = 0, want_bytes = 0;
	int bad = 0;

	if (rsk_counter_create(&requests, RSK_INDEX_CPU) != 0 ||
	    rsk_counter_create(&bytes, RSK_INDEX_CPU) != 0)
		return 1;
	for (intptr_t t = 0; t < THREADS; t++) {
		want_bytes += (t + 1) * REQUESTS;
		if (pthread_create(&th[t], NULL, worker, (void *)t) != 0)
			return 1;
	}
	/* A live reading: any value between 0 and the final total. */
	rsk_counter_sum(requests, &nreq);
	printf("while running: %ld requests so far\n", (long)nreq);

	for (int t = 0; t < THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		bad |= ret != NULL;
	}
	rsk_counter_sum(requests, &nreq);
	rsk_counter_sum(bytes, &nbytes);
	printf("requests %ld (want %ld), bytes %ld (want %ld)\n", (long)nreq,
	       (long)THREADS * REQUESTS, (long)nbytes, (long)want_bytes);
	for (int cpu = 0; cpu < requests->nr; cpu++) {
		intptr_t v;
		if (rsk_counter_read(requests, cpu, &v) == 0 && v != 0)
			printf("  cpu %3d: %ld requests\n", cpu, (long)v);
	}
	bad |= nreq != (intptr_t)THREADS * REQUESTS || nbytes != want_bytes;
	rsk_counter_destroy(requests);
	rsk_counter_destroy(bytes);
	if (bad)
		fprintf(stderr, "percpu_stats: WRONG totals\n");
	return bad;
}
