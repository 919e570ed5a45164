/* SPDX-License-Identifier: MIT */
/*
 * Time-slice extension (see slice.h): whether the kernel offers it to
 * this process, enabling it per thread, and the yield that ends a granted
 * region.  The inline begin and end are in <rseqkit/slice.h>.
 *
 * The kernel's word is the area's flags: it sets SLICE_EXT_AVAILABLE when
 * it registers a V2 area (length > 32) with the feature on, and
 * SLICE_EXT_ENABLED when the thread enables it (prctl 79).  The inline
 * begin tests ENABLED and comes here when it is clear: the first time in a
 * thread (enable it now), and after a failed attempt (remembered in
 * slice_failed, so that the prctl runs once per thread, not per region).
 */
#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "internal.h"

/* Set when the prctl failed in this thread (its registration changed
 * since: rsk_slice_forget_() clears it). */
static __thread int slice_failed;

/* At initialisation: does the kernel offer the extension to the areas this
 * process registers?  A feature size that covers slice_ctrl (7.0+), a
 * registration longer than 32 bytes (the kernel offers it to V2
 * registrations only: glibc 2.36-2.40 register 32), and the prctl
 * answering (EINVAL before 7.0, ENOTSUPP when configured out).  Switched
 * off at boot (rseq_slice_ext=0), GET still answers: the flags word of a
 * registered area says it then, see rsk_slice_available().  (RSEQKIT_NO_SLICE=1
 * is the caller's to check: runtime.c reads the environment.) */
int rsk_slice_offered_(const struct rsk_process *p)
{
	int saved = errno, ok;

	if (p->owner == RSK_OWNER_NONE || p->feature_size < RSK_ABI_SLICE_FEATURE_SIZE ||
	    p->registered_size <= RSK_ABI_LEGACY_LEN)
		return 0;
	ok = prctl(RSK_ABI_PR_RSEQ_SLICE_EXTENSION, RSK_ABI_PR_RSEQ_SLICE_EXTENSION_GET, 0, 0, 0) >= 0;
	errno = saved;
	return ok;
}

void rsk_slice_forget_(void)
{
	slice_failed = 0;
}

static uint32_t area_flags(const struct rsk_abi_area *area)
{
	return __atomic_load_n(&area->flags, __ATOMIC_RELAXED);
}

RSK_EXPORT bool rsk_slice_available(void)
{
	struct rsk_abi_area *area;

	rsk_init_once();
	if (!rsk_fast.slice_ok)
		return false;
	/* A registered thread knows for sure: the kernel set the flag. */
	if (rsk_thread_ensure() == RSK_THREAD_ACTIVE && (area = rsk_area()) != NULL &&
	    rsk_area_cpu_id(area) >= 0)
		return (area_flags(area) & RSK_ABI_FLAG_SLICE_EXT_AVAILABLE) != 0;
	return true;
}

RSK_EXPORT int rsk_slice_enable(void)
{
	struct rsk_abi_area *area;
	int saved = errno, err = 0;

	rsk_init_once();
	if (!rsk_fast.slice_ok)
		return -EOPNOTSUPP;
	if (rsk_thread_ensure() != RSK_THREAD_ACTIVE || (area = rsk_area()) == NULL ||
	    rsk_area_cpu_id(area) < 0)
		return -ENXIO;
	if (area_flags(area) & RSK_ABI_FLAG_SLICE_EXT_ENABLED)
		return 0;
	if (!(area_flags(area) & RSK_ABI_FLAG_SLICE_EXT_AVAILABLE))
		err = EOPNOTSUPP; /* switched off at boot */
	else if (prctl(RSK_ABI_PR_RSEQ_SLICE_EXTENSION, RSK_ABI_PR_RSEQ_SLICE_EXTENSION_SET,
		       RSK_ABI_PR_RSEQ_SLICE_EXT_ENABLE, 0, 0) != 0)
		/* ENOTSUPP (524, kernel-internal) and EINVAL say the same */
		err = errno == ENXIO ? ENXIO : EOPNOTSUPP;
	errno = saved;
	return -err;
}

/* rsk_slice_begin() in a thread that has not enabled the extension. */
RSK_EXPORT rsk_slice_t rsk_slice_begin_slow_(void)
{
	if (slice_failed)
		return RSK_SLICE_NONE;
	if (rsk_slice_enable() != 0) {
		slice_failed = 1;
		return RSK_SLICE_NONE;
	}
	return rsk_slice_request_(rsk_arch_area_of(rsk_area_offset_()));
}

/* The region ended with the extension granted: give the CPU back, as the
 * kernel asks (it would take it at the grant's end anyway). */
RSK_EXPORT void rsk_slice_yield_(void)
{
	int saved = errno;

	(void)syscall(RSK_ABI_NR_RSEQ_SLICE_YIELD);
	errno = saved;
}
