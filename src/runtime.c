/* SPDX-License-Identifier: MIT */
/*
 * Process-wide initialisation and per-thread registration.
 *
 * Who registers: if glibc registered the thread (__rseq_size != 0) we adopt
 * its area - a second registration would fail, and glibc's sched_getcpu()
 * uses it too.  Otherwise rseqkit registers each thread itself on first
 * use: glibc's reserved area when glibc has one (it exists, at
 * __rseq_offset, even when glibc.pthread.rseq=0 stopped glibc from
 * registering it), else an area in our own TLS.  Either way every thread's
 * area sits at one fixed offset from the thread pointer, which is what
 * makes the inline fast path one load.
 *
 * The glibc symbols are weak references, not dlsym() look-ups: those fail
 * in static binaries.
 */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "internal.h"

extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
extern const unsigned int __rseq_flags __attribute__((weak));

RSK_EXPORT struct rsk_fast rsk_fast;
struct rsk_process rsk_process;

/* Our own area, for a libc without one (musl, glibc < 2.35).  64 bytes at
 * 64-byte alignment holds every feature size and alignment kernels ask for
 * (7.x: 33 bytes, 64-aligned).  The head keeps the area off the thread
 * pointer itself, where TLS variant I (riscv) would put it: offset 0 means
 * "not initialised" to the fast paths. */
struct own_area {
	unsigned char head[64];
	struct rsk_abi_area area;
	unsigned char tail[32];
} __attribute__((aligned(64)));
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
};
static __thread struct rsk_thread self;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static int exit_key_live;

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

/* Thread exit: undo a registration we made (pthread key destructor). */
static void thread_exit(void *unused)
{
	(void)unused;
	if (self.own_registered) {
		unregister_self();
		self.own_registered = 0;
	}
	self.state = RSK_THREAD_OPTED_OUT;
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

static void decide_owner(struct rsk_process *p, ptrdiff_t *offset)
{
	long r;

	const char *off = getenv("RSEQKIT_DISABLE");
	if (off != NULL && off[0] == '1') {
		/* The user's word: run every operation through the slow paths
		 * (for tests and for ruling rseq out while debugging). */
		p->owner = RSK_OWNER_NONE;
		p->reason = "disabled by RSEQKIT_DISABLE=1";
		return;
	}
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
	/* glibc without rseq support for the arch (2.36 on riscv) exports
	 * __rseq_offset 0 and reserves no area. */
	const char *own = getenv("RSEQKIT_OWN_AREA");
	p->own_area = &__rseq_offset == NULL || __rseq_offset == 0 ||
		      (own != NULL && own[0] == '1');
	if (p->own_area) {
		unsigned align = max_u(p->kernel_align, RSK_ABI_LEGACY_ALIGN);
		p->registered_size = max_u(p->feature_size, RSK_ABI_LEGACY_LEN);
		if (align > _Alignof(struct own_area) ||
		    p->registered_size > sizeof(struct own_area)) {
			p->owner = RSK_OWNER_NONE;
			p->error = EINVAL;
			p->reason = "kernel asks for a larger rseq area than rseqkit has";
			return;
		}
		*offset = (char *)&own_area.area - (char *)thread_pointer();
		if (!own_area_is_static(*offset)) {
			p->owner = RSK_OWNER_NONE;
			p->reason = "rseqkit's own area is in dynamic TLS (dlopen'ed): no fixed offset";
			return;
		}
		p->reason = "registered by rseqkit (own area)";
	} else {
		/* glibc's reserved area: 32 bytes, the form every kernel takes. */
		p->registered_size = RSK_ABI_LEGACY_LEN;
		*offset = __rseq_offset;
		p->reason = "registered by rseqkit (libc's area)";
	}
	if (pthread_key_create(&exit_key, thread_exit) == 0)
		exit_key_live = 1;
}

static void ctor_init(void) __attribute__((constructor));
static void ctor_init(void)
{
	rsk_init_once();
}

void rsk_init_once(void)
{
	struct rsk_process *p = &rsk_process;
	ptrdiff_t offset;
	long mb;

	if (__atomic_load_n(&p->initialised, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&init_lock);
	if (p->initialised) {
		pthread_mutex_unlock(&init_lock);
		return;
	}
	int saved_errno = errno;
	p->possible_cpus = rsk_read_possible_cpus();
	p->feature_size = (unsigned)getauxval(RSK_ABI_AT_RSEQ_FEATURE_SIZE);
	p->kernel_align = (unsigned)getauxval(RSK_ABI_AT_RSEQ_ALIGN);
	if (p->feature_size == 0) /* before 6.3: the original ABI */
		p->feature_size = RSK_ABI_ORIG_FEATURE_SIZE;
	if (p->kernel_align == 0)
		p->kernel_align = RSK_ABI_LEGACY_ALIGN;
	mb = syscall(SYS_membarrier, RSK_ABI_MEMBARRIER_CMD_QUERY, 0, 0);
	p->membarrier_rseq = mb > 0 && (mb & RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ);

	/* Publish the offset only once everything else is decided: the
	 * inline fast paths start using it as soon as it is nonzero. */
	offset = 0;
	decide_owner(p, &offset);
	rsk_fast.cid_ok = p->owner != RSK_OWNER_NONE &&
			  p->feature_size >= RSK_ABI_OFF_MM_CID + 4 &&
			  p->registered_size >= RSK_ABI_OFF_MM_CID + 4;
	p->cid_for_structures = rsk_fast.cid_ok &&
				(p->owner == RSK_OWNER_LIBC || p->own_area);
	__atomic_store_n(&rsk_fast.area_offset, p->owner != RSK_OWNER_NONE ? offset : 0,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&p->initialised, 1, __ATOMIC_RELEASE);
	errno = saved_errno;
	pthread_mutex_unlock(&init_lock);
}

RSK_EXPORT int rsk_init(void)
{
	rsk_init_once();
	return 0;
}

/* Decide the calling thread's state, registering it if that is our job. */
static enum rsk_thread_state thread_activate(void)
{
	struct rsk_process *p = &rsk_process;
	struct rsk_abi_area *area = rsk_area();

	self.error = 0;
	if (p->owner == RSK_OWNER_NONE || area == NULL) {
		self.error = p->error ? p->error : ENOSYS;
		return self.state = RSK_THREAD_FAILED;
	}
	if (rsk_area_cpu_id(area) >= 0) { /* libc's, or inherited */
		/* Library-owned: the registration is ours to undo.  glibc
		 * registers a new thread itself when its creator's area is
		 * registered (it copies the creator's state, even with
		 * glibc.pthread.rseq=0), so a thread created by one we
		 * registered arrives registered. */
		if (p->owner == RSK_OWNER_LIBRARY && !self.own_registered) {
			self.own_registered = 1;
			if (exit_key_live)
				pthread_setspecific(exit_key, &self);
		}
		return self.state = RSK_THREAD_ACTIVE;
	}
	if (p->owner == RSK_OWNER_LIBC) {
		/* glibc tried in this thread and failed (cpu_id == -2). */
		self.error = EINVAL;
		return self.state = RSK_THREAD_FAILED;
	}
	if (p->own_area && area != &own_area.area) {
		/* Our TLS block is not at the process-wide offset in this
		 * thread (a dlopen'ed copy's dynamic TLS): no fast path. */
		self.error = EINVAL;
		return self.state = RSK_THREAD_FAILED;
	}
	if (rsk_sys_rseq(area, p->registered_size, 0) != 0) {
		self.error = errno;
		return self.state = RSK_THREAD_FAILED;
	}
	self.own_registered = 1;
	if (exit_key_live)
		pthread_setspecific(exit_key, &self);
	return self.state = RSK_THREAD_ACTIVE;
}

enum rsk_thread_state rsk_thread_ensure(void)
{
	if (__builtin_expect(self.state != RSK_THREAD_NEW, 1))
		return self.state;
	rsk_init_once();
	int saved_errno = errno;
	enum rsk_thread_state st = thread_activate();
	errno = saved_errno;
	return st;
}

RSK_EXPORT int rsk_index_slow(enum rsk_index_mode mode)
{
	struct rsk_abi_area *area;
	int32_t cpu;

	if (rsk_thread_ensure() != RSK_THREAD_ACTIVE || (area = rsk_area()) == NULL)
		return -1;
	cpu = rsk_area_cpu_id(area);
	if (cpu < 0)
		return -1;
	if (mode == RSK_INDEX_CID)
		return rsk_fast.cid_ok ? (int)__atomic_load_n(&area->mm_cid, __ATOMIC_RELAXED) : -1;
	return mode == RSK_INDEX_CPU ? cpu : -1;
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
	self.count++;
	return 0;
}

RSK_EXPORT int rsk_unregister(unsigned flags)
{
	if (flags & ~RSK_UNREGISTER_FORCE)
		return -EINVAL;
	rsk_thread_ensure();
	if (flags & RSK_UNREGISTER_FORCE) {
		self.count = 0;
	} else {
		if (self.count == 0)
			return -EINVAL;
		if (--self.count > 0)
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

RSK_EXPORT void rsk_prepare_unload(void)
{
	struct rsk_abi_area *area = rsk_area();

	if (area != NULL)
		__atomic_store_n(&area->rseq_cs, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&init_lock);
	if (exit_key_live) {
		/* Our destructor is about to be unmapped: glibc must not call
		 * it.  Threads registered by us stay registered until they exit
		 * (the kernel drops the registration with the thread). */
		pthread_key_delete(exit_key);
		exit_key_live = 0;
	}
	pthread_mutex_unlock(&init_lock);
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
	/* Time-slice extension (7.0+) needs a feature size that covers
	 * slice_ctrl and a kernel built with it: PR_RSEQ_SLICE_EXTENSION (79)
	 * with PR_RSEQ_SLICE_EXTENSION_GET (1) answers instead of failing
	 * (EINVAL before 7.0, ENOTSUPP when configured out). */
	st->cid_structures = rsk_process.cid_for_structures != 0;
	st->slice_ext_available = st->available &&
				  p->feature_size > RSK_ABI_OFF_SLICE_CTRL + 4 &&
				  prctl(79, 1, 0, 0, 0) >= 0;
	return 0;
}
