/* SPDX-License-Identifier: MIT */
/*
 * freelist - a per-CPU free list of objects with rsk_stack.  Threads take
 * objects from their CPU's list and give them back there (restartable pop
 * and push: no atomic instruction, no ABA problem); on an empty list they
 * steal another CPU's whole list (rsk_stack_pop_all_cpu, safe while its
 * threads keep going), and allocate only when all are empty.  Checks: no
 * object is handed out twice, every object is back on a list at the end.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <rseqkit/rseqkit.h>
#define THREADS 6
#define ROUNDS  100000

struct obj {
	struct rsk_stack_node node; /* first: a node pointer is an obj pointer */
	int in_use;
};

static struct rsk_stack *freelist;
static long allocated, errors;

static struct obj *obj_get(void)
{
	struct rsk_stack_node *n, *rest, *next;

	if (rsk_stack_pop(freelist, &n) == 0)
		return (struct obj *)n;
	for (int cpu = 0; cpu < freelist->nr; cpu++) {
		if (rsk_stack_pop_all_cpu(freelist, cpu, &n) != 0)
			continue;
		for (rest = n->next; rest != NULL; rest = next) { /* keep the rest here */
			next = rest->next;
			rsk_stack_push(freelist, rest);
		}
		return (struct obj *)n;
	}
	__atomic_add_fetch(&allocated, 1, __ATOMIC_RELAXED);
	return calloc(1, sizeof(struct obj));
}

static void *worker(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		struct obj *o = obj_get();
		int bad = o == NULL || __atomic_exchange_n(&o->in_use, 1, __ATOMIC_RELAXED);
		if (o != NULL) { /* ... use the object, then give it back ... */
			__atomic_store_n(&o->in_use, 0, __ATOMIC_RELAXED);
			bad |= rsk_stack_push(freelist, &o->node) < 0;
		}
		if (bad)
			__atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
	}
	return arg;
}

int main(void)
{
	pthread_t th[THREADS];
	struct rsk_stack_node *n, *next;
	long returned = 0;
	if (rsk_stack_create(&freelist, RSK_INDEX_CPU) != 0)
		return 1;
	for (int t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], NULL, worker, NULL) != 0)
			return 1;
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (int cpu = 0; cpu < freelist->nr; cpu++) /* drain and free */
		for (rsk_stack_pop_all_cpu(freelist, cpu, &n); n != NULL; n = next, returned++) {
			next = n->next;
			free(n);
		}
	rsk_stack_destroy(freelist);
	printf("allocated %ld, back on the lists %ld, errors %ld\n", allocated, returned, errors);
	return errors != 0 || returned != allocated;
}
