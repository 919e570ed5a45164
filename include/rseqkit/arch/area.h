/* SPDX-License-Identifier: MIT */
/*
 * rseqkit/arch/area.h - how a thread reaches its rseq area: the
 * architecture's constants (RSK_ARCH_NAME, RSK_ARCH_SIGNATURE,
 * RSK_ARCH_NR_RSEQ), its thread pointer, and
 *
 *   rsk_arch_area_t   how code and sections name the area: its address,
 *                     or (x86-64, RSK_ARCH_HAS_AREA_OFFSET) its offset
 *                     from the thread pointer, reached through %fs;
 *   rsk_arch_area_t rsk_arch_area_of(ptrdiff_t offset_from_tp);
 *   uint32_t rsk_arch_area_u32(rsk_arch_area_t area, uint32_t field);
 *                     a 32-bit field at byte `field`, loaded afresh each
 *                     time (the kernel writes it);
 *   uint8_t rsk_arch_area_u8(rsk_arch_area_t area, uint32_t field);
 *   void rsk_arch_area_set_u8(rsk_arch_area_t area, uint32_t field, uint8_t v);
 *                     a byte of the area, loaded afresh / stored (the
 *                     time-slice extension's request and granted bytes).
 *
 * <rseqkit/thread.h> needs no more than this; the operations are in
 * <rseqkit/arch.h>.
 */
#ifndef RSK_ARCH_INSIDE
#error "include <rseqkit/thread.h> (or <rseqkit/rseqkit.h>), not rseqkit/arch/area.h"
#endif
#ifndef RSEQKIT_ARCH_AREA_H
#define RSEQKIT_ARCH_AREA_H

#include <stddef.h>
#include <stdint.h>
#include <rseqkit/abi.h>
#include <rseqkit/inject.h>

#if defined(__x86_64__)
#include <rseqkit/arch/x86_64.h>
#elif defined(__i386__)
#include <rseqkit/arch/i386.h>
#elif defined(__aarch64__)
#include <rseqkit/arch/aarch64.h>
#elif defined(__arm__)
#include <rseqkit/arch/arm.h>
#elif defined(__powerpc64__)
#include <rseqkit/arch/ppc.h>
#elif defined(__s390x__)
#include <rseqkit/arch/s390.h>
#elif defined(__riscv) && __riscv_xlen == 64
#include <rseqkit/arch/riscv.h>
#else
#error "rseqkit: no restartable-sequence layer for this architecture (supported: x86_64, i386, aarch64, arm (A32/T32, ARMv7+), ppc64 (LE and BE), s390x, riscv64)"
#endif

#ifdef RSK_ARCH_TP_ASM
/* The thread pointer, where the architecture reads it with the one
 * instruction RSK_ARCH_TP_ASM (into operand 0). */
static inline __attribute__((always_inline)) void *rsk_arch_thread_pointer(void)
{
	void *tp;
	__asm__(RSK_ARCH_TP_ASM : "=r"(tp));
	return tp;
}
#endif

#ifndef RSK_ARCH_HAS_AREA_OFFSET
/* Sections reach the area by its address. */
typedef struct rsk_abi_area *rsk_arch_area_t;

static inline __attribute__((always_inline)) rsk_arch_area_t rsk_arch_area_of(ptrdiff_t off)
{
	return (rsk_arch_area_t)(void *)((char *)rsk_arch_thread_pointer() + off);
}

static inline __attribute__((always_inline)) uint32_t rsk_arch_area_u32(rsk_arch_area_t area,
									uint32_t field)
{
	return *(const volatile uint32_t *)(const void *)((const char *)area + field);
}

static inline __attribute__((always_inline)) uint8_t rsk_arch_area_u8(rsk_arch_area_t area,
								      uint32_t field)
{
	return *(const volatile uint8_t *)(const void *)((const char *)area + field);
}

static inline __attribute__((always_inline)) void rsk_arch_area_set_u8(rsk_arch_area_t area,
								       uint32_t field, uint8_t v)
{
	*(volatile uint8_t *)(void *)((char *)area + field) = v;
}
#endif

#endif /* RSEQKIT_ARCH_AREA_H */
