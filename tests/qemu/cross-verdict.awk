# cross-verdict.awk - judge one check-cross run from its console log.
#
#   awk -v name=ARCH -v cid=0|1 -v secs=S -v boot=B -f cross-verdict.awk LOG
#
# LOG holds init.c's markers (@@rsk kernel/begin/end/done), from a qemu
# console or from check-cross.sh's native runner.  Commands are labelled:
#   prim, struct,       TAP programs: exit 0, every point ok, plan met
#   malloc.*
#   neg                 negative-primitives.t: exit 0 and it saw loss
#                       ("(N lost)" with N > 0 on an ok line)
#   info                rseqkit-info --json: available, thread registered,
#                       mm_cid available when cid=1
#   stress.*            rseqkit-stress: exit 0 and "OK" (in cid mode with
#                       cid=1 it must really index by mm_cid)
#   negstress.T.N       try N of rseqkit-stress-noarm -T T: "FAILED" with
#                       exit 1 (loss seen) or "OK" with exit 0 (a try
#                       that saw none); at least one try per T must fail
# A command passes or fails as a whole; the run also fails when the boot
# did not finish, when no command saw an abort, or when the negative
# controls saw no loss.  Aborts: "(N aborts)" on TAP lines plus
# "aborts=N" of each armed stress run.  Prints one line; failures follow
# on lines starting with "  FAIL".  Exit status 1 if anything failed.

function bad(what) {
	reasons = reasons sprintf("  FAIL %s %s: %s\n", name, cur_label, what)
	ok_cmd = 0
}
function json(key, m) {
	if (match(info, "\"" key "\": (\"[^\"]*\"|[^,}]*)")) {
		m = substr(info, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
		gsub(/"/, "", m)
		return m
	}
	return "(absent)"
}
# A marker glued to the end of other console output: start the line there.
/.@@rsk / { sub(/^.*@@rsk /, "@@rsk ") }
/^@@rsk kernel / { release = $3; next }
/^@@rsk done/ { done = 1; next }
/^@@rsk begin / {
	cur = $3; plan = -1; taps = 0; notok = 0; lost = 0; stress = ""; info = ""
	next
}
/^@@rsk end / {
	cur_label = $3; status = $4; ok_cmd = 1; run++
	if (cur ~ /^negstress/) {
		t = cur
		sub(/^negstress\./, "", t)
		sub(/\..*/, "", t)
		negtried[t] = 1
		if (status == "exit=1" && stress ~ /FAILED/) {
			negdetect[t] = 1
			negstress_ok++
		} else if (status != "exit=0" || stress !~ / OK/)
			bad("the unarmed twin: " status ", " stress)
	} else if (status != "exit=0")
		bad(status)
	if (plan >= 0 && taps != plan)
		bad(taps " TAP points for a plan of " plan)
	if (notok)
		bad(notok " TAP point(s) not ok")
	if (cur ~ /^(prim|struct|neg|malloc\..*)$/ && plan < 0)
		bad("no TAP plan")
	if (cur == "neg") {
		if (lost > 0)
			neg_ok = 1
		else
			bad("the negative control reported no loss")
	}
	if (cur ~ /^stress\./ && stress !~ / OK/)
		bad("no OK from rseqkit-stress (" stress ")")
	if (cur ~ /^stress\.cid/ && cid && stress ~ /cid unavailable/)
		bad("cid mode fell back to cpu indexing on a kernel with mm_cid")
	if (cur == "info") {
		if (json("available") != "true")
			bad("rseq not available: " json("reason"))
		if (json("thread_registered") != "true")
			bad("thread not registered")
		if (cid && json("mm_cid_available") != "true")
			bad("mm_cid not available")
		arch_seen = json("arch")
	}
	if (ok_cmd)
		passed++
	else
		failed++
	cur = ""
	next
}
cur == "" { next }
/^1\.\.[0-9]+/ { plan = substr($1, 4) + 0; next }
/^(not )?ok [0-9]+/ {
	line = $0
	taps++
	if (line ~ /^not ok/) {
		notok++
		reasons = reasons sprintf("  FAIL %s %s: %s\n", name, cur, line)
	}
	if (line ~ /^ok/ && match(line, /\([0-9]+ aborts\)/))
		aborts += substr(line, RSTART + 1, RLENGTH - 9) + 0
	if (line ~ /^ok/ && match(line, /\([0-9]+ lost\)/))
		lost += substr(line, RSTART + 1, RLENGTH - 7) + 0
	next
}
/\{"available"/ { info = substr($0, index($0, "{\"available\"")); next }
/rseqkit-stress: test=/ {
	stress = substr($0, index($0, "rseqkit-stress: test="))
	if (cur !~ /^negstress/ && match(stress, /aborts=[0-9]+/))
		aborts += substr(stress, RSTART + 7, RLENGTH - 7) + 0
	next
}
END {
	cur_label = "run"
	if (!done) {
		reasons = reasons sprintf("  FAIL %s: the run did not finish%s\n", name,
					  cur != "" ? " (last: " cur ")" : "")
		failed++
	}
	if (run > 0 && aborts == 0) {
		reasons = reasons sprintf("  FAIL %s: no aborts: the injected delays never made the kernel restart a section\n", name)
		failed++
	}
	for (t in negtried)
		if (!(t in negdetect)) {
			reasons = reasons sprintf("  FAIL %s: rseqkit-stress-noarm -T %s never reported FAILED\n", name, t)
			failed++
		}
	if (run > 0 && !neg_ok && negstress_ok == 0) {
		reasons = reasons sprintf("  FAIL %s: no negative control detected loss\n", name)
		failed++
	}
	printf "%-14s %-32s %5d %6d %6d %9d %6d %6d\n", name, release == "" ? "?" : release,
	       run, passed, failed, aborts, boot, secs
	printf "%s", reasons
	exit (failed > 0)
}
