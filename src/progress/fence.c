/* SPDX-License-Identifier: MIT */
/*
 * Fences: after rsk_fence_cpu(), rsk_fence_all() or a gate's close, no
 * section of this process that began before is still running on the
 * CPU(s): membarrier(2)'s RSEQ command where the kernel has it, else a
 * migration of the calling thread onto each CPU in turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "progress_internal.h"

enum { MB_UNKNOWN = 0, MB_READY = 1, MB_NONE = -1 };
static int membarrier_state;

/* Register for the RSEQ membarrier once; remember whether it works. */
static int membarrier_ready(void)
{
	int st = __atomic_load_n(&membarrier_state, __ATOMIC_ACQUIRE);

	if (st == MB_UNKNOWN) {
		st = rsk_process.membarrier_rseq &&
				     sys_membarrier(RSK_ABI_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
						    0, 0) == 0 ?
			     MB_READY :
			     MB_NONE;
		__atomic_store_n(&membarrier_state, st, __ATOMIC_RELEASE);
	}
	return st == MB_READY;
}

static int membarrier_fence(int cpu)
{
	if (cpu >= 0)
		return (int)sys_membarrier(RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
					   RSK_ABI_MEMBARRIER_CMD_FLAG_CPU, cpu);
	return (int)sys_membarrier(RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

/* The online CPUs (all possible ones if sysfs cannot tell). */
static void online_cpus(cpu_set_t *set, size_t size, int ncpu)
{
	char buf[512];
	ssize_t n = -1;
	int fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	CPU_ZERO_S(size, set);
	if (n > 0 && n < (ssize_t)sizeof(buf) - 1) {
		buf[n] = '\0';
		/* A cpu_set_t is a bitmap of unsigned longs (<sched.h>). */
		if (rsk_cpulist_parse(buf, (unsigned long *)(void *)set, ncpu) >= 0 &&
		    CPU_COUNT_S(size, set) > 0)
			return;
	}
	for (int c = 0; c < ncpu; c++)
		CPU_SET_S(c, size, set);
}

/*
 * Add to `mask` every CPU some thread of this process may run on (their
 * affinity; without /proc, every CPU of `fallback`).  tmp: scratch set.
 */
static void threads_cpus(cpu_set_t *mask, cpu_set_t *tmp, const cpu_set_t *fallback, size_t size)
{
	char buf[1024];
	long n;
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		CPU_OR_S(size, mask, mask, fallback);
		return;
	}
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
			unsigned short reclen;
			const char *name = buf + off + 19;
			long tid = 0;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			for (const char *p = name; *p >= '0' && *p <= '9'; p++)
				tid = tid * 10 + (*p - '0');
			if (tid > 0) {
				if (sched_getaffinity((pid_t)tid, size, tmp) == 0)
					CPU_OR_S(size, mask, mask, tmp);
				else if (errno != ESRCH)
					CPU_OR_S(size, mask, mask, fallback);
			}
			if (reclen == 0)
				break;
			off += reclen;
		}
	}
	if (n < 0)
		CPU_OR_S(size, mask, mask, fallback);
	close(fd);
}

/*
 * Fallback fence: run on each CPU of [first, last] in turn.  Being
 * scheduled on a CPU means whatever thread ran there was preempted, and a
 * preempted section restarts.  An offline CPU, and a CPU where no thread
 * of ours may run, need nothing; one we cannot run on otherwise is not
 * fenced: -ENXIO (after fencing the others).  The caller's affinity is
 * restored afterwards.  No malloc: the CPU sets are on the stack, or
 * mapped for machines with more than 1024 CPUs.
 */
int rsk_fence_by_migration_(int first, int last)
{
	int ncpu = rsk_process.possible_cpus;
	size_t size = CPU_ALLOC_SIZE(ncpu), words = (size + sizeof(long) - 1) / sizeof(long);
	unsigned long stack[4][1024 / (8 * sizeof(long))];
	unsigned long *mem = stack[0];
	cpu_set_t *saved, *allowed, *online, *one;
	int err = 0, moved = 0, here;

	if (size > sizeof(stack[0])) {
		void *m = mmap(NULL, 4 * words * sizeof(long), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -ENXIO;
		mem = m;
	} else {
		words = sizeof(stack[0]) / sizeof(long);
	}
	saved = (cpu_set_t *)(void *)mem;
	allowed = (cpu_set_t *)(void *)(mem + words);
	online = (cpu_set_t *)(void *)(mem + 2 * words);
	one = (cpu_set_t *)(void *)(mem + 3 * words);
	if (sched_getaffinity(0, size, saved) != 0) {
		err = -ENXIO;
		goto out;
	}
	online_cpus(online, size, ncpu);
	CPU_ZERO_S(size, allowed);
	CPU_OR_S(size, allowed, allowed, saved);
	threads_cpus(allowed, one, online, size);
	here = sched_getcpu();
	for (int cpu = first; cpu <= last; cpu++) {
		if (!CPU_ISSET_S(cpu, size, online) || !CPU_ISSET_S(cpu, size, allowed))
			continue; /* nothing of ours can be running there */
		if (cpu == here)
			continue; /* we ran there: whatever ran there before was switched out */
		CPU_ZERO_S(size, one);
		CPU_SET_S(cpu, size, one);
		if (sched_setaffinity(0, size, one) != 0) {
			err = -ENXIO; /* a thread of ours may run there: say so */
			continue;
		}
		moved = 1;
		/* sched_setaffinity() migrates before returning; the yield
		 * makes sure we really were scheduled on the CPU. */
		sched_yield();
	}
	if (moved)
		sched_setaffinity(0, size, saved);
out:
	if (mem != stack[0])
		munmap(mem, 4 * words * sizeof(long));
	return err;
}

int rsk_fence_(int cpu)
{
	int err = -ENXIO, saved = errno;

	rsk_init_once();
	if (rsk_process.owner == RSK_OWNER_NONE)
		return 0; /* no thread of ours can be inside a section */
	if (membarrier_ready()) {
		/* On EPERM the registration was lost (not inherited?): again. */
		if (membarrier_fence(cpu) == 0 ||
		    (errno == EPERM &&
		     sys_membarrier(RSK_ABI_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0) == 0 &&
		     membarrier_fence(cpu) == 0)) {
			err = 0;
		} else if (errno == ENOSYS) {
			/* Denied from now on (a seccomp filter): migrate. */
			__atomic_store_n(&membarrier_state, MB_NONE, __ATOMIC_RELEASE);
		}
	}
	if (err != 0)
		err = cpu >= 0 ? rsk_fence_by_migration_(cpu, cpu) :
				 rsk_fence_by_migration_(0, rsk_process.possible_cpus - 1);
	if (err == 0) {
		rsk_count_fence_(cpu >= 0 ? cpu : 0);
		RSK_PROBE1(fence, cpu);
	}
	errno = saved;
	return err;
}

RSK_EXPORT int rsk_fence_cpu(int cpu)
{
	rsk_init_once();
	if (cpu < 0 || cpu >= rsk_process.possible_cpus)
		return -EINVAL;
	return rsk_fence_(cpu);
}

RSK_EXPORT int rsk_fence_all(void)
{
	return rsk_fence_(-1);
}
