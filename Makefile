# rseqkit - restartable sequences for Linux user space.
#
#   make                 library, tools            (build/lib, build/bin)
#   make malloc          librseqkit-malloc.so, .a  (build/lib; also built by make)
#   make check           every test (TAP, prove)
#   make bench           the benchmark
#   make bench-real      real programs under glibc, jemalloc, mimalloc, tcmalloc, rseqkit-malloc
#   make insn-count      hot-path instructions of each fast path
#   make install PREFIX=/usr/local [LIBDIR=...] [DESTDIR=...], make uninstall
#   make CC=clang, make CC="gcc -m32"  (i386, with gcc-multilib)
#   make deps            install the optional Debian packages (as root)
#   make WERROR=1        warnings are errors (the default under CI=true)
#
# No configure step: optional features are detected by the compiler.

CC       ?= gcc
BUILD    ?= build
PREFIX   ?= /usr/local
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
# -Werror only when asked (WERROR=1) or in CI: a release build must not
# fail on a newer compiler's new warning.
WERROR   ?= $(if $(filter true,$(CI)),1,0)
WARN     := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror)
BASEFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) -Iinclude -pthread $(CFLAGS)
LDLIBS   += -pthread

# The version is written once, in include/rseqkit/version.h.
VERSION  := $(shell awk 'NF == 3 && $$2 ~ /^RSEQKIT_VERSION_(MAJOR|MINOR|PATCH)$$/ \
		{ v = v (v == "" ? "" : ".") $$3 } END { print v }' include/rseqkit/version.h)
# The soname's number: it changes with an incompatible binary interface
# (abi/README.md says what changed).  librseqkit-malloc.so exports only the
# C library's malloc family and its rsk_ twins, whose interface did not
# change: it keeps its own.
SOVER    := 1
MALLOC_SOVER := 0

# The library's sources, one folder a layer (src/malloc/ is the allocator,
# built apart below): runtime/ (registration, topology, time slices),
# progress/ (gates, fences, statistics), percpu/ (the framework and the
# structures), alloc/ (the object pool and the per-CPU memory pools).
LIB_DIRS := runtime progress percpu alloc
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard src/$(d)/*.c))
# The library's own objects find src/internal.h from their folders; each
# object also writes its dependencies (.d, included at the end) so that a
# header edit rebuilds what uses it.
LIB_CPPFLAGS := -Isrc -MMD -MP
# ar keeps one member per file name: two sources of one name in different
# folders would leave one of them out of the archives.
ifneq ($(words $(notdir $(LIB_SRC))),$(words $(sort $(notdir $(LIB_SRC)))))
$(error two library sources share a file name: $(sort $(notdir $(LIB_SRC))))
endif
LIB_HDR  := $(wildcard include/rseqkit/*.h include/rseqkit/arch/*.h include/rseqkit/arch/*/*.h) \
	    src/internal.h
TOOLS    := $(patsubst tools/%.c,$(BUILD)/bin/%,$(wildcard tools/rseqkit-*.c)) \
            $(BUILD)/bin/rseqkit-bench
TEST_C   := $(wildcard tests/*.c)
TEST_SH  := $(wildcard tests/*.sh)
# Tests with a negative-control twin (built with the descriptor never armed).
NEGATIVE := $(BUILD)/tests/negative-primitives.t
TESTS    := $(patsubst tests/%.c,$(BUILD)/tests/%.t,$(TEST_C)) $(NEGATIVE) \
            $(patsubst tests/%.sh,$(BUILD)/tests/%.t,$(TEST_SH))

PIC_OBJ    := $(patsubst src/%.c,$(BUILD)/obj/pic/%.o,$(LIB_SRC))
INJECT_OBJ := $(patsubst src/%.c,$(BUILD)/obj/inject/%.o,$(LIB_SRC))
NOARM_OBJ  := $(patsubst src/%.c,$(BUILD)/obj/noarm/%.o,$(LIB_SRC))

STATIC   := $(BUILD)/lib/librseqkit.a
SHARED   := $(BUILD)/lib/librseqkit.so.$(VERSION)
# Tests link the injection build of the library (not installed).
INJECT_LIB := $(BUILD)/lib/librseqkit-inject.a
# Negative control: sections never arm their descriptor.
NOARM_LIB  := $(BUILD)/lib/librseqkit-noarm.a

.PHONY: all lib tools tests check bench install uninstall clean check-negative check-long check-kernels
all: lib malloc tools

lib: $(STATIC) $(SHARED)
tools: $(TOOLS)
tests: $(TESTS)

$(BUILD)/obj/pic/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(BUILD)/obj/inject/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) -DRSEQKIT_INJECT -c $< -o $@

$(BUILD)/obj/noarm/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) -DRSEQKIT_INJECT -DRSEQKIT_NEGATIVE_CONTROL -c $< -o $@

$(STATIC): $(PIC_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(PIC_OBJ) src/librseqkit.map
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -shared -Wl,-soname,librseqkit.so.$(SOVER) \
		-Wl,--version-script=src/librseqkit.map -Wl,-z,defs -o $@ $(PIC_OBJ) $(LDLIBS)
	ln -sf librseqkit.so.$(VERSION) $(BUILD)/lib/librseqkit.so.$(SOVER)
	ln -sf librseqkit.so.$(SOVER) $(BUILD)/lib/librseqkit.so

# rseqkit's malloc (src/malloc/, <rseqkit/malloc.h>, rseqkit-malloc(7)):
# librseqkit-malloc.so embeds the library's PIC objects and exports only
# the C library's malloc family and the rsk_ twins (its version script);
# librseqkit-malloc.a holds the rsk_ twins and the library's objects, and
# does not replace the C library's names.  Built by "make" (all), "make
# check" and "make install", not by "make lib" (the sanitizer builds).  No builtin malloc knowledge in
# the allocator: gcc would turn its own malloc + memset into a calloc call.
# -fexceptions: std::bad_alloc is thrown through its operator new.
MALLOC_SRC   := $(wildcard src/malloc/*.c)
MALLOC_HDR   := include/rseqkit/malloc.h
MALLOC_FLAGS := -fPIC -fvisibility=hidden -fno-builtin-malloc -fno-builtin-calloc \
		-fno-builtin-realloc -fno-builtin-free -fexceptions
MALLOC_SO    := $(BUILD)/lib/librseqkit-malloc.so
MALLOC_SO_V  := $(BUILD)/lib/librseqkit-malloc.so.$(VERSION)
MALLOC_A     := $(BUILD)/lib/librseqkit-malloc.a
MALLOC_SO_OBJ := $(patsubst src/malloc/%.c,$(BUILD)/obj/malloc-so/%.o,$(MALLOC_SRC))
MALLOC_A_OBJ  := $(patsubst src/malloc/%.c,$(BUILD)/obj/malloc-a/%.o,$(MALLOC_SRC))
# The negative control: the allocator on the library's objects whose
# sections never arm their descriptor (tests/malloc_negative.sh).
MALLOC_NOARM := $(BUILD)/lib/librseqkit-malloc-noarm.so
.PHONY: malloc
malloc: $(MALLOC_SO) $(MALLOC_A)

$(BUILD)/obj/malloc-so/%.o: src/malloc/%.c $(LIB_HDR) $(MALLOC_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) $(MALLOC_FLAGS) -DRSK_MALLOC_LIBC_NAMES -c $< -o $@
$(BUILD)/obj/malloc-a/%.o: src/malloc/%.c $(LIB_HDR) $(MALLOC_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) $(MALLOC_FLAGS) -c $< -o $@
$(BUILD)/obj/malloc-noarm/%.o: src/malloc/%.c $(LIB_HDR) $(MALLOC_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) $(MALLOC_FLAGS) -DRSEQKIT_INJECT -DRSEQKIT_NEGATIVE_CONTROL \
		-DRSK_MALLOC_LIBC_NAMES -c $< -o $@
$(BUILD)/obj/noarm-pic/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) -fPIC -fvisibility=hidden -DRSEQKIT_INJECT -DRSEQKIT_NEGATIVE_CONTROL -c $< -o $@

$(MALLOC_SO_V): $(MALLOC_SO_OBJ) $(PIC_OBJ) src/malloc/librseqkit-malloc.map
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -shared -Wl,-soname,librseqkit-malloc.so.$(MALLOC_SOVER) \
		-Wl,--version-script=src/malloc/librseqkit-malloc.map -Wl,-z,defs -o $@ \
		$(MALLOC_SO_OBJ) $(PIC_OBJ) $(LDLIBS)
$(MALLOC_SO): $(MALLOC_SO_V)
	ln -sf librseqkit-malloc.so.$(VERSION) $(BUILD)/lib/librseqkit-malloc.so.$(MALLOC_SOVER)
	ln -sf librseqkit-malloc.so.$(MALLOC_SOVER) $@
$(MALLOC_A): $(MALLOC_A_OBJ) $(PIC_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(MALLOC_NOARM): $(patsubst src/malloc/%.c,$(BUILD)/obj/malloc-noarm/%.o,$(MALLOC_SRC)) \
		$(patsubst src/%.c,$(BUILD)/obj/noarm-pic/%.o,$(LIB_SRC)) src/malloc/librseqkit-malloc.map
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -shared -Wl,--version-script=src/malloc/librseqkit-malloc.map -Wl,-z,defs \
		-o $@ $(filter %.o,$^) $(LDLIBS)

$(INJECT_LIB): $(INJECT_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(NOARM_LIB): $(NOARM_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# The ThreadSanitizer variant of the library, installed beside the plain
# one where CC can build with -fsanitize=thread (not i386: TSan has no
# runtime there): librseqkit-tsan.a, librseqkit-tsan.so and
# rseqkit-tsan.pc.  A program built with -fsanitize=thread and linked with
# the plain library gets reports from inside it: TSan does not see the
# synchronisation of code it did not instrument (the gates' atomics, the
# pools' locks), only the library's calls of free() or memcpy() on memory
# the program touches.  Linked with this variant, it gets only its own
# (doc/GUIDE.md, section 8).  The .so is linked without -z defs: under
# clang the TSan runtime is in the executable, not in a library.  gcc
# warns (-Wtsan) that TSan does not model atomic_thread_fence(); the
# annotations of <rseqkit/tsan.h> and the gates' atomics carry the order.
TSAN_OBJ    := $(patsubst src/%.c,$(BUILD)/obj/tsan/%.o,$(LIB_SRC))
TSAN_STATIC := $(BUILD)/lib/librseqkit-tsan.a
TSAN_SHARED := $(BUILD)/lib/librseqkit-tsan.so.$(VERSION)
TSAN_PC     := $(BUILD)/rseqkit-tsan.pc
TSAN_VFLAGS  = -fsanitize=thread -fno-omit-frame-pointer $(if $(findstring clang,$(CC)),,-Wno-tsan)
# Exit status 0 when CC builds and links a -fsanitize=thread program.
TSAN_PROBE   = printf 'int main(void) { return 0; }\n' | \
	$(CC) $(CFLAGS) -fsanitize=thread -x c -o /dev/null - >/dev/null 2>&1
.PHONY: lib-tsan
lib-tsan: $(TSAN_STATIC) $(TSAN_SHARED)
$(BUILD)/obj/tsan/%.o: src/%.c $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LIB_CPPFLAGS) $(TSAN_VFLAGS) -fPIC -fvisibility=hidden -c $< -o $@
$(TSAN_STATIC): $(TSAN_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
$(TSAN_SHARED): $(TSAN_OBJ) src/librseqkit.map
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -fsanitize=thread -shared -Wl,-soname,librseqkit-tsan.so.$(SOVER) \
		-Wl,--version-script=src/librseqkit.map -o $@ $(TSAN_OBJ) $(LDLIBS)
	ln -sf librseqkit-tsan.so.$(VERSION) $(BUILD)/lib/librseqkit-tsan.so.$(SOVER)
	ln -sf librseqkit-tsan.so.$(SOVER) $(BUILD)/lib/librseqkit-tsan.so

# A 32-bit x86 compiler (install's defaults differ for it).
I386_CC := $(findstring -m32,$(CC) $(CFLAGS))$(findstring i686-,$(CC))

TOOL_LIBS_slice-bench := -lm
$(BUILD)/bin/%: tools/%.c $(STATIC) $(LIB_HDR) $(wildcard tools/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS) $(TOOL_LIBS_$*)

$(BUILD)/tests/%.t: tests/%.c $(INJECT_LIB) $(LIB_HDR) $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DRSEQKIT_INJECT $(LDFLAGS) -o $@ $< $(INJECT_LIB) $(LDLIBS) $(TEST_LIBS_$*)

# The allocator's tests link librseqkit-malloc.so (so malloc is its).
$(BUILD)/tests/malloc_%.t: tests/malloc_%.c $(MALLOC_SO) $(MALLOC_HDR) $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LDFLAGS) -o $@ $< -L$(BUILD)/lib -lrseqkit-malloc \
		-Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)

# The same tests as static programs for check-cross and check-kernels,
# whose guests have no shared libraries: the allocator's objects (those
# of the .so, which carry the C library's names) are linked in, and its
# malloc replaces the C library's, as glibc allows for static programs
# that define the whole family.
$(BUILD)/tests/static/malloc_%.t: tests/malloc_%.c $(MALLOC_SO_OBJ) $(PIC_OBJ) $(MALLOC_HDR) \
		$(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LDFLAGS) -static -o $@ $< $(MALLOC_SO_OBJ) $(PIC_OBJ) $(LDLIBS)

$(BUILD)/tests/%.t: tests/%.sh
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@

# rseqkit-bench: one harness and a file per family (tools/bench/, see
# bench.h); ungated.c compiles the families' loops again with the gate
# compiled out.  BENCH_BUILD_DIR: its default output directory is
# $(BUILD)/bench when it runs from here.
BENCH_SRC := $(wildcard tools/bench/*.c)
$(BUILD)/bin/rseqkit-bench: $(BENCH_SRC) $(wildcard tools/bench/*.h) tools/yardstick.h tools/harness.h $(STATIC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DBENCH_BUILD_DIR='"$(abspath $(BUILD))"' $(LDFLAGS) -o $@ $(BENCH_SRC) \
		$(STATIC) $(LDLIBS) -lm -ldl

# rseqkit-stress runs the injection build of the library (the generic
# tool rule above would link the plain one); its negative-control twin,
# whose sections never arm their descriptor, must report FAILED.
STRESS_NOARM := $(BUILD)/bin/rseqkit-stress-noarm
$(BUILD)/bin/rseqkit-stress: tools/rseqkit-stress.c $(INJECT_LIB) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DRSEQKIT_INJECT $(LDFLAGS) -o $@ $< $(INJECT_LIB) $(LDLIBS)
$(STRESS_NOARM): tools/rseqkit-stress.c $(NOARM_LIB) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DRSEQKIT_INJECT -DRSEQKIT_NEGATIVE_CONTROL $(LDFLAGS) -o $@ $< $(NOARM_LIB) $(LDLIBS)
tests: $(STRESS_NOARM)

# Per-program extra libraries (libdl for the dlopen test, ...).
TEST_LIBS_registration_dlopen := -ldl
TEST_LIBS_registration_unload := -ldl
$(BUILD)/tests/registration_unload.t: $(BUILD)/tests/plugin-shared.so $(BUILD)/tests/plugin-embedded.so
TEST_LIBS_registration_static := -static
# The dlopen test's plugins: one needs librseqkit.so, one embeds librseqkit.a.
$(BUILD)/tests/registration_dlopen.t: $(BUILD)/tests/plugin-shared.so $(BUILD)/tests/plugin-embedded.so
$(BUILD)/tests/plugin-shared.so: tests/plugin/dlopen_plugin.c tests/plugin_api.h $(SHARED) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DPLUGIN_SHARED -fPIC -shared -o $@ $< -L$(BUILD)/lib -lrseqkit -Wl,-rpath,'$$ORIGIN/../lib' $(LDLIBS)
$(BUILD)/tests/plugin-embedded.so: tests/plugin/dlopen_plugin.c tests/plugin_api.h $(STATIC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -fPIC -shared -o $@ $< $(STATIC) -Wl,--exclude-libs,ALL $(LDLIBS)

# Examples (examples/*.c): complete programs against the installed-style
# static library; tests/examples.sh runs each one.
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
.PHONY: examples
examples: $(EXAMPLES)
$(BUILD)/examples/%: examples/%.c $(STATIC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS)

# Everything a test script may need, built before prove runs.
TEST_DEPS := lib malloc tools $(TESTS) $(MALLOC_NOARM) $(NOARM_LIB) $(INJECT_LIB) $(STRESS_NOARM) examples \
             $(BUILD)/bin/mempool-bench $(BUILD)/bin/slice-bench $(BUILD)/tests/static/malloc_stress.t

# prove runs each test through tests/bin/tap-run.sh, which keeps its TAP in
# $(BUILD)/tap/; tests/bin/deps.sh then sums up what was skipped and why, and
# which package would enable it (with CI=true a skip for a missing
# package fails the run).
check: $(TEST_DEPS)
	@rm -rf $(BUILD)/tap
	@st=0; BUILD=$(BUILD) CC="$(CC)" CFLAGS="$(CFLAGS)" TAP_LOG_DIR=$(BUILD)/tap \
		prove --exec tests/bin/tap-run.sh $(TESTS) || st=1; \
	CC="$(CC)" tests/bin/deps.sh summary check $(BUILD)/tap || st=1; exit $$st

check-negative: $(TEST_DEPS)
	BUILD=$(BUILD) CC="$(CC)" CFLAGS="$(CFLAGS)" prove --exec env $(BUILD)/tests/negative*.t \
		$(BUILD)/tests/stress_negative.t

# The full stress matrix (every injection point, yield/signal/sleep at
# 25/50/100%, both index modes, with and without -M): long, not in check.
check-long: $(TEST_DEPS)
	BUILD=$(BUILD) prove -v --exec sh tests/long/stress_long.sh

# Debian's x86-64 kernels 6.1, 6.12 and 7.2 under qemu-system-x86_64 (TCG),
# static test programs as /init (needs qemu-system-x86, cpio; kernels are
# cached in build/kernels).  KERNEL=7.2 runs one; see tests/qemu/.
check-kernels:
	tests/qemu/check-kernels.sh $(KERNEL)

# The time-slice extension on a kernel that has it: Debian's
# linux-source-7.2 built once with CONFIG_RSEQ_SLICE_EXTENSION (a minimal
# configuration, cached in build/kernels; tests/qemu/build-slice-kernel.sh),
# booted like check-kernels: slice.t (enable, nested regions, grants seen
# while a competitor on the same CPU wants it and counted in debugfs, a
# system call inside a grant), structures.t, and slice-bench (rsk_spinlock
# at 4 x CPUs threads with and without the extension, a pthread mutex
# beside them).  Needs qemu-system-x86, cpio and the kernel build's
# packages (.ci/packages, group "slice").
.PHONY: check-slice
check-slice:
	tests/qemu/check-kernels.sh slice

# Per-CPU memory on two NUMA nodes: Debian's x86-64 kernel under qemu with
# -numa and 64 possible CPUs (2 online), mempool.t --numa checking placement
# with move_pages(2) and --cid-figure the committed memory of a cid pool
# (needs qemu-system-x86, cpio; SKIP without, a failure with CI=true).
# SUITE= another Debian suite's kernel (default trixie).  .ci/run runs it
# after check-kernels.
.PHONY: check-numa
check-numa:
	tests/qemu/mempool-numa.sh $(SUITE)

# rseqkit on seven architectures: x86-64 (clang) and i386 natively,
# aarch64, arm, ppc64le, s390x and riscv64 on Debian's kernels under
# qemu-system (TCG), static cross-built tests as /init; one line per arch.
# ARCH=riscv64 runs one.  Installs nothing: see tests/qemu/check-cross.sh
# for the packages (cross compilers, qemu-system-*, cpio).
.PHONY: check-cross
check-cross:
	tests/qemu/check-cross.sh $(ARCH)

# The structures' bench (its last family, malloc, sets librseqkit-malloc.so
# beside glibc, jemalloc, mimalloc and tcmalloc, each in its own process),
# its fallback set (--fallback: each operation without rseq beside what
# users write without it, at 1 to 512 threads; about 3 minutes), then the
# per-CPU memory's (tools/mempool-bench.c: alloc + free, pool
# counter against rsk_counter, 10,000 counters' memory and sum time;
# BENCH_ARGS=--quick makes both short).
bench: all $(BUILD)/bin/mempool-bench
	@st=0; $(BUILD)/bin/rseqkit-bench $(BENCH_ARGS) || st=1; \
	echo; $(BUILD)/bin/rseqkit-bench --fallback $(BENCH_ARGS) || st=1; \
	echo; $(BUILD)/bin/mempool-bench $(filter --quick,$(BENCH_ARGS)) || st=1; \
	CC="$(CC)" tests/bin/deps.sh summary bench || st=1; exit $$st

# Unmodified Debian programs (db_bench, sqlite3, python3, xz -T2) under
# each allocator (glibc, jemalloc, mimalloc, tcmalloc, rseqkit-malloc),
# interleaved, medians of wall time and peak RSS (tools/bench-real.py;
# each run through tools/malloc-run.c): a table and plots in
# $(BUILD)/bench-real/.  BENCH_REAL_ARGS: --runs N (default 5), --quick,
# --only WORKLOADS, --allocators LIST.
.PHONY: bench-real
bench-real: malloc $(BUILD)/bin/malloc-run
	python3 tools/bench-real.py --build $(BUILD) $(BENCH_REAL_ARGS)

# The optional Debian packages (.ci/packages, the list .ci/run uses too):
# "sudo make deps" installs the base and optional groups; DEPS="kernels
# cross" the qemu and cross-compiler ones; "make deps-status" shows what
# is here.
DEPS ?= base optional
.PHONY: deps deps-status
deps:
	tests/bin/deps.sh install $(DEPS)
deps-status:
	@CC="$(CC)" tests/bin/deps.sh status

# Where "make install" puts things.  LIBDIR may be Debian's multiarch
# directory (LIBDIR=$(PREFIX)/lib/x86_64-linux-gnu); rseqkit.pc follows it.
# A 32-bit build (gcc -m32, i686-linux-gnu-gcc) defaults to $(PREFIX)/lib32
# and installs no tools (their names would replace the 64-bit ones) unless
# BINDIR is given; and no install overwrites a librseqkit of another
# architecture (see install-check-libdir).
BINDIR_DEFAULT := $(if $(I386_CC),,$(PREFIX)/bin)
LIBDIR   ?= $(PREFIX)/$(if $(I386_CC),lib32,lib)
BINDIR   ?= $(BINDIR_DEFAULT)
INCLUDEDIR ?= $(PREFIX)/include
MANDIR   ?= $(PREFIX)/share/man
DATADIR  ?= $(PREFIX)/share/rseqkit
# libdir in rseqkit.pc: relative to ${prefix} when it is under PREFIX.
PC_LIBDIR = $(if $(filter $(PREFIX)/%,$(LIBDIR)),$${prefix}/$(patsubst $(PREFIX)/%,%,$(LIBDIR)),$(LIBDIR))
PC_INCDIR = $(if $(filter $(PREFIX)/%,$(INCLUDEDIR)),$${prefix}/$(patsubst $(PREFIX)/%,%,$(INCLUDEDIR)),$(INCLUDEDIR))

# Instructions on the hot path of each fast path's loop (tools/insn-loops.c,
# built as users build: installed-style headers, -Iinclude -O2), beside the
# hand-written twins (tools/yardstick.h): see doc/BENCHMARKS.md.  CC=clang too;
# INSN_ARGS=-v prints each loop round, INSN_ARGS=--check-targets fails on a miss.
INSN_LOOPS := $(BUILD)/insn/insn-loops
.PHONY: insn-count
$(INSN_LOOPS): tools/insn-loops.c tools/yardstick.h $(STATIC) $(LIB_HDR)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -O2 -Iinclude -pthread -o $@ $< $(STATIC) $(LDLIBS)
insn-count: $(INSN_LOOPS)
	$(INSN_LOOPS)
	python3 tools/insn-count.py $(INSN_ARGS) --src tools/insn-loops.c --label "$$($(CC) --version | head -n 1), -O2" $(INSN_LOOPS)

# Figures of the per-CPU memory pools, as ratios in one run (a separate
# tool, not installed: tools/mempool-bench.c); built with the tests.
.PHONY: bench-mempool
bench-mempool: $(BUILD)/bin/mempool-bench
	$(BUILD)/bin/mempool-bench $(BENCH_ARGS)
tests: $(BUILD)/bin/mempool-bench

PC_FILE := $(BUILD)/rseqkit.pc
# Rewritten at every install: it records PREFIX, which may differ each time.
.PHONY: $(PC_FILE)
$(PC_FILE): Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(PC_LIBDIR)' 'includedir=$(PC_INCDIR)' '' \
		'Name: rseqkit' 'Description: restartable sequences and per-CPU data for Linux' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir} -pthread' \
		'Libs: -L$${libdir} -lrseqkit' 'Libs.private: -pthread' > $@
# The TSan variant's: its library, and -fsanitize=thread on both sides
# (the program must be instrumented too; its link brings the runtime).
.PHONY: $(TSAN_PC)
$(TSAN_PC): Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(PC_LIBDIR)' 'includedir=$(PC_INCDIR)' '' \
		'Name: rseqkit-tsan' \
		'Description: rseqkit built with ThreadSanitizer, for programs built with -fsanitize=thread' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir} -pthread -fsanitize=thread' \
		'Libs: -L$${libdir} -lrseqkit-tsan -fsanitize=thread' 'Libs.private: -pthread' > $@

MALLOC_PC := $(BUILD)/rseqkit-malloc.pc
.PHONY: $(MALLOC_PC)
$(MALLOC_PC): Makefile
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(PC_LIBDIR)' 'includedir=$(PC_INCDIR)' '' \
		'Name: rseqkit-malloc' 'Description: per-CPU malloc on restartable sequences (rseqkit)' \
		'Version: $(VERSION)' 'Cflags: -I$${includedir} -pthread' \
		'Libs: -L$${libdir} -lrseqkit-malloc' 'Libs.private: -pthread' > $@

# ELF class and machine of a file (bytes 4 and 18-19), to tell a 32-bit
# library from a 64-bit one without readelf.
ELF_ID = od -An -tx1 -j4 -N1 $(1) | tr -d ' \n'; od -An -tx1 -j18 -N2 $(1) | tr -d ' \n'
.PHONY: install-check-libdir
install-check-libdir: $(SHARED)
	@old=$(DESTDIR)$(LIBDIR)/librseqkit.so.$(VERSION); \
	for f in $(DESTDIR)$(LIBDIR)/librseqkit.so.*.*.*; do [ -f "$$f" ] && old=$$f; done; \
	if [ -f "$$old" ] && [ "$$($(call ELF_ID,"$$old"))" != "$$($(call ELF_ID,$(SHARED)))" ]; then \
		echo "install: $$old is a library for another architecture than this build"; \
		echo "install: (CC=$(CC)); refusing to overwrite it.  Give this build its own"; \
		echo "install: directory, e.g. LIBDIR=$(PREFIX)/lib32 for gcc -m32 (the default),"; \
		echo "install: or LIBDIR=$(PREFIX)/lib/i386-linux-gnu (Debian multiarch)."; \
		exit 1; \
	fi

install: all $(PC_FILE) $(MALLOC_PC) install-check-libdir
	install -d $(DESTDIR)$(INCLUDEDIR)/rseqkit/arch $(DESTDIR)$(LIBDIR)/pkgconfig \
		$(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man7
	install -m 644 include/rseqkit/*.h $(DESTDIR)$(INCLUDEDIR)/rseqkit/
	install -m 644 include/rseqkit/arch/*.h $(DESTDIR)$(INCLUDEDIR)/rseqkit/arch/
	for d in include/rseqkit/arch/*/; do \
		install -d $(DESTDIR)$(INCLUDEDIR)/rseqkit/arch/$$(basename $$d) && \
		install -m 644 $$d*.h $(DESTDIR)$(INCLUDEDIR)/rseqkit/arch/$$(basename $$d)/ || exit 1; \
	done
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/
	ln -sf librseqkit.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librseqkit.so.$(SOVER)
	ln -sf librseqkit.so.$(SOVER) $(DESTDIR)$(LIBDIR)/librseqkit.so
	install -m 644 $(PC_FILE) $(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit.pc
	@if $(TSAN_PROBE); then \
		$(MAKE) --no-print-directory lib-tsan $(TSAN_PC) && \
		echo "install: the ThreadSanitizer variant (librseqkit-tsan, rseqkit-tsan.pc)" && \
		install -m 644 $(TSAN_STATIC) $(DESTDIR)$(LIBDIR)/ && \
		install -m 755 $(TSAN_SHARED) $(DESTDIR)$(LIBDIR)/ && \
		ln -sf librseqkit-tsan.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librseqkit-tsan.so.$(SOVER) && \
		ln -sf librseqkit-tsan.so.$(SOVER) $(DESTDIR)$(LIBDIR)/librseqkit-tsan.so && \
		install -m 644 $(TSAN_PC) $(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit-tsan.pc || exit 1; \
	else \
		echo "install: no ThreadSanitizer variant: $(CC) cannot build with -fsanitize=thread"; \
	fi
	install -m 644 $(MALLOC_A) $(DESTDIR)$(LIBDIR)/
	install -m 755 $(MALLOC_SO_V) $(DESTDIR)$(LIBDIR)/
	ln -sf librseqkit-malloc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/librseqkit-malloc.so.$(MALLOC_SOVER)
	ln -sf librseqkit-malloc.so.$(MALLOC_SOVER) $(DESTDIR)$(LIBDIR)/librseqkit-malloc.so
	install -m 644 $(MALLOC_PC) $(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit-malloc.pc
	@if [ -n "$(BINDIR)" ]; then \
		echo "install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/"; \
		install -d $(DESTDIR)$(BINDIR) && install -m 755 $(TOOLS) $(DESTDIR)$(BINDIR)/; \
	else \
		echo "install: a 32-bit build installs no tools (they would replace the 64-bit ones); BINDIR=... installs them"; \
	fi
	for s in 1 3 7; do for f in man/*.$$s; do [ -e "$$f" ] && install -m 644 "$$f" $(DESTDIR)$(MANDIR)/man$$s/; done; done; true
	install -d $(DESTDIR)$(DATADIR)
	install -m 644 share/rseqkit.supp $(DESTDIR)$(DATADIR)/

# Removes what "make install" with the same PREFIX, LIBDIR, BINDIR (and CC)
# installed.  The headers and man pages are shared by every architecture's
# install under PREFIX: they stay while another librseqkit.so.$(SOVER) is
# left under $(PREFIX) (lib, lib32, lib64, lib/<multiarch>).
.PHONY: uninstall
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/librseqkit.a $(DESTDIR)$(LIBDIR)/librseqkit.so \
		$(DESTDIR)$(LIBDIR)/librseqkit.so.$(SOVER) $(DESTDIR)$(LIBDIR)/librseqkit.so.$(VERSION) \
		$(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit.pc \
		$(DESTDIR)$(LIBDIR)/librseqkit-tsan.a $(DESTDIR)$(LIBDIR)/librseqkit-tsan.so \
		$(DESTDIR)$(LIBDIR)/librseqkit-tsan.so.$(SOVER) \
		$(DESTDIR)$(LIBDIR)/librseqkit-tsan.so.$(VERSION) \
		$(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit-tsan.pc
	rm -f $(DESTDIR)$(LIBDIR)/librseqkit-malloc.a $(DESTDIR)$(LIBDIR)/librseqkit-malloc.so \
		$(DESTDIR)$(LIBDIR)/librseqkit-malloc.so.$(MALLOC_SOVER) \
		$(DESTDIR)$(LIBDIR)/librseqkit-malloc.so.$(VERSION) \
		$(DESTDIR)$(LIBDIR)/pkgconfig/rseqkit-malloc.pc
	-rmdir $(DESTDIR)$(LIBDIR)/pkgconfig 2>/dev/null
	$(if $(BINDIR),rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS))),@true)
	@others=$$(ls $(DESTDIR)$(PREFIX)/lib*/librseqkit.so.$(SOVER) \
		$(DESTDIR)$(PREFIX)/lib/*-linux-*/librseqkit.so.$(SOVER) 2>/dev/null); \
	if [ -n "$$others" ]; then \
		echo "uninstall: headers and man pages kept: still used by $$others"; \
	else \
		echo "uninstall: headers and man pages removed (no other librseqkit left under $(PREFIX))"; \
		rm -f $(patsubst include/%,$(DESTDIR)$(INCLUDEDIR)/%,$(wildcard include/rseqkit/*.h include/rseqkit/arch/*.h include/rseqkit/arch/*/*.h)); \
		rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(wildcard man/*.1))) \
			$(addprefix $(DESTDIR)$(MANDIR)/man3/,$(notdir $(wildcard man/*.3))) \
			$(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(wildcard man/*.7))); \
		rm -f $(DESTDIR)$(DATADIR)/rseqkit.supp; \
		rmdir $(DESTDIR)$(DATADIR) $(patsubst include/%,$(DESTDIR)$(INCLUDEDIR)/%,$(wildcard include/rseqkit/arch/*/)) \
			$(DESTDIR)$(INCLUDEDIR)/rseqkit/arch $(DESTDIR)$(INCLUDEDIR)/rseqkit 2>/dev/null; true; \
	fi

clean:
	rm -rf $(BUILD)

# The negative-control twin of a test: same source, descriptor never armed.
$(BUILD)/tests/negative-%.t: tests/%.c $(NOARM_LIB) $(LIB_HDR) $(wildcard tests/*.h)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) -DRSEQKIT_INJECT -DRSEQKIT_NEGATIVE_CONTROL $(LDFLAGS) -o $@ $< $(NOARM_LIB) $(LDLIBS)

# ---------------------------------------------------------------------------
# CI axes beyond "make check" (called from .ci/run).  Each builds in its own
# directory through a sub-make, whatever BUILD/CFLAGS say on the command line.

# ASan + UBSan (any UBSan report is fatal: -fno-sanitize-recover) over a
# chosen subset: primitives (and its negative-control twin, which must
# still catch lost updates), structures, the copy buffer's item sizes and
# alignments, registration, identity, fence, the pool, the examples and the
# quick stress tier.  Left out, and why:
# registration_static (ASan cannot link -static), valgrind (valgrind and
# ASan shadow memory do not mix), seccomp and singlestep (a ptraced or
# filtered child under ASan's own syscalls and signals tests ASan, not
# rseqkit), registration_dlopen (plugins would need the ASan runtime
# preloaded), install, manpages and bench_smoke (no library code under
# test; rseqkit-bench is not built either).
SAN_BUILD   := build-asan
# GCC's -Wmaybe-uninitialized guesses wrong under -fsanitize (the stress
# tool's batch loops always set the result they read): a warning there.
SAN_CFLAGS  := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
               -Wno-error=maybe-uninitialized
SAN_LDFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
SAN_TESTS   := primitives structures copybuf_items negative-primitives registration identity fence \
               examples stress_quick stress_progress $(if $(wildcard tests/pool.c),pool)
.PHONY: check-sanitize
check-sanitize:
	$(MAKE) BUILD=$(SAN_BUILD) CFLAGS="$(SAN_CFLAGS)" LDFLAGS="$(SAN_LDFLAGS)" lib examples \
		$(addprefix $(SAN_BUILD)/bin/,rseqkit-info rseqkit-stress rseqkit-stress-noarm) \
		$(SAN_TESTS:%=$(SAN_BUILD)/tests/%.t)
	BUILD=$(SAN_BUILD) CC="$(CC)" CFLAGS="$(SAN_CFLAGS)" \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
		prove --exec env $(SAN_TESTS:%=$(SAN_BUILD)/tests/%.t)

# ThreadSanitizer: the library, the structures' tests, the examples and a
# few stress runs built with -fsanitize=thread; every ThreadSanitizer
# report is collected (TSAN_OPTIONS=log_path, exit status 66) and summed up
# by tests/bin/tsan-report.sh; any report fails.  TSan sees nothing inside
# the asm sections: the headers tell it what a section orders
# (<rseqkit/tsan.h>), and the negative control builds two examples without
# those annotations (RSEQKIT_TSAN_UNANNOTATED), which must be reported
# (within 5 runs: whether two threads meet on one shard is the scheduler's
# choice, and sharded_lock went unreported in 3 to 6 runs of 40 here).
# x86-64 (and other 64-bit hosts) only: TSan has no i386 runtime.
TSAN_BUILD   := build-tsan
TSAN_CFLAGS  := -O1 -g -fsanitize=thread -fno-omit-frame-pointer -Wno-error=tsan \
                -Wno-error=maybe-uninitialized
TSAN_LDFLAGS := -fsanitize=thread
TSAN_TESTS   := primitives structures $(if $(wildcard tests/pool.c),pool)
TSAN_STRESS  := s l b m i r p
.PHONY: check-tsan
check-tsan:
	$(MAKE) BUILD=$(TSAN_BUILD) CFLAGS="$(TSAN_CFLAGS)" LDFLAGS="$(TSAN_LDFLAGS)" lib examples \
		$(TSAN_BUILD)/bin/rseqkit-stress $(TSAN_TESTS:%=$(TSAN_BUILD)/tests/%.t)
	@rm -rf $(TSAN_BUILD)/reports && mkdir -p $(TSAN_BUILD)/reports
	@st=0; export TSAN_OPTIONS="halt_on_error=0 exitcode=66 log_path=$(abspath $(TSAN_BUILD))/reports"; \
	for t in $(TSAN_TESTS); do \
		TSAN_OPTIONS="$$TSAN_OPTIONS/$$t" $(TSAN_BUILD)/tests/$$t.t >$(TSAN_BUILD)/reports.$$t.tap 2>&1; \
		rc=$$?; echo "check-tsan: $$t.t: exit $$rc, $$(grep -c '^not ok' $(TSAN_BUILD)/reports.$$t.tap) not ok"; \
		[ $$rc = 0 ] || st=1; \
	done; \
	for e in $(notdir $(EXAMPLES)); do \
		TSAN_OPTIONS="$$TSAN_OPTIONS/example-$$e" $(TSAN_BUILD)/examples/$$e >/dev/null 2>&1; \
		rc=$$?; echo "check-tsan: examples/$$e: exit $$rc"; [ $$rc = 0 ] || st=1; \
	done; \
	for t in $(TSAN_STRESS); do \
		out=$$(TSAN_OPTIONS="$$TSAN_OPTIONS/stress-$$t" $(TSAN_BUILD)/bin/rseqkit-stress -T $$t -t 8 -r 2000 -2 500 2>/dev/null | tail -n 1); \
		rc=$$?; echo "check-tsan: rseqkit-stress -T $$t: $${out##* }"; \
		case $$out in *" OK") ;; *) st=1 ;; esac; \
	done; \
	tests/bin/tsan-report.sh $(TSAN_BUILD)/reports || st=1; \
	for e in sharded_lock freelist; do \
		$(CC) -std=gnu11 -D_GNU_SOURCE -Iinclude $(TSAN_CFLAGS) -DRSEQKIT_TSAN_UNANNOTATED \
			-o $(TSAN_BUILD)/unannotated-$$e examples/$$e.c $(TSAN_BUILD)/lib/librseqkit.a \
			$(TSAN_LDFLAGS) -pthread 2>/dev/null || { st=1; continue; }; \
		for try in 1 2 3 4 5; do \
			TSAN_OPTIONS="exitcode=66 report_bugs=1" $(TSAN_BUILD)/unannotated-$$e >/dev/null 2>&1; rc=$$?; \
			[ $$rc = 66 ] && break; \
		done; \
		if [ $$rc = 66 ]; then echo "check-tsan: negative control: examples/$$e without the annotations: races reported (exit 66, run $$try), as they must be"; \
		else echo "check-tsan: negative control FAILED: examples/$$e without the annotations exited $$rc in 5 runs, no race reported"; st=1; fi; \
	done; exit $$st

# cppcheck and clang-tidy over the library (src/*/*.c and, through them, every
# header of include/rseqkit/ for x86-64 and i386), with the checked-in
# configurations .cppcheck-suppressions and .clang-tidy: zero findings.
CPPCHECK  ?= cppcheck
CLANG_TIDY ?= clang-tidy
.PHONY: check-analyze
check-analyze:
	for arch in __x86_64__ __i386__; do \
		$(CPPCHECK) --std=c11 --enable=warning,style,performance,portability,information \
			--inline-suppr --suppressions-list=.cppcheck-suppressions --error-exitcode=1 -q \
			--template='{file}:{line}: {severity} {id}: {message}' \
			-D__GNUC__=12 -D__linux__ -D$$arch -D_GNU_SOURCE -DRSEQKIT_ANALYZER -Iinclude -Isrc src/ || exit 1; \
	done
	$(CLANG_TIDY) --quiet $(LIB_SRC) -- -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -pthread
	$(CLANG_TIDY) --quiet $(LIB_SRC) -- -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -pthread -DRSEQKIT_INJECT

# The library, tools and tests at -O0, -O1, -O3 and with link-time
# optimisation, each running primitives.t and structures.t (gcc 12 at -O1
# once miscompiled an asm goto output: x86-64 pop).  With -flto,
# GCC's -Wmaybe-uninitialized sees through rsk_counter_exchange() into
# errno values it cannot bound (the stress tool's `old` is set whenever
# the call returns 0): a warning there, not an error.
OPT_TESTS := primitives structures
.PHONY: check-opt check-opt-i386
check-opt:
	$(MAKE) BUILD=build-O0 CFLAGS="-O0 -g" LDFLAGS= lib tools tests
	BUILD=build-O0 prove --exec env $(OPT_TESTS:%=build-O0/tests/%.t)
	$(MAKE) BUILD=build-O1 CFLAGS="-O1 -g" LDFLAGS= lib tools tests
	BUILD=build-O1 prove --exec env $(OPT_TESTS:%=build-O1/tests/%.t)
	$(MAKE) BUILD=build-O3 CFLAGS="-O3 -g" LDFLAGS= lib tools tests
	BUILD=build-O3 prove --exec env $(OPT_TESTS:%=build-O3/tests/%.t)
	$(MAKE) BUILD=build-lto CFLAGS="-O2 -g -flto=auto" \
		LDFLAGS="-flto=auto -Wno-error=maybe-uninitialized" lib tools tests
	BUILD=build-lto prove --exec env $(OPT_TESTS:%=build-lto/tests/%.t)
	@$(MAKE) --no-print-directory check-opt-i386

# i386 at -O0, position-independent (Debian's default), with injection:
# the build where the fewest registers are free for a section's operands
# (six in the gated copy, with the GOT pointer taken).  It runs the same
# tests, and five stress tests with delays at each of their asm points
# and signals, which must restart sections (aborts=0 fails).
# Needs gcc -m32 (gcc-multilib); without it a SKIP naming the package,
# which fails under CI=true.  On a kernel that cannot execute i386
# binaries it builds everything and says SKIP (the machine's limit).
# Whether gcc -m32 builds a program with the C library's headers: a bare
# main() links even without gcc-multilib's <asm/...> headers.
M32_PROBE = printf '\#include <errno.h>\n\#include <pthread.h>\nint main(void){return 0;}\n' | \
	gcc -m32 -x c -o /dev/null - >/dev/null 2>&1
check-opt-i386:
	@if $(M32_PROBE) && ! tests/bin/deps.sh runs32 gcc -m32; then \
		$(MAKE) --no-print-directory BUILD=build-32-O0 CC="gcc -m32" CFLAGS="-O0 -g" LDFLAGS= \
			lib tools tests && \
		echo "check-opt-i386: SKIP: built, not run: this kernel cannot execute i386 binaries (this machine)"; \
	elif $(M32_PROBE); then \
		$(MAKE) --no-print-directory BUILD=build-32-O0 CC="gcc -m32" CFLAGS="-O0 -g" LDFLAGS= \
			lib tools tests && \
		BUILD=build-32-O0 prove --exec env $(OPT_TESTS:%=build-32-O0/tests/%.t) && \
		for t in m s l b i; do \
			d=; for p in $$(build-32-O0/bin/rseqkit-stress -T $$t -P); do \
				[ $$p -le 4 ] && d="$$d -$$p 3000"; done; \
			out=$$(build-32-O0/bin/rseqkit-stress -T $$t -t 20 -r 2000 $$d -7 -1 -m 16 -k 2>&1) || \
				{ echo "$$out"; exit 1; }; \
			echo "$$out" | tail -n 1; \
			case $$out in *" aborts=0 "*) echo "check-opt-i386: no section restarted"; exit 1 ;; esac; \
		done && echo "check-opt-i386: ok (gcc -m32 -O0 -fpie, injection)"; \
	else \
		echo "check-opt-i386: SKIP: gcc -m32 cannot link (apt-get install gcc-multilib, or sudo make deps)"; \
		if [ "$$CI" = true ]; then echo "check-opt-i386: FAILED: CI=true, and the skip is for a missing package"; exit 1; fi; \
	fi

# musl (musl-gcc, from musl-tools): no libc registration there, so the
# library owns it, in its own TLS area.  The primitives and structures
# tests and the quick stress tier.  (rseqkit-bench needs glibc.)  Without
# musl-gcc: a SKIP line naming the package, which fails under CI=true.
MUSL_BUILD := build-musl
.PHONY: check-musl check-musl-run
check-musl:
	@if command -v musl-gcc >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory check-musl-run; \
	else \
		echo "check-musl: SKIP: musl-gcc not installed (apt-get install musl-tools, or sudo make deps)"; \
		if [ "$$CI" = true ]; then echo "check-musl: FAILED: CI=true, and the skip is for a missing package"; exit 1; fi; \
		echo "check-musl: nothing run (1 skipped)"; \
	fi
check-musl-run:
	$(MAKE) BUILD=$(MUSL_BUILD) CC=musl-gcc lib \
		$(addprefix $(MUSL_BUILD)/bin/,rseqkit-info rseqkit-stress rseqkit-stress-noarm) \
		$(MUSL_BUILD)/tests/primitives.t $(MUSL_BUILD)/tests/structures.t \
		$(MUSL_BUILD)/tests/stress_quick.t
	BUILD=$(MUSL_BUILD) prove --exec env $(MUSL_BUILD)/tests/primitives.t \
		$(MUSL_BUILD)/tests/structures.t $(MUSL_BUILD)/tests/stress_quick.t
	@echo "check-musl: OK (musl-gcc build; primitives, structures, quick stress tier)"

# qemu-user (qemu-aarch64-static) returns ENOSYS for rseq: the aarch64
# programs built by check-cross must run every operation on slow paths.
# Ends with what was skipped and the package that enables it (a skip
# fails under CI=true).
.PHONY: check-qemu-user
check-qemu-user:
	@rm -rf build/tap-qemu-user
	@st=0; TAP_LOG_DIR=build/tap-qemu-user prove --exec tests/bin/tap-run.sh tests/qemu/qemu-user.sh || st=1; \
	tests/bin/deps.sh summary check-qemu-user build/tap-qemu-user || st=1; exit $$st

# What this make would use (for tests/install.sh and for people).
.PHONY: print-config
print-config:
	@printf '%s\n' 'VERSION=$(VERSION)' 'WARN=$(WARN)' 'PREFIX=$(PREFIX)' 'LIBDIR=$(LIBDIR)' \
		'BINDIR=$(BINDIR)' 'INCLUDEDIR=$(INCLUDEDIR)' 'MANDIR=$(MANDIR)' 'DATADIR=$(DATADIR)'

# The dependencies the compiler wrote for each library object (-MMD -MP):
# a header edit rebuilds the objects that include it.
-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/obj/*/*/*.d)
