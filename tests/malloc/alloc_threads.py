# SPDX-License-Identifier: MIT
# An allocation-heavy threaded Python program with a deterministic output:
# THREADS threads each build and tear down dictionaries, lists, strings,
# byte strings and sets of every size from a few bytes to a few hundred
# KiB (objects freed on other threads through a shared queue), then print
# digests that do not depend on scheduling.  Used by tests/malloc_real.sh
# (output compared under each allocator) and tools/bench-real.py (timed).
#
#   python3 alloc_threads.py [ROUNDS] [THREADS]
import hashlib
import queue
import sys
import threading

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4


def lcg(seed):
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield x >> 33


def work(tid, handoff, results):
    r = lcg(tid + 1)
    h = hashlib.sha256()
    for rnd in range(ROUNDS):
        d = {}
        for i in range(3000):
            k = "k%d-%d" % (next(r) % 5000, i % 7)
            d[k] = [next(r) % 1000 for _ in range(next(r) % 16)]
        for k in sorted(d)[::3]:
            del d[k]
        big = [bytes(next(r) % 256 for _ in range(64)) * (1 + next(r) % 64) for _ in range(200)]
        s = set("".join(chr(97 + next(r) % 26) for _ in range(1 + next(r) % 12)) for _ in range(2000))
        text = ",".join(sorted(s))
        h.update(text.encode())
        h.update(repr(sorted(d.items())[:50]).encode())
        h.update(b"".join(sorted(big)[:20]))
        # Objects made here, freed by whichever thread takes them.
        handoff.put([bytearray(next(r) % 4096) for _ in range(50)])
        try:
            handoff.get_nowait()  # which list comes is the scheduler's choice: not hashed
        except queue.Empty:
            pass
        del d, big, s, text
    results[tid] = h.hexdigest()


handoff = queue.Queue()
results = [None] * THREADS
ts = [threading.Thread(target=work, args=(t, handoff, results)) for t in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for t, digest in enumerate(results):
    print(t, digest)
