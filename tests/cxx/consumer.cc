// SPDX-License-Identifier: MIT
//
// A C++17 consumer of <rseqkit/rseqkit.h> (tests/cxx.sh builds it with
// g++ and clang++, -Wall -Wextra -Werror, and with -pedantic-errors).
// Threads count with a per-CPU counter, pass nodes through a per-CPU
// stack and pointers through a pointer buffer, and take a per-CPU lock;
// then the totals must be exact.  Prints one line; exit 0 when exact.
#include <rseqkit/rseqkit.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kReps = 20000;

struct Node {
	rsk_stack_node link; // first: a node pointer is a Node pointer
	int id;
};

// RAII around the C API's create/destroy pairs.
template <typename T, int (*Destroy)(T *)> struct Handle {
	T *p = nullptr;
	Handle() = default;
	Handle(const Handle &) = delete;
	Handle &operator=(const Handle &) = delete;
	~Handle()
	{
		if (p != nullptr)
			Destroy(p);
	}
};

// One node out of the stack: this CPU's part, else any CPU's (the rest of
// a stolen list goes back, node by node).  nullptr only if every part
// stayed empty for many passes.
rsk_stack_node *take_node(rsk_stack *s)
{
	rsk_stack_node *n = nullptr;
	for (int pass = 0; pass < 100000; pass++) {
		if (rsk_stack_pop(s, &n) >= 0 && n != nullptr)
			return n;
		for (int c = 0; c < s->nr; c++) {
			if (rsk_stack_pop_all_cpu(s, c, &n) != 0 || n == nullptr)
				continue;
			for (rsk_stack_node *rest = n->next, *next; rest != nullptr; rest = next) {
				next = rest->next;
				rsk_stack_push(s, rest);
			}
			return n;
		}
		std::this_thread::yield();
	}
	return nullptr;
}

// One pointer out of the buffer, likewise.
void *take_ptr(rsk_ptrbuf *b)
{
	void *p = nullptr;
	for (int pass = 0; pass < 100000; pass++) {
		if (rsk_ptrbuf_pop(b, &p) >= 0 && p != nullptr)
			return p;
		for (int c = 0; c < b->nr; c++)
			if (rsk_ptrbuf_pop_cpu(b, c, &p) == 0 && p != nullptr)
				return p;
		std::this_thread::yield();
	}
	return nullptr;
}

} // namespace

int main()
{
	static_assert(RSEQKIT_VERSION_AT_LEAST(0, 1, 0), "version macros usable in C++");
	int major = -1;
	const char *version = rsk_version(&major, nullptr, nullptr);

	Handle<rsk_counter, rsk_counter_destroy> counter;
	Handle<rsk_stack, rsk_stack_destroy> stack;
	Handle<rsk_spinlock, rsk_spinlock_destroy> lock;
	Handle<rsk_ptrbuf, rsk_ptrbuf_destroy> buf;
	if (rsk_counter_create(&counter.p, RSK_INDEX_CPU) != 0 ||
	    rsk_stack_create(&stack.p, RSK_INDEX_CPU) != 0 ||
	    rsk_spinlock_create(&lock.p, RSK_INDEX_CPU) != 0 ||
	    rsk_ptrbuf_create(&buf.p, RSK_INDEX_CID, kThreads * 2, RSK_PTRBUF_RELEASE) != 0) {
		std::puts("cannot create the structures");
		return 1;
	}

	std::vector<Node> nodes(kThreads);
	std::vector<int> tokens(kThreads * 2);
	std::vector<long> shard(static_cast<std::size_t>(rsk_possible_cpus()), 0);
	std::atomic<long> errors{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < kThreads; t++) {
		nodes[t].id = t;
		threads.emplace_back([&, t] {
			rsk_stack_node *mine = &nodes[static_cast<std::size_t>(t)].link;
			for (int i = 0; i < kReps; i++) {
				if (rsk_counter_add(counter.p, 1) < 0)
					errors++;
				// Our node goes in, some node comes out.
				if (rsk_stack_push(stack.p, mine) < 0)
					errors++;
				if ((mine = take_node(stack.p)) == nullptr) {
					errors++;
					return;
				}
				// A locked read-modify-write of this CPU's shard.
				int idx = rsk_spinlock_lock(lock.p);
				if (idx < 0) {
					errors++;
				} else {
					shard[static_cast<std::size_t>(idx)]++;
					rsk_spinlock_unlock(lock.p, idx);
				}
				// A pointer in, some pointer out.
				if (rsk_ptrbuf_push(buf.p, &tokens[static_cast<std::size_t>(t)]) < 0 ||
				    take_ptr(buf.p) == nullptr)
					errors++;
			}
			rsk_stack_push(stack.p, mine); // back, for the final count
		});
	}
	for (auto &th : threads)
		th.join();

	intptr_t total = 0;
	rsk_counter_sum(counter.p, &total);
	long locked = 0;
	for (long v : shard)
		locked += v;
	int left = 0;
	for (int c = 0; c < rsk_possible_cpus(); c++) {
		rsk_stack_node *n = nullptr;
		if (rsk_stack_pop_all_cpu(stack.p, c, &n) == 0)
			for (; n != nullptr; n = n->next)
				left++;
	}
	const long want = static_cast<long>(kThreads) * kReps;
	std::printf("rseqkit %s (major %d): counter %ld, locked %ld (want %ld), nodes %d of %d, errors %ld\n",
		    version, major, static_cast<long>(total), locked, want, left, kThreads,
		    errors.load());
	return total == want && locked == want && left == kThreads && errors == 0 &&
			       major == RSEQKIT_VERSION_MAJOR
		       ? 0
		       : 1;
}
