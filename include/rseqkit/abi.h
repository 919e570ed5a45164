/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/abi.h - the kernel's restartable-sequences ABI, as rseqkit uses it.
 *
 * Distributions ship <linux/rseq.h> of whatever age their kernel headers
 * are (Debian 12: 6.1, without node_id, mm_cid or the auxv keys), so the
 * library carries its own copy of the facts, under its own names so that it
 * never clashes with the uapi header, glibc's <sys/rseq.h> or librseq.
 */
#ifndef RSEQKIT_ABI_H
#define RSEQKIT_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* struct rseq, the per-thread area shared with the kernel. */
struct rsk_abi_area {
	uint32_t cpu_id_start;	/* 0: always a valid CPU (0 when unregistered) */
	uint32_t cpu_id;	/* 4: current CPU, or one of RSK_ABI_CPU_ID_* */
	uint64_t rseq_cs;	/* 8: active descriptor (32-bit: low word) */
	uint32_t flags;		/* 16: deprecated, keep 0 */
	uint32_t node_id;	/* 20: NUMA node (feature size >= 24, 6.3) */
	uint32_t mm_cid;	/* 24: concurrency id (feature size >= 28, 6.3) */
	uint32_t slice_ctrl;	/* 28: time-slice extension (feature size >= 33, 7.0):
				 * byte 28 request (user), byte 29 granted (kernel) */
} __attribute__((aligned(32)));

/* Field offsets, for asm strings (must match the struct above). */
#define RSK_ABI_OFF_CPU_ID_START 0
#define RSK_ABI_OFF_CPU_ID	 4
#define RSK_ABI_OFF_RSEQ_CS	 8
#define RSK_ABI_OFF_FLAGS	 16
#define RSK_ABI_OFF_NODE_ID	 20
#define RSK_ABI_OFF_MM_CID	 24
#define RSK_ABI_OFF_SLICE_CTRL	 28
#define RSK_ABI_OFF_SLICE_REQUEST 28 /* u8: set by the thread to ask */
#define RSK_ABI_OFF_SLICE_GRANTED 29 /* u8: set by the kernel when it grants */

/* Values of cpu_id that are not CPUs. */
#define RSK_ABI_CPU_ID_UNINITIALIZED	   (-1) /* never registered, or unregistered */
#define RSK_ABI_CPU_ID_REGISTRATION_FAILED (-2) /* glibc's mark: it tried and failed */

/* struct rseq_cs, a critical-section descriptor (32-byte aligned). */
struct rsk_abi_cs {
	uint32_t version;	     /* 0 */
	uint32_t flags;		     /* 0 */
	uint64_t start_ip;
	uint64_t post_commit_offset; /* length of [start_ip, commit end) */
	uint64_t abort_ip;	     /* preceded by the 4-byte signature */
} __attribute__((aligned(32)));

/* rseq(2) flags. */
#define RSK_ABI_FLAG_UNREGISTER 1

/* Registration lengths: the original (and always accepted) form. */
#define RSK_ABI_LEGACY_LEN   32
#define RSK_ABI_LEGACY_ALIGN 32

/* getauxval() keys (absent before 6.3: getauxval then returns 0). */
#define RSK_ABI_AT_RSEQ_FEATURE_SIZE 27
#define RSK_ABI_AT_RSEQ_ALIGN	     28
/* Feature size of the 4.18 ABI, reported when AT_RSEQ_FEATURE_SIZE is absent. */
#define RSK_ABI_ORIG_FEATURE_SIZE 20

/* membarrier(2) commands used by the fence (5.10+). */
#define RSK_ABI_MEMBARRIER_CMD_QUERY				 0
#define RSK_ABI_MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ		 (1 << 7)
#define RSK_ABI_MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ (1 << 8)
#define RSK_ABI_MEMBARRIER_CMD_FLAG_CPU				 1

/* Time-slice extension (Linux 7.0, CONFIG_RSEQ_SLICE_EXTENSION; see the
 * kernel's Documentation/userspace-api/rseq.rst).  Offered only to a V2
 * registration (length > 32, kernel feature size >= 33).  The kernel
 * writes the area's flags word at registration and on the prctl: */
#define RSK_ABI_FLAG_SLICE_EXT_AVAILABLE (1u << 4) /* the kernel offers it here */
#define RSK_ABI_FLAG_SLICE_EXT_ENABLED	 (1u << 5) /* this thread enabled it */
#define RSK_ABI_SLICE_FEATURE_SIZE	 33	    /* feature size that covers slice_ctrl */
/* prctl(PR_RSEQ_SLICE_EXTENSION, GET or SET, ENABLE or 0, 0, 0). */
#define RSK_ABI_PR_RSEQ_SLICE_EXTENSION	    79
#define RSK_ABI_PR_RSEQ_SLICE_EXTENSION_GET 1
#define RSK_ABI_PR_RSEQ_SLICE_EXTENSION_SET 2
#define RSK_ABI_PR_RSEQ_SLICE_EXT_ENABLE    1
/* rseq_slice_yield(2): the same number on every architecture rseqkit
 * supports (x86-64, i386, arm, arm64, powerpc, s390, riscv). */
#define RSK_ABI_NR_RSEQ_SLICE_YIELD 471

#ifdef __cplusplus
}
#endif

#endif /* RSEQKIT_ABI_H */
