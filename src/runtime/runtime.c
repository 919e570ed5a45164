/* SPDX-License-Identifier: MIT */
/*
 * Process-wide initialisation and per-thread registration.
 *
 * Who registers: if glibc registered the thread (__rseq_size != 0) we adopt
 * its area - a second registration would fail, and glibc's sched_getcpu()
 * uses it too.  Otherwise rseqkit registers each thread itself on first
 * use, always in an area of its own TLS.  Never in glibc's reserved area
 * (which exists, at __rseq_offset, even when glibc.pthread.rseq=0 stopped
 * glibc from registering it): glibc's pthread_create() registers every
 * new thread whose creator has that area registered, and aborts the
 * process ("Fatal glibc error: rseq registration failed") when that fails,
 * e.g. under a seccomp filter installed later.  Either way every thread's
 * area sits at one fixed offset from the thread pointer, which is what
 * makes the inline fast path one load.
 *
 * Signals: a handler may make its thread's first call while the thread is
 * inside its own first call.  Every step of the activation below is
 * idempotent (EBUSY from rseq(2) means the handler registered this very
 * area), the steps that must not be split run with signals blocked, and
 * nothing on the way allocates.
 *
 * Unloading: the library records every thread it has seen (a list through
 * the threads' own TLS, under a lock held with signals blocked).  When a
 * dlopen'ed copy of the library is unloaded (its destructor), or when
 * rsk_prepare_unload() is called, every recorded thread's rseq_cs that
 * points into the unloading object is cleared by compare-and-swap - see
 * clear_descriptors().
 *
 * The glibc symbols are weak references, not dlsym() look-ups: those fail
 * in static binaries.
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include "internal.h"
#include "env.h"

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
extern const unsigned int __rseq_flags __attribute__((weak));

RSK_EXPORT struct rsk_fast rsk_fast;
struct rsk_process rsk_process;

/* Our own area.  The head keeps the area off the thread pointer itself,
 * where TLS variant I (riscv) would put it: offset 0 means "not
 * initialised" to the fast paths.  What the kernel may be given is what
 * follows the head: OWN_AREA_SPACE bytes at 64-byte alignment, which holds
 * every feature size and alignment kernels ask for so far (7.x: 33 bytes,
 * 64-aligned). */
struct own_area {
	unsigned char head[64];
	struct rsk_abi_area area;
	unsigned char tail[32];
} __attribute__((aligned(64)));
#define OWN_AREA_SPACE (sizeof(struct own_area) - offsetof(struct own_area, area))
static __thread struct own_area own_area = {
	/* mm_cid (uint32_t)-1 while unregistered: beyond every structure,
	 * which lets their fast paths skip a cpu_id test (percpu.h). */
	.area = { .cpu_id = (uint32_t)RSK_ABI_CPU_ID_UNINITIALIZED, .mm_cid = UINT32_MAX },
};

struct rsk_thread {
	enum rsk_thread_state state;
	int count;		/* explicit rsk_register() calls outstanding */
	int error;		/* why FAILED */
	int own_registered;	/* we made this thread's kernel registration */
	/* The registry of threads seen (under registry_lock). */
	int recorded;
	struct rsk_abi_area *area;
	struct rsk_thread *next, **pprev;
};
static __thread struct rsk_thread self;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static int exit_key_live;
/* pthread_setspecific() of exit_key never allocates (so a signal handler
 * may make a thread's first call): glibc keeps keys below 32 in the thread
 * descriptor and allocates a block for the others; musl never allocates. */
static int exit_key_alloc_free;

static struct rsk_thread *registry;
static int registry_lock;

long rsk_sys_rseq(struct rsk_abi_area *area, uint32_t len, int flags)
{
	return syscall(RSK_ARCH_NR_RSEQ, area, len, flags, RSK_ARCH_SIGNATURE);
}

static void *thread_pointer(void)
{
	return rsk_arch_thread_pointer();
}

/*
 * Undo the calling thread's registration.  The kernel then writes mm_cid
 * 0, a valid index: in our own area, where RSK_INDEX_CID structures trust
 * an unregistered thread's mm_cid to be out of range, it is set back to
 * (uint32_t)-1 before any signal handler of the thread can run a section.
 */
static int unregister_self(void)
{
	struct rsk_abi_area *area = rsk_area();
	sigset_t all, old;
	int err = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (rsk_sys_rseq(area, rsk_process.registered_size, RSK_ABI_FLAG_UNREGISTER) != 0)
		err = errno;
	else if (rsk_process.own_area)
		__atomic_store_n(&area->mm_cid, UINT32_MAX, __ATOMIC_RELAXED);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/*
 * The registry lock is held with every signal blocked: a handler of the
 * holding thread can then never wait for it, and the steps done under it
 * are never split by one.  Holders: activation and thread exit (once per
 * thread each), unload, fork's child handler.
 */
static void registry_take(sigset_t *saved)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, saved);
	while (__atomic_exchange_n(&registry_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void registry_drop(const sigset_t *saved)
{
	__atomic_store_n(&registry_lock, 0, __ATOMIC_RELEASE);
	pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* Remember the calling thread and its area; arm the thread-exit hook. */
static void record_thread(struct rsk_abi_area *area)
{
	sigset_t saved;

	if (!exit_key_live || !exit_key_alloc_free)
		return; /* unrecorded: rsk_prepare_unload(3) says what that means */
	if (self.recorded)
		return; /* (set once, by this thread; cleared only at its exit) */
	RSK_INJECT_ACTIVATION(4);
	registry_take(&saved);
	RSK_INJECT_ACTIVATION(6); /* the lock held: tests/fork_registry.c */
	if (!self.recorded) {
		self.area = area;
		self.next = registry;
		self.pprev = &registry;
		if (registry)
			registry->pprev = &self.next;
		registry = &self;
		self.recorded = 1;
		pthread_setspecific(exit_key, &self);
	}
	registry_drop(&saved);
}

static void unrecord_thread(void)
{
	sigset_t saved;

	registry_take(&saved);
	if (self.recorded) {
		*self.pprev = self.next;
		if (self.next)
			self.next->pprev = self.pprev;
		self.recorded = 0;
	}
	registry_drop(&saved);
}

/* Thread exit (pthread key destructor): undo a registration we made, and
 * leave the registry before the TLS holding our entry is freed. */
static void thread_exit(void *unused)
{
	(void)unused;
	if (self.own_registered) {
		unregister_self();
		self.own_registered = 0;
	}
	self.state = RSK_THREAD_OPTED_OUT;
	unrecord_thread();
}

/* fork(): the child has one thread, the caller; the others' entries (and
 * a lock one of them may have held) are gone with them.  Called by the
 * gates' child handler (src/progress/gate.c), which rseqkit registers
 * before it takes its init lock (see rsk_init_once()). */
void rsk_registry_fork_child_(void)
{
	registry_lock = 0;
	registry = NULL;
	if (self.recorded) {
		self.next = NULL;
		self.pprev = &registry;
		registry = &self;
	}
}

/*
 * Clear every recorded thread's descriptor pointer that lies in [lo, hi),
 * the address range of an object about to be unmapped; returns how many.
 *
 * Why a remote clear is safe: the object's code is no longer running in
 * any thread (dlclose() of code that still runs is undefined anyway), so a
 * pointer into it is stale - no section of it is in flight that the clear
 * could expose.  The kernel reads rseq_cs lazily, at the thread's next
 * return to user space after a preemption, signal or migration; it then
 * finds either the old pointer (while the object is still mapped: it reads
 * a valid descriptor, sees the thread outside it and clears it itself) or
 * 0 (nothing to do).  The compare-and-swap never overwrites a pointer the
 * thread stored since: only sections of other objects can be armed now,
 * and their descriptors lie outside the range.  The entries cannot go away
 * meanwhile: an exiting thread waits for the lock in thread_exit().
 */
static unsigned clear_descriptors(uintptr_t lo, uintptr_t hi)
{
	sigset_t saved;
	unsigned n = 0;

	registry_take(&saved);
	for (struct rsk_thread *t = registry; t != NULL; t = t->next) {
		uint64_t cs = __atomic_load_n(&t->area->rseq_cs, __ATOMIC_RELAXED);
		if (cs >= lo && cs < hi &&
		    __atomic_compare_exchange_n(&t->area->rseq_cs, &cs, 0, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			n++;
	}
	registry_drop(&saved);
	return n;
}

/* The address range spanned by the loaded segments of the object that
 * contains `addr`. */
struct object_range {
	uintptr_t addr, lo, hi;
	int is_main;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct object_range *r = data;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int inside = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
		if (r->addr >= start && r->addr < end)
			inside = 1;
		if (start < lo)
			lo = start;
		if (end > hi)
			hi = end;
	}
	if (!inside)
		return 0;
	r->lo = lo;
	r->hi = hi;
	r->is_main = info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
	return 1;
}

static int object_of(const void *addr, struct object_range *r)
{
	r->addr = (uintptr_t)addr;
	r->lo = r->hi = 0;
	return dl_iterate_phdr(find_object, r) == 1;
}

/* ---- environment ---- */

static void warn_env(const char *name, const char *value, const char *instead)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "rseqkit: ignoring %s=%.200s (%s)\n", name, value,
			 instead);

	if (n > 0)
		(void)!write(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
}

/* Whether v is `word` in any case (ASCII: no locale at initialisation). */
static int env_word(const char *v, const char *word)
{
	for (; *word != '\0'; v++, word++)
		if ((*v >= 'A' && *v <= 'Z' ? *v - 'A' + 'a' : *v) != *word)
			return 0;
	return *v == '\0';
}

/* src/env.h.  Warned about once: each variable is read once, at init. */
int rsk_env_bool_(const char *name, int dflt)
{
	static const char *const yes[] = {"1", "yes", "true", "on"};
	static const char *const no[] = {"0", "no", "false", "off"};
	const char *v = getenv(name);

	if (v == NULL || v[0] == '\0')
		return dflt;
	for (unsigned i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (env_word(v, yes[i]))
			return 1;
		if (env_word(v, no[i]))
			return 0;
	}
	warn_env(name, v,
		 dflt ? "expected 1/yes/true/on or 0/no/false/off; using 1"
		      : "expected 1/yes/true/on or 0/no/false/off; using 0");
	return dflt;
}

unsigned rsk_debug_;

/* RSEQKIT_DEBUG: a comma list of pool, spinlock, all; an unknown item is
 * warned about and ignored. */
static unsigned env_debug(void)
{
	const char *v = getenv("RSEQKIT_DEBUG"), *p = v;
	unsigned flags = 0;
	int unknown = 0;

	for (; p != NULL && *p != '\0'; p += *p == ',') {
		size_t n = strcspn(p, ",");

		if (n == 3 && strncmp(p, "all", 3) == 0)
			flags |= RSK_DEBUG_POOL_ | RSK_DEBUG_SPINLOCK_;
		else if (n == 4 && strncmp(p, "pool", 4) == 0)
			flags |= RSK_DEBUG_POOL_;
		else if (n == 8 && strncmp(p, "spinlock", 8) == 0)
			flags |= RSK_DEBUG_SPINLOCK_;
		else if (n != 0)
			unknown = 1;
		p += n;
	}
	if (unknown)
		warn_env("RSEQKIT_DEBUG", v, "expected a comma list of pool, spinlock, all; "
					      "unknown items ignored");
	return flags;
}

/* A decimal number in [lo, hi]; otherwise `dflt`, with a warning. */
static long env_number(const char *name, long lo, long hi, long dflt)
{
	const char *v = getenv(name);
	char *end, why[96];
	long n;

	if (v == NULL || v[0] == '\0')
		return dflt;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno == 0 && end != v && *end == '\0' && n >= lo && n <= hi)
		return n;
	snprintf(why, sizeof(why), "expected a number from %ld to %ld; using %ld", lo, hi, dflt);
	warn_env(name, v, why);
	return dflt;
}

static unsigned max_u(unsigned a, unsigned b)
{
	return a > b ? a : b;
}

static int add_tls_size(struct dl_phdr_info *info, size_t size, void *data)
{
	size_t *total = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			*total += info->dlpi_phdr[i].p_memsz + info->dlpi_phdr[i].p_align;
	return 0;
}

/*
 * Is our own area in static TLS, at the same offset from the thread
 * pointer in every thread?  Not when librseqkit (or code embedding it) was
 * dlopen'ed: that TLS block is allocated per thread, anywhere, and the
 * inline fast paths of other threads would read and arm whatever lies at
 * the offset.  Static TLS (variant II, x86) lies right below the thread
 * pointer: the startup modules' blocks within the sum of every module's
 * TLS size and alignment.
 */
static int own_area_is_static(ptrdiff_t offset)
{
	size_t bound = 256; /* slack for the thread control block's alignment */

	dl_iterate_phdr(add_tls_size, &bound);
#if defined(__x86_64__) || defined(__i386__) || defined(__s390__)
	return offset < 0 && (size_t)-offset <= bound; /* variant II: below tp */
#else
#if defined(__powerpc__)
	offset += 0x7000; /* powerpc's thread pointer is biased by 0x7000 */
#endif
	return offset >= 0 && (size_t)offset <= bound; /* variant I: above tp */
#endif
}

/* The kernel's AT_RSEQ_* values; injection builds may fake them
 * (RSEQKIT_INJECT_FEATURE_SIZE, RSEQKIT_INJECT_ALIGN) to test kernels the
 * machine does not run. */
static unsigned kernel_auxv(unsigned long type)
{
#ifdef RSEQKIT_INJECT
	const char *fake = getenv(type == RSK_ABI_AT_RSEQ_FEATURE_SIZE ? "RSEQKIT_INJECT_FEATURE_SIZE" :
									  "RSEQKIT_INJECT_ALIGN");
	if (fake != NULL && fake[0] != '\0')
		return (unsigned)strtoul(fake, NULL, 0);
#endif
	return (unsigned)getauxval(type);
}

static void decide_owner(struct rsk_process *p, ptrdiff_t *offset)
{
	long r;

	if (rsk_env_bool_("RSEQKIT_DISABLE", 0)) {
		/* The user's word: run every operation through the slow paths
		 * (for tests and for ruling rseq out while debugging). */
		p->owner = RSK_OWNER_NONE;
		p->reason = "disabled by RSEQKIT_DISABLE=1";
		return;
	}
	/* Always our own area now; the variable stays accepted. */
	if (!rsk_env_bool_("RSEQKIT_OWN_AREA", 1))
		warn_env("RSEQKIT_OWN_AREA", getenv("RSEQKIT_OWN_AREA"),
			 "glibc's reserved area is no longer registered: glibc would abort the process "
			 "when it fails to register a new thread; using rseqkit's own area");
	if (&__rseq_size != NULL && __rseq_size != 0) {
		p->owner = RSK_OWNER_LIBC;
		/* glibc allocates at least 32 bytes even when it reports 20. */
		p->registered_size = max_u(__rseq_size, RSK_ABI_LEGACY_LEN);
		p->reason = "registered by libc";
		*offset = __rseq_offset;
		return;
	}
	r = rsk_sys_rseq(NULL, 0, 0);
	if (r == 0 || errno != EINVAL) {
		/* EINVAL is the answer of a kernel that has rseq. */
		p->owner = RSK_OWNER_NONE;
		p->error = r == 0 ? EINVAL : errno;
		p->reason = p->error == ENOSYS ?
			"rseq(2) not implemented (old kernel, valgrind, qemu-user or a seccomp filter)" :
		p->error == EPERM ? "rseq(2) denied (EPERM: seccomp filter)" :
				    "rseq(2) probe failed";
		return;
	}
	p->owner = RSK_OWNER_LIBRARY;
	p->own_area = 1;
	unsigned align = max_u(p->kernel_align, RSK_ABI_LEGACY_ALIGN);
	p->registered_size = max_u(p->feature_size, RSK_ABI_LEGACY_LEN);
	p->reason = "registered by rseqkit (own area)";
	if (align > _Alignof(struct own_area)) {
		p->owner = RSK_OWNER_NONE;
		p->error = EINVAL;
		p->reason = "kernel asks for a more aligned rseq area than rseqkit has";
		return;
	}
	if (p->registered_size > OWN_AREA_SPACE) {
		/* More than follows the head: the original 32-byte form, which
		 * every kernel accepts, rather than overlap the next variable. */
		p->registered_size = RSK_ABI_LEGACY_LEN;
		p->reason = "registered by rseqkit (own area, 32 bytes: the kernel's feature size "
			    "exceeds the space rseqkit has)";
	}
	*offset = (char *)&own_area.area - (char *)thread_pointer();
	if (!own_area_is_static(*offset)) {
		p->owner = RSK_OWNER_NONE;
		p->reason = "rseqkit's own area is in dynamic TLS (dlopen'ed): no fixed offset";
		return;
	}
}

static void ctor_init(void) __attribute__((constructor));
static void ctor_init(void)
{
	rsk_init_once();
}

/*
 * When a dlopen'ed copy of the library is unloaded, no descriptor of the
 * object containing it may stay armed in any thread.  Copies in the main
 * program or loaded with it (static TLS) are only "unloaded" at exit,
 * while other threads may still be inside their sections: left alone.
 */
static void dtor_fini(void) __attribute__((destructor));
static void dtor_fini(void)
{
	struct object_range r;
	sigset_t saved;

	if (!rsk_process.initialised || !rsk_process.unloadable)
		return;
	if (object_of((const void *)&rsk_process, &r) && !r.is_main)
		clear_descriptors(r.lo, r.hi);
	registry_take(&saved);
	if (exit_key_live) {
		/* Our destructor is about to be unmapped: glibc must not call
		 * it.  Threads registered by us stay registered until they exit
		 * (the kernel drops the registration with the thread). */
		pthread_key_delete(exit_key);
		exit_key_live = 0;
	}
	registry_drop(&saved);
}

void rsk_init_once(void)
{
	struct rsk_process *p = &rsk_process;
	ptrdiff_t offset;
	int cid;
	sigset_t all, saved;
	long mb;

	if (__atomic_load_n(&p->initialised, __ATOMIC_ACQUIRE))
		return;
	/* The fork handlers first (see internal.h), and outside init_lock:
	 * pthread_atfork() takes the C library's fork-handler lock, which a
	 * fork() in another thread holds while it runs the prepare handlers
	 * in musl and older glibc, and the gates' prepare handler waits for
	 * init_lock (a concurrent first call finishes before the fork). */
	rsk_progress_init_();
	/* No handler of this thread may run into the lock it holds. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &saved);
	pthread_mutex_lock(&init_lock);
	if (p->initialised) {
		pthread_mutex_unlock(&init_lock);
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
		return;
	}
	int saved_errno = errno;
	p->possible_cpus = rsk_read_possible_cpus();
	p->feature_size = kernel_auxv(RSK_ABI_AT_RSEQ_FEATURE_SIZE);
	p->kernel_align = kernel_auxv(RSK_ABI_AT_RSEQ_ALIGN);
	if (p->feature_size == 0) /* before 6.3: the original ABI */
		p->feature_size = RSK_ABI_ORIG_FEATURE_SIZE;
	if (p->kernel_align == 0)
		p->kernel_align = RSK_ABI_LEGACY_ALIGN;
	mb = syscall(SYS_membarrier, RSK_ABI_MEMBARRIER_CMD_QUERY, 0, 0);
	p->membarrier_rseq = mb > 0 && (mb & RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ);
	p->env_abort_limit = (unsigned)env_number("RSEQKIT_ABORT_LIMIT", 1, 1 << 30,
						  RSK_DEFAULT_ABORT_LIMIT);
	/* Everything a signal handler's first call may need, made now. */
	rsk_stats_init(p->possible_cpus);
	p->unloadable = !own_area_is_static((char *)&own_area.area - (char *)thread_pointer());
	if (pthread_key_create(&exit_key, thread_exit) == 0) {
		exit_key_live = 1;
#ifdef __GLIBC__
		exit_key_alloc_free = exit_key < 32;
#else
		exit_key_alloc_free = 1;
#endif
	}

	/* Publish the offset only once everything else is decided: the
	 * inline fast paths start using it as soon as it is nonzero. */
	offset = 0;
	decide_owner(p, &offset);
	if (rsk_env_bool_("RSEQKIT_CHECK_THREADS", 0)) {
		/* The user's word: check each operation's thread (see
		 * rsk_check_thread_()); sections are off, so that every
		 * operation comes to the out-of-line code that checks. */
		p->check_threads = 1;
		p->check_offset = p->owner != RSK_OWNER_NONE ? offset : 0;
		p->check_size = p->registered_size;
		if (p->owner != RSK_OWNER_NONE) {
			p->owner = RSK_OWNER_NONE;
			p->reason = "RSEQKIT_CHECK_THREADS=1: every operation checks its thread and "
				    "takes its slow path";
		}
	}
	cid = p->owner != RSK_OWNER_NONE && offset == (int)offset &&
	      p->feature_size >= RSK_ABI_OFF_MM_CID + 4 &&
	      p->registered_size >= RSK_ABI_OFF_MM_CID + 4;
	/* cid_ok is the offset itself where mm_cid is the kernel's: one word
	 * for rsk_mm_cid() to test (thread.h). */
	__atomic_store_n(&rsk_fast.cid_ok, cid ? (int)offset : 0, __ATOMIC_RELAXED);
	p->cid_for_structures = rsk_fast.cid_ok &&
				(p->owner == RSK_OWNER_LIBC || p->own_area);
	/* RSEQKIT_NO_SLICE=1: the user's word (and slice-bench's row without). */
	rsk_fast.slice_ok = !rsk_env_bool_("RSEQKIT_NO_SLICE", 0) && rsk_slice_offered_(p);
	rsk_debug_ = env_debug();
	/* The inline spinlock's one test: the slice region, or the checks. */
	rsk_fast.lock_slow = rsk_fast.slice_ok || (rsk_debug_ & RSK_DEBUG_SPINLOCK_) != 0;
	__atomic_store_n(&rsk_fast.area_offset, p->owner != RSK_OWNER_NONE ? offset : 0,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&p->initialised, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
	pthread_mutex_unlock(&init_lock);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

RSK_EXPORT int rsk_init(void)
{
	rsk_init_once();
	(void)rsk_thread_ensure(); /* and the calling thread is known */
	return 0;
}

/*
 * Decide the calling thread's state, registering it if that is our job.
 * A signal handler may run this too, in the middle of an interrupted run
 * of it on the same thread: each step finds what the other did and gives
 * the same answer (the final state is written last, by both).
 */
static enum rsk_thread_state thread_activate(void)
{
	struct rsk_process *p = &rsk_process;
	struct rsk_abi_area *area = rsk_area();
	int err = 0;

	RSK_INJECT_ACTIVATION(1);
	if (p->owner == RSK_OWNER_NONE || area == NULL) {
		self.error = p->error ? p->error : ENOSYS;
		return self.state = RSK_THREAD_FAILED;
	}
	if (p->own_area && area != &own_area.area) {
		/* Our TLS block is not at the process-wide offset in this
		 * thread (a dlopen'ed copy's dynamic TLS): no fast path. */
		self.error = EINVAL;
		return self.state = RSK_THREAD_FAILED;
	}
	if (rsk_area_cpu_id(area) < 0) {
		if (p->owner == RSK_OWNER_LIBC) {
			/* glibc tried in this thread and failed (cpu_id == -2). */
			self.error = EINVAL;
			return self.state = RSK_THREAD_FAILED;
		}
		RSK_INJECT_ACTIVATION(2);
		/* EBUSY: this very area is registered already - by a handler
		 * that interrupted us here (the kernel keeps one registration
		 * per thread, so nobody else can have made it). */
		if (rsk_sys_rseq(area, p->registered_size, 0) != 0 && errno != EBUSY)
			err = errno;
		RSK_INJECT_ACTIVATION(3);
	}
	if (err != 0) {
		self.error = err;
		return self.state = RSK_THREAD_FAILED;
	}
	/* Registered (by libc, by us, or inherited through fork()): a new
	 * registration may offer the time-slice extension anew. */
	rsk_slice_forget_();
	if (p->owner == RSK_OWNER_LIBRARY)
		self.own_registered = 1;
	record_thread(area);
	RSK_INJECT_ACTIVATION(5);
	self.error = 0;
	return self.state = RSK_THREAD_ACTIVE;
}

enum rsk_thread_state rsk_thread_ensure(void)
{
	if (__builtin_expect(rsk_process.check_threads, 0))
		rsk_check_thread_(); /* before `self`, which is TLS */
	if (__builtin_expect(self.state != RSK_THREAD_NEW, 1))
		return self.state;
	rsk_init_once();
	int saved_errno = errno;
	enum rsk_thread_state st = thread_activate();
	errno = saved_errno;
	return st;
}

/* ---- RSEQKIT_CHECK_THREADS ---- */

/* Append the decimal digits of v to buf at n (no stdio: the thread may
 * have no usable TLS, which printf's locale look-ups read). */
static size_t put_decimal(char *buf, size_t n, size_t cap, unsigned long v)
{
	char digits[24];
	size_t k = 0;

	do
		digits[k++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (k > 0 && n < cap)
		buf[n++] = digits[--k];
	return n;
}

static size_t put_text(char *buf, size_t n, size_t cap, const char *text)
{
	while (*text != '\0' && n < cap)
		buf[n++] = *text++;
	return n;
}

/*
 * Report an unsupported thread and stop the process with SIGABRT, as
 * abort() would: an operation of that thread could already have lost
 * another thread's update, and returning an error would let a caller that
 * ignores it go on losing them.  Only system calls, which touch no TLS
 * when they succeed (abort() reads the thread's descriptor).
 */
static __attribute__((noreturn)) void check_failed(const char *what, int cpu)
{
	long tid = syscall(SYS_gettid);
	uint64_t abrt = (uint64_t)1 << (SIGABRT - 1);
	char msg[640];
	size_t n = 0, cap = sizeof(msg);

	n = put_text(msg, n, cap, "rseqkit: RSEQKIT_CHECK_THREADS: thread ");
	n = put_decimal(msg, n, cap, (unsigned long)tid);
	n = put_text(msg, n, cap, " is not one rseqkit supports: ");
	n = put_text(msg, n, cap, what);
	if (cpu >= 0) {
		n = put_decimal(msg, n, cap, (unsigned long)cpu);
		n = put_text(msg, n, cap, ", but the kernel has not registered that area for this thread");
	}
	n = put_text(msg, n, cap,
		     " (a thread made with clone(2) directly, whose thread pointer and TLS libc did not "
		     "set up?).  Only threads created by a libc thread API may use rseqkit: see "
		     "rseqkit(7), Threads.\n");
	(void)!write(STDERR_FILENO, msg, n);
	syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &abrt, NULL, sizeof(abrt));
	syscall(SYS_tgkill, (long)getpid(), tid, SIGABRT);
	syscall(SYS_exit_group, 128 + SIGABRT); /* a handler of SIGABRT returned */
	__builtin_unreachable();
}

/*
 * RSEQKIT_CHECK_THREADS=1: whether the calling thread is one rseqkit
 * supports, one whose thread pointer and TLS libc set up.  The inline
 * fast paths cannot tell: in a TLS block libc did not set up (a thread
 * made with clone(2) and CLONE_SETTLS to a zeroed block) the rseq area at
 * the process-wide offset reads cpu_id 0, a valid CPU, and the thread
 * runs sections the kernel does not protect, losing other threads'
 * updates without a sign.  This mode turns the sections off (the offset
 * the fast paths read is 0), so every operation reaches the out-of-line
 * code, which calls this first, before it touches TLS of its own.
 *
 * Two tests, neither using TLS (errno included) until the first passed:
 *  - x86: the word at %fs:0 (%gs:0), the thread control block's pointer
 *    to itself that the ABI requires, is 0 in a zeroed block;
 *  - everywhere: an area that reads as registered (cpu_id >= 0) must be
 *    the thread's registration.  rseq(2) asked to unregister that area
 *    with a signature nobody registers with answers EPERM when the
 *    kernel has this very area (and length) registered for the calling
 *    thread, and changes nothing; EINVAL when it has another area or
 *    none.  Any other answer (ENOSYS under a filter) tells nothing.
 * One system call per operation: this is a mode for finding such
 * threads, not for production.
 */
void rsk_check_thread_(void)
{
	const struct rsk_process *p = &rsk_process;
	const struct rsk_abi_area *area;
	int32_t cpu;
	int saved_errno;
	long r;

#if defined(__x86_64__) || defined(__i386__)
	if (rsk_arch_thread_pointer() == NULL)
		check_failed("its thread pointer (the word at the start of its thread control block) "
			     "is 0",
			     -1);
#endif
	if (p->check_offset == 0)
		return; /* no rseq: no area the fast paths could misread */
	area = (const struct rsk_abi_area *)(const void *)((const char *)rsk_arch_thread_pointer() +
							    p->check_offset);
	cpu = rsk_area_cpu_id(area);
	if (cpu < 0)
		return; /* reads as unregistered: no section would run */
	saved_errno = errno;
	r = syscall(RSK_ARCH_NR_RSEQ, area, p->check_size, RSK_ABI_FLAG_UNREGISTER,
		    RSK_ARCH_SIGNATURE ^ 1u);
	if (r != 0 && errno == EINVAL)
		check_failed("its rseq area (at the process-wide offset from the thread pointer) "
			     "reads cpu_id ",
			     cpu);
	errno = saved_errno;
}

RSK_EXPORT int rsk_index_slow(enum rsk_index_mode mode)
{
	struct rsk_abi_area *area;
	int32_t cpu;

	/* An unknown mode indexes nothing: -1, as the inline rsk_index()
	 * (which calls here for it), before registering anything. */
	if (mode != RSK_INDEX_CPU && mode != RSK_INDEX_CID)
		return -1;
	if (rsk_thread_ensure() != RSK_THREAD_ACTIVE || (area = rsk_area()) == NULL)
		return -1;
	cpu = rsk_area_cpu_id(area);
	if (cpu < 0)
		return -1;
	if (mode == RSK_INDEX_CID)
		return rsk_fast.cid_ok ? (int)__atomic_load_n(&area->mm_cid, __ATOMIC_RELAXED) : -1;
	return cpu;
}

RSK_EXPORT int rsk_register(void)
{
	enum rsk_thread_state st = rsk_thread_ensure();
	struct rsk_abi_area *area = rsk_area();

	/* Also when our registration vanished behind our back (someone
	 * called rseq(2) to unregister): register again. */
	if (st == RSK_THREAD_OPTED_OUT ||
	    (st == RSK_THREAD_ACTIVE && rsk_process.owner == RSK_OWNER_LIBRARY && area != NULL &&
	     rsk_area_cpu_id(area) < 0)) {
		int saved_errno = errno;
		st = thread_activate();
		errno = saved_errno;
	}
	if (st != RSK_THREAD_ACTIVE)
		return -(self.error ? self.error : ENOSYS);
	/* One instruction's worth for a handler of this thread. */
	__atomic_add_fetch(&self.count, 1, __ATOMIC_RELAXED);
	return 0;
}

RSK_EXPORT int rsk_unregister(unsigned flags)
{
	if (flags & ~RSK_UNREGISTER_FORCE)
		return -EINVAL;
	rsk_thread_ensure();
	if (flags & RSK_UNREGISTER_FORCE) {
		__atomic_store_n(&self.count, 0, __ATOMIC_RELAXED);
	} else {
		int n = __atomic_load_n(&self.count, __ATOMIC_RELAXED);
		do {
			if (n == 0)
				return -EINVAL;
		} while (!__atomic_compare_exchange_n(&self.count, &n, n - 1, 0, __ATOMIC_RELAXED,
						      __ATOMIC_RELAXED));
		if (n - 1 > 0)
			return 0;
	}
	if (self.state == RSK_THREAD_ACTIVE && self.own_registered) {
		int err = unregister_self();
		if (err != 0)
			return -err;
		self.own_registered = 0;
		self.state = RSK_THREAD_OPTED_OUT;
	}
	return 0;
}

/* Clear the calling thread's pointer, and every recorded thread's pointers
 * into the object that contains `addr`. */
static void prepare_unload(const void *addr)
{
	struct rsk_abi_area *area = rsk_area();
	struct object_range r;

	/* The calling thread runs no section now: its pointer can go,
	 * whoever armed it. */
	if (area != NULL)
		__atomic_store_n(&area->rseq_cs, 0, __ATOMIC_RELAXED);
	rsk_init_once();
	if (addr != NULL && object_of(addr, &r) && !r.is_main)
		clear_descriptors(r.lo, r.hi);
}

RSK_EXPORT void rsk_prepare_unload_object(const void *addr)
{
	prepare_unload(addr);
}

/* The caller's object, from the return address: wrong when the call was
 * compiled as a tail call (rsk_prepare_unload(3) says so). */
RSK_EXPORT __attribute__((noinline)) void rsk_prepare_unload(void)
{
	prepare_unload(__builtin_extract_return_addr(__builtin_return_address(0)));
}

RSK_EXPORT const char *rsk_owner_name(enum rsk_owner owner)
{
	switch (owner) {
	case RSK_OWNER_LIBC:
		return "libc";
	case RSK_OWNER_LIBRARY:
		return "library";
	default:
		return "none";
	}
}

RSK_EXPORT int rsk_status(struct rsk_status *st)
{
	const struct rsk_process *p = &rsk_process;

	if (st == NULL)
		return -EINVAL;
	rsk_init_once();
	memset(st, 0, sizeof(*st));
	st->available = p->owner != RSK_OWNER_NONE;
	st->reason = p->reason;
	st->error = p->error;
	st->owner = p->owner;
	st->feature_size = p->feature_size;
	st->kernel_align = p->kernel_align;
	st->registered_size = st->available ? p->registered_size : 0;
	st->mm_cid_available = rsk_fast.cid_ok != 0;
	st->node_id_available = st->available && p->feature_size >= RSK_ABI_OFF_NODE_ID + 4;
	st->membarrier_rseq = p->membarrier_rseq != 0;
	st->possible_cpus = p->possible_cpus;
	st->thread_registered = rsk_thread_ensure() == RSK_THREAD_ACTIVE;
	st->thread_count = self.count;
	st->cid_structures = rsk_process.cid_for_structures != 0;
	st->slice_ext_available = rsk_slice_available();
	return 0;
}
