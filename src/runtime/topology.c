/* SPDX-License-Identifier: MIT */
/*
 * CPU topology.  Per-CPU arrays are sized from the *possible* CPU mask:
 * sysconf(_SC_NPROCESSORS_*) and the online mask undercount (rr reports one
 * CPU, hotplug adds CPUs later, some kernels number CPUs beyond the count).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "internal.h"

/* The bits of the kernel's CPU masks (nr_cpu_ids rounded up to a whole
 * long, or NR_CPUS on old kernels), an upper bound of every CPU number:
 * sched_getaffinity(2) refuses a buffer smaller than that and returns the
 * bytes it filled.  0 if it cannot tell.  Called once, under the
 * initialisation lock (a static buffer: no allocation on a path a signal
 * handler's first call can take). */
static int affinity_mask_bits(void)
{
	static unsigned long mask[((size_t)1 << 17) / sizeof(unsigned long)];

	for (size_t size = 128; size <= sizeof(mask); size *= 2) {
		long got = syscall(SYS_sched_getaffinity, 0, size, mask);

		if (got > 0)
			return (int)got * 8;
		if (errno != EINVAL)
			return 0;
	}
	return 0;
}

int rsk_read_possible_cpus(void)
{
	char buf[4096];
	ssize_t n = -1;
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);
	int bound = 0;

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n > 0) {
		buf[n] = '\0';
		bound = rsk_cpulist_parse(buf, NULL, 0);
	}
	if (bound <= 0) {
		/* No sysfs (chroot, sandbox).  The structures' sections index
		 * their parts unchecked (percpu.h, "Guard parts"), so the count
		 * must not be below any CPU number the kernel can give: the
		 * kernel's own mask size bounds them (the configured count
		 * alone can undercount). */
		long conf = sysconf(_SC_NPROCESSORS_CONF);
		int mask = affinity_mask_bits();
		bound = conf > 0 ? (int)conf : 1;
		if (mask > bound)
			bound = mask;
	}
	return bound;
}

RSK_EXPORT int rsk_possible_cpus(void)
{
	rsk_init_once();
	return rsk_process.possible_cpus;
}

/* getcpu(2) without glibc's wrapper (absent before 2.29). */
static int sys_getcpu(unsigned *cpu, unsigned *node)
{
	return (int)syscall(SYS_getcpu, cpu, node, NULL);
}

RSK_EXPORT int rsk_cpu_slow(void)
{
	struct rsk_abi_area *area;
	int cpu;

	if (rsk_thread_ensure() == RSK_THREAD_ACTIVE && (area = rsk_area()) &&
	    (cpu = rsk_area_cpu_id(area)) >= 0)
		return cpu;
	cpu = sched_getcpu();
	if (cpu < 0) {
		unsigned c;
		cpu = sys_getcpu(&c, NULL) == 0 ? (int)c : -1;
	}
	return cpu;
}

RSK_EXPORT int rsk_mm_cid_slow(void)
{
	struct rsk_abi_area *area;

	if (rsk_thread_ensure() == RSK_THREAD_ACTIVE && rsk_fast.cid_ok &&
	    (area = rsk_area()) && rsk_area_cpu_id(area) >= 0)
		return (int)__atomic_load_n(&area->mm_cid, __ATOMIC_RELAXED);
	return rsk_cpu_slow();
}

RSK_EXPORT bool rsk_mm_cid_available(void)
{
	rsk_init_once();
	return rsk_fast.cid_ok != 0;
}

RSK_EXPORT bool rsk_node_id_available(void)
{
	rsk_init_once();
	return rsk_process.owner != RSK_OWNER_NONE &&
	       rsk_process.feature_size >= RSK_ABI_OFF_NODE_ID + 4;
}

static int node_slow(void)
{
	unsigned cpu, node;

	return sys_getcpu(&cpu, &node) == 0 ? (int)node : -1;
}

RSK_EXPORT int rsk_node(void)
{
	struct rsk_abi_area *area;

	if (rsk_node_id_available() && rsk_thread_ensure() == RSK_THREAD_ACTIVE &&
	    (area = rsk_area()) && rsk_area_cpu_id(area) >= 0)
		return (int)__atomic_load_n(&area->node_id, __ATOMIC_RELAXED);
	return node_slow();
}

/* ---- memory nodes and the node of each CPU (the per-CPU memory pools' NUMA
 * binding, alloc/percpu_memory.c) ---- */

/* The entries below nhas of a sysfs list such as "0-3,8" at path, as bits
 * of has[] (nhas bits, a multiple of RSK_LONG_BITS), and their number; 0
 * (no bits) if the file cannot be read or is malformed. */
int rsk_count_list_(const char *path, unsigned long *has, int nhas)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t len;

	memset(has, 0, (size_t)nhas / 8);
	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = 0;
	if (rsk_cpulist_parse(buf, has, nhas) < 0) {
		memset(has, 0, (size_t)nhas / 8);
		return 0;
	}
	for (int w = 0; w < nhas / RSK_LONG_BITS; w++)
		n += __builtin_popcountl(has[w]);
	return n;
}

int rsk_node_of_cpu_(int cpu)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int node = -1;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d", cpu);
	d = opendir(path);
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, "node", 4) == 0 && e->d_name[4] >= '0' && e->d_name[4] <= '9') {
			node = (int)strtol(e->d_name + 4, NULL, 10);
			break;
		}
	closedir(d);
	return node;
}
