/* SPDX-License-Identifier: MIT */
/*
 * tools/bench/xfer.c - what the transfer families (stack, buffers) share:
 * items and hands, the check, the mutex rival, and the yardstick's
 * hand-written and thread-local twins (xfer.h).
 */
#include "xfer.h"
#include "../yardstick.h"

#define YS_TL_CAP 255 /* thread-local buffers: items */

struct xfer_state *xfer_setup(int nthreads, size_t words)
{
	struct xfer_state *s = bench_alloc(sizeof(*s));
	int nids = nthreads * HAND;

	s->nids = nids;
	s->words = words;
	s->hands = bench_alloc(sizeof(*s->hands) * (size_t)nthreads);
	s->nodes = calloc((size_t)nids, sizeof(*s->nodes));
	s->seen = calloc((size_t)nids, 1);
	s->mbuf = calloc((size_t)nids * words, sizeof(intptr_t));
	if (!s->nodes || !s->seen || !s->mbuf)
		exit(1);
	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < HAND; k++)
			s->hands[i].id[k] = i * HAND + k;
		s->hands[i].n = HAND;
	}
	for (int i = 0; i < nids; i++)
		s->nodes[i].id = i;
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

void *xfer_setup1(int nthreads)
{
	return xfer_setup(nthreads, 1);
}
void *xfer_setup2(int nthreads)
{
	return xfer_setup(nthreads, 2);
}
void *xfer_setup8(int nthreads)
{
	return xfer_setup(nthreads, 8);
}

void xfer_teardown(void *sh)
{
	struct xfer_state *s = sh;

	if (s->rs)
		rsk_stack_destroy(s->rs);
	if (s->rp)
		rsk_ptrbuf_destroy(s->rp);
	if (s->rc)
		rsk_copybuf_destroy(s->rc);
	pthread_mutex_destroy(&s->mu);
	bench_free(5, s->hands, s->nodes, s->seen, s->mbuf, s);
}

/* Mark an id found; 0 if it is valid and was not found before. */
int xfer_seen(struct xfer_state *s, intptr_t id)
{
	if (id < 0 || id >= s->nids || s->seen[id]++)
		return -1;
	return 0;
}

int xfer_finish(struct xfer_state *s, struct thr *t, int n, int dup, char *err, size_t len)
{
	for (int i = 0; i < n; i++) {
		if (t[i].aux < 0) {
			snprintf(err, len, "thread %d: operation failed: %s", i,
				 strerror((int)-t[i].aux));
			return -1;
		}
		for (int k = 0; k < s->hands[i].n; k++)
			dup |= xfer_seen(s, s->hands[i].id[k]);
	}
	int missing = 0;
	for (int i = 0; i < s->nids; i++)
		missing += !s->seen[i];
	if (dup || missing || s->torn) {
		snprintf(err, len, "items: %d missing, %s duplicated or invalid, %d torn copies",
			 missing, dup ? "some" : "none", s->torn);
		return -1;
	}
	return 0;
}

/* The mutex rival of all three: a LIFO of `words`-word values. */
static inline int mx_push(struct xfer_state *s, const intptr_t *v)
{
	pthread_mutex_lock(&s->mu);
	memcpy(&s->mbuf[(size_t)s->mcount * s->words], v, s->words * sizeof(intptr_t));
	s->mcount++;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static inline int mx_pop(struct xfer_state *s, intptr_t *v)
{
	int r = -1;

	pthread_mutex_lock(&s->mu);
	if (s->mcount > 0) {
		s->mcount--;
		memcpy(v, &s->mbuf[(size_t)s->mcount * s->words], s->words * sizeof(intptr_t));
		r = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

int mx_check(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct xfer_state *s = sh;
	int dup = 0;

	for (int i = 0; i < s->mcount; i++) {
		intptr_t *v = &s->mbuf[(size_t)i * s->words];
		for (size_t w = 1; w < s->words; w++)
			s->torn += v[w] != v[0];
		dup |= xfer_seen(s, v[0]);
	}
	return xfer_finish(s, t, n, dup, err, len);
}


void xfer_mutex_ptr(void *sh, struct thr *t, unsigned n)
{
	struct xfer_state *s = sh;
#define MX_PUSH1(id) mx_push(s, &(id))
#define MX_POP1(p) mx_pop(s, (p))
	XFER_LOOP(s, t, n, MX_PUSH1, MX_POP1);
}

#define COPY_FNS(W)                                                            \
	void xfer_mutex_copy##W(void *sh, struct thr *t, unsigned n)    \
	{                                                                      \
		struct xfer_state *s = sh;                                     \
		COPY_LOOP(s, t, n, W, MXC_PUSH##W, MXC_POP##W);                       \
	}
#define MXC_PUSH2(id) ({ ITEM_FILL(v_, 2, id); mx_push(s, v_); })
#define MXC_POP2(p) ({ int r_ = mx_pop(s, v_); torn_ |= ITEM_TORN(v_, 2); *(p) = v_[0]; r_; })
#define MXC_PUSH8(id) ({ ITEM_FILL(v_, 8, id); mx_push(s, v_); })
#define MXC_POP8(p) ({ int r_ = mx_pop(s, v_); torn_ |= ITEM_TORN(v_, 8); *(p) = v_[0]; r_; })
COPY_FNS(2)
COPY_FNS(8)
/* ---- stack, ptrbuf, copybuf16, copybuf64 ---- */

struct ys_xfer {
	struct xfer_state *x; /* hands, ids, the seen map */
	char *parts;	      /* hand-written: ncpus_possible parts */
	size_t part_bytes;
	struct ys_node *nodes; /* one per id */
	int nthreads;
	/* thread-local rows: what each thread held at the end */
	struct ys_node **tl_head;
	intptr_t *tl_items; /* nthreads x YS_TL_CAP x words */
	int *tl_count;
};

static struct ys_xfer *ys_xfer_setup(int nthreads, size_t words, int shift)
{
	struct ys_xfer *s = bench_alloc(sizeof(*s));

	s->x = xfer_setup(nthreads, words);
	s->part_bytes = (size_t)1 << shift;
	s->parts = bench_alloc((size_t)ncpus_possible << shift);
	s->nodes = bench_alloc(sizeof(*s->nodes) * (size_t)s->x->nids);
	for (int i = 0; i < s->x->nids; i++)
		s->nodes[i].id = i;
	s->nthreads = nthreads;
	s->tl_head = bench_alloc(sizeof(*s->tl_head) * (size_t)nthreads);
	s->tl_items = bench_alloc(sizeof(intptr_t) * (size_t)nthreads * YS_TL_CAP * words);
	s->tl_count = bench_alloc(sizeof(int) * (size_t)nthreads);
	ys_note_cid();
	return s;
}

/* Part sizes: 128 bytes, or the hand-written buffers' (yardstick.h). */
#ifndef YS_HAVE_HAND
#define YS_PTR_SHIFT 7
#define YS_C16_SHIFT 7
#define YS_C64_SHIFT 7
#endif
#define YS_XFER_SETUP(name, words, shift)                                      \
	void *name(int nthreads)                                               \
	{                                                                      \
		return ys_xfer_setup(nthreads, words, shift);                  \
	}
YS_XFER_SETUP(ys_stack_setup, 1, 7)
YS_XFER_SETUP(ys_ptr_setup, 1, YS_PTR_SHIFT)
YS_XFER_SETUP(ys_copy2_setup, 2, YS_C16_SHIFT)
YS_XFER_SETUP(ys_copy8_setup, 8, YS_C64_SHIFT)

void ys_xfer_teardown(void *sh)
{
	struct ys_xfer *s = sh;

	xfer_teardown(s->x);
	bench_free(6, s->parts, s->nodes, s->tl_head, s->tl_items, s->tl_count, s);
}

/* An id from a node pointer found in a structure; -1 if it is none. */
static intptr_t ys_node_id(struct ys_xfer *s, const void *p)
{
	const struct ys_node *nd = p;

	if (nd < s->nodes || nd >= s->nodes + s->x->nids)
		return -1;
	return nd->id;
}

/* The count items of a buffer (pointers to nodes where an item is one
 * word, else copies whose words are all the id): marked found, torn
 * copies counted; nonzero if one was invalid or found before. */
static int ys_items_seen(struct ys_xfer *s, const intptr_t *items, intptr_t count)
{
	size_t words = s->x->words;
	int dup = 0;

	for (intptr_t k = 0; k < count; k++) {
		const intptr_t *v = &items[(size_t)k * words];
		if (words == 1) {
			dup |= xfer_seen(s->x, ys_node_id(s, (void *)v[0]));
		} else {
			s->x->torn += ITEM_TORN(v, words);
			dup |= xfer_seen(s->x, v[0]);
		}
	}
	return dup;
}

#ifdef YS_HAVE_HAND
/* Hand-written transfers, one function per structure and mode. */
#define YS_XFER_FNS(MODE, OTHER) YS_XFER_FNS_(MODE, , OTHER)
/* G: empty (the limit) or _g (the twin with the library's guarantees). */
#define YS_XFER_FNS_(MODE, G, OTHER)                                           \
	YS_NODE_FN(ys_stack_hand##G, MODE, OTHER, YSS_PUSH##G##_##MODE, YSS_POP##G##_##MODE) \
	YS_NODE_FN(ys_ptr_hand##G, MODE, OTHER, YSP_PUSH##G##_##MODE, YSP_POP##G##_##MODE) \
	YS_COPY_FN(MODE, G, OTHER, 2)                                          \
	YS_COPY_FN(MODE, G, OTHER, 8)
#define YS_NODE_FN(name, MODE, OTHER, PUSH, POP)                               \
	void name##_##MODE(void *sh, struct thr *t, unsigned n)                \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *parts = s->parts;                                        \
		struct ys_node *nodes = s->nodes;                              \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(name);                                                   \
		XFER_LOOP(s->x, t, n, PUSH, POP);                              \
	}
#define YS_COPY_FN(MODE, G, OTHER, W)                                          \
	void ys_copy##W##_hand##G##_##MODE(void *sh, struct thr *t, unsigned n) \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		ptrdiff_t off = ys_offset();                                   \
		char *parts = s->parts;                                        \
		if (t->aux < 0)                                                \
			return;                                                \
		OTHER(ys_copy##W##_hand##G);                                   \
		COPY_LOOP(s->x, t, n, W, YSC_PUSH##W##G##_##MODE, YSC_POP##W##G##_##MODE); \
	}
#define YSS_PUSH(MODE, id) (ys_push_##MODE(off, parts, &nodes[id]), 0)
#define YSS_POP(MODE, p) ({ struct ys_node *nd_ = ys_pop_##MODE(off, parts); \
	if (nd_) { *(p) = nd_->id; } nd_ ? 0 : -1; })
#define YSP_PUSH(MODE, id) ys_ppush_##MODE(off, parts, &nodes[id])
#define YSP_POP(MODE, p) ({ void *o_; int r_ = ys_ppop_##MODE(off, parts, &o_); \
	if (r_ == 0) { *(p) = ((struct ys_node *)o_)->id; } r_; })
#define YSC_PUSH(MODE, W, id) ({ ITEM_FILL(v_, W, id); ys_cpush##W##_##MODE(off, parts, v_); })
#define YSC_POP(MODE, W, p) ({ int r_ = ys_cpop##W##_##MODE(off, parts, v_); \
	if (r_ == 0) { torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; } r_; })
#define YSS_PUSH_cpu(id) YSS_PUSH(cpu, id)
#define YSS_POP_cpu(p) YSS_POP(cpu, p)
#define YSS_PUSH_cid(id) YSS_PUSH(cid, id)
#define YSS_POP_cid(p) YSS_POP(cid, p)
#define YSP_PUSH_cpu(id) YSP_PUSH(cpu, id)
#define YSP_POP_cpu(p) YSP_POP(cpu, p)
#define YSP_PUSH_cid(id) YSP_PUSH(cid, id)
#define YSP_POP_cid(p) YSP_POP(cid, p)
#define YSC_PUSH2_cpu(id) YSC_PUSH(cpu, 2, id)
#define YSC_POP2_cpu(p) YSC_POP(cpu, 2, p)
#define YSC_PUSH8_cpu(id) YSC_PUSH(cpu, 8, id)
#define YSC_POP8_cpu(p) YSC_POP(cpu, 8, p)
#define YSC_PUSH2_cid(id) YSC_PUSH(cid, 2, id)
#define YSC_POP2_cid(p) YSC_POP(cid, 2, p)
#define YSC_PUSH8_cid(id) YSC_PUSH(cid, 8, id)
#define YSC_POP8_cid(p) YSC_POP(cid, 8, p)
#define YSS_PUSH_g_cpu(id) YSS_PUSH(g_cpu, id)
#define YSS_POP_g_cpu(p) YSS_POP(g_cpu, p)
#define YSS_PUSH_g_cid(id) YSS_PUSH(g_cid, id)
#define YSS_POP_g_cid(p) YSS_POP(g_cid, p)
#define YSP_PUSH_g_cpu(id) YSP_PUSH(g_cpu, id)
#define YSP_POP_g_cpu(p) YSP_POP(g_cpu, p)
#define YSP_PUSH_g_cid(id) YSP_PUSH(g_cid, id)
#define YSP_POP_g_cid(p) YSP_POP(g_cid, p)
#define YSC_PUSH2_g_cpu(id) YSC_PUSH(g_cpu, 2, id)
#define YSC_POP2_g_cpu(p) YSC_POP(g_cpu, 2, p)
#define YSC_PUSH8_g_cpu(id) YSC_PUSH(g_cpu, 8, id)
#define YSC_POP8_g_cpu(p) YSC_POP(g_cpu, 8, p)
#define YSC_PUSH2_g_cid(id) YSC_PUSH(g_cid, 2, id)
#define YSC_POP2_g_cid(p) YSC_POP(g_cid, 2, p)
#define YSC_PUSH8_g_cid(id) YSC_PUSH(g_cid, 8, id)
#define YSC_POP8_g_cid(p) YSC_POP(g_cid, 8, p)
YS_XFER_FNS(cpu, YS_NO_OTHER)
YS_XFER_FNS(cid, YS_CPU_IF_NO_CID)
YS_XFER_FNS_(cpu, _g, YS_NO_OTHER)
YS_XFER_FNS_(cid, _g, YS_CPU_IF_NO_CID)

/* What is left in the hand-written parts, then the common finish. */
int ys_stack_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	int dup = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	for (int c = 0; c < ncpus_possible; c++) {
		const struct ys_node *nd = *(struct ys_node **)(void *)(s->parts + c * s->part_bytes);
		for (int steps = 0; nd; nd = nd->next) {
			if (++steps > s->x->nids) {
				dup = 1; /* a cycle */
				break;
			}
			dup |= xfer_seen(s->x, ys_node_id(s, nd));
		}
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}

int ys_buf_check_hand(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;
	intptr_t cap = (intptr_t)((s->part_bytes - 16) / (words * sizeof(intptr_t)));
	int dup = 0;

	if (ys_aux_check(t, n, err, len))
		return -1;
	if (words == 1)
		cap = YS_PTR_CAP;
	for (int c = 0; c < ncpus_possible; c++) {
		intptr_t *p = (intptr_t *)(void *)(s->parts + c * s->part_bytes);
		if (p[0] < 0 || p[0] > cap) {
			snprintf(err, len, "part %d: count %jd outside [0, %jd]", c, (intmax_t)p[0],
				 (intmax_t)cap);
			return -1;
		}
		dup |= ys_items_seen(s, &p[2], p[0]);
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}
#endif /* YS_HAVE_HAND */

/* Thread-local twins: a TLS list, a TLS buffer of pointers or items.
 * The compiler barrier after each operation keeps it one operation on
 * memory, as the other thread-local rows. */
static __thread struct ys_node *ys_tl_head;
static __thread intptr_t ys_tl_buf[YS_TL_CAP * MAX_WORDS];
static __thread int ys_tl_n;

void ys_stack_tl(void *sh, struct thr *t, unsigned n)
{
	struct ys_xfer *s = sh;
	struct ys_node *nodes = s->nodes;
#define YST_PUSH(id) ({ nodes[id].next = ys_tl_head; ys_tl_head = &nodes[id]; \
	__asm__ __volatile__("" ::: "memory"); 0; })
#define YST_POP(p) ({ struct ys_node *nd_ = ys_tl_head; \
	if (nd_) { ys_tl_head = nd_->next; *(p) = nd_->id; } \
	__asm__ __volatile__("" ::: "memory"); nd_ ? 0 : -1; })
	XFER_LOOP(s->x, t, n, YST_PUSH, YST_POP);
}

void ys_ptr_tl(void *sh, struct thr *t, unsigned n)
{
	struct ys_xfer *s = sh;
	struct ys_node *nodes = s->nodes;
#define YSTP_PUSH(id) ({ int r_ = -1; if (ys_tl_n < YS_TL_CAP) { \
	ys_tl_buf[ys_tl_n++] = (intptr_t)&nodes[id]; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTP_POP(p) ({ int r_ = -1; if (ys_tl_n > 0) { \
	*(p) = ((struct ys_node *)ys_tl_buf[--ys_tl_n])->id; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
	XFER_LOOP(s->x, t, n, YSTP_PUSH, YSTP_POP);
}

#define YS_TL_COPY_FN(W)                                                       \
	void ys_copy##W##_tl(void *sh, struct thr *t, unsigned n)       \
	{                                                                      \
		struct ys_xfer *s = sh;                                        \
		COPY_LOOP(s->x, t, n, W, YSTC_PUSH##W, YSTC_POP##W);                  \
	}
#define YSTC_PUSH(W, id) ({ int r_ = -1; ITEM_FILL(v_, W, id); if (ys_tl_n < YS_TL_CAP) { \
	memcpy(&ys_tl_buf[ys_tl_n * (W)], v_, sizeof(v_)); ys_tl_n++; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTC_POP(W, p) ({ int r_ = -1; if (ys_tl_n > 0) { \
	ys_tl_n--; memcpy(v_, &ys_tl_buf[ys_tl_n * (W)], sizeof(v_)); \
	torn_ |= ITEM_TORN(v_, W); *(p) = v_[0]; r_ = 0; } \
	__asm__ __volatile__("" ::: "memory"); r_; })
#define YSTC_PUSH2(id) YSTC_PUSH(2, id)
#define YSTC_POP2(p) YSTC_POP(2, p)
#define YSTC_PUSH8(id) YSTC_PUSH(8, id)
#define YSTC_POP8(p) YSTC_POP(8, p)
YS_TL_COPY_FN(2)
YS_TL_COPY_FN(8)

/* At the end of the window: what the thread holds, for the check. */
void ys_xfer_tl_fini(void *sh, struct thr *t)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;

	s->tl_head[t->id] = ys_tl_head;
	ys_tl_head = NULL;
	s->tl_count[t->id] = ys_tl_n;
	memcpy(&s->tl_items[(size_t)t->id * YS_TL_CAP * words], ys_tl_buf,
	       sizeof(intptr_t) * words * (size_t)ys_tl_n);
	ys_tl_n = 0;
}

int ys_xfer_check_tl(void *sh, struct thr *t, int n, char *err, size_t len)
{
	struct ys_xfer *s = sh;
	size_t words = s->x->words;
	int dup = 0;

	for (int i = 0; i < n; i++) {
		int steps = 0;
		for (const struct ys_node *nd = s->tl_head[i]; nd; nd = nd->next) {
			if (++steps > s->x->nids) {
				dup = 1; /* a cycle */
				break;
			}
			dup |= xfer_seen(s->x, ys_node_id(s, nd));
		}
		dup |= ys_items_seen(s, &s->tl_items[(size_t)i * YS_TL_CAP * words], s->tl_count[i]);
	}
	return xfer_finish(s->x, t, n, dup, err, len);
}
