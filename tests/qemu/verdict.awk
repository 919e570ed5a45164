# verdict.awk - judge one boot's console log (written by init.c's markers).
#
#   awk -v name=NAME -v fs=F -v align=A -v cid=0|1 -v debug=0|1 -v slice=0|1 -f verdict.awk LOG
#
# fs/align/cid: what this kernel must show (feature size, alignment,
# mm_cid and node_id present); slice: it has the time-slice extension
# (check-slice's kernel); debug: the boot has rseq_debug=1, which the
# kernel must know and which must catch the syscall-in-section control.  Commands are labelled CONFIG.WHAT, CONFIG
# one of libc, library, own-area; shared commands (identity, registration)
# tag their TAP lines "[CONFIG]".  Per configuration it counts passed and
# failed checks (TAP points; each command's exit; each rseqkit-stress run;
# each fact rseqkit-info --json reports) and the aborts the output shows,
# then prints one line per configuration.  Failures are explained on
# lines starting with "  FAIL".  Exit status 1 if anything failed.

function cfg_of(label, c) {
	c = label
	sub(/\..*/, "", c)
	return (c in known) ? c : ""
}
function check(c, ok, what) {
	if (c == "")
		c = "libc"
	if (ok)
		pass[c]++
	else {
		fail[c]++
		fails = fails sprintf("  FAIL %s %s: %s\n", name, c, what)
	}
}
function json(key, m) {
	if (match(info, "\"" key "\": (\"[^\"]*\"|[^,}]*)")) {
		m = substr(info, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
		gsub(/"/, "", m)
		return m
	}
	return "(absent)"
}
function judge_info(c, want_owner, want_reason, want_size) {
	want_owner = c == "libc" ? "libc" : "library"
	want_reason = c == "libc" ? "libc" : "own area"
	want_size = c != "libc" && fs > 32 ? fs : 32
	check(c, json("available") == "true", "available: " json("available") " (" json("reason") ")")
	check(c, json("owner") == want_owner, "owner " json("owner") ", want " want_owner)
	check(c, index(json("reason"), want_reason) > 0, "reason '" json("reason") "'")
	check(c, json("feature_size") == fs, "feature_size " json("feature_size") ", want " fs)
	check(c, json("kernel_align") == align, "kernel_align " json("kernel_align") ", want " align)
	check(c, json("registered_size") == want_size,
	      "registered_size " json("registered_size") ", want " want_size)
	check(c, json("mm_cid_available") == (cid ? "true" : "false"),
	      "mm_cid_available " json("mm_cid_available"))
	check(c, json("node_id_available") == (cid ? "true" : "false"),
	      "node_id_available " json("node_id_available"))
	check(c, json("thread_registered") == "true", "thread_registered " json("thread_registered"))
	# The time-slice extension: only a kernel built with it (slice=1),
	# and only for a V2 registration (longer than 32 bytes).
	want_slice = slice && want_size > 32 ? "true" : "false"
	check(c, json("slice_ext_available") == want_slice,
	      "slice_ext_available " json("slice_ext_available") ", want " want_slice)
	size[c] = json("registered_size")
}

BEGIN {
	known["libc"] = known["library"] = known["own-area"] = 1
	order[1] = "libc"; order[2] = "library"; order[3] = "own-area"
}
# A marker glued to the end of firmware output (the console has no newline
# before init's first line): start the line at the marker.
/.@@rsk / { sub(/^.*@@rsk /, "@@rsk ") }
/^@@rsk kernel / { release = $3; next }
/^@@rsk done/ { done = 1; next }
/^@@rsk passed/ {
	if (debug)
		check("libc", $0 !~ /rseq_debug/, "the kernel does not know rseq_debug=1 (" $0 ")")
	next
}
/^@@rsk begin / {
	cur = $3; c = cfg_of(cur); plan = -1; taps = 0; bad = 0; info = ""; stress = ""
	next
}
/^@@rsk end / {
	label = $3; c = cfg_of(label); status = $4; s = $5
	sub(/^secs=/, "", s)
	if (c != "")
		used[c] += s
	if (label ~ /\.syscall-in-section/)
		check(c, status == "signal=11" || status == "exit=3",
		      label ": rseq_debug=1 let a system call inside a section pass (" status ")")
	else if (label ~ /\.negstress\./) {
		# One try of several: the unarmed twin must be caught in one
		# (judged at the end); a try can miss by chance.
		neg_tries[c]++
		if (status == "exit=1" && stress ~ /FAILED/)
			neg_caught[c]++
		else if (status != "exit=0")
			check(c, 0, label ": " status)
	}
	else
		check(c, status == "exit=0", label ": " status)
	if (plan >= 0)
		check(c, taps == plan, label ": " taps " TAP points for a plan of " plan)
	else if (label ~ /\.info$/)
		judge_info(c)
	if (label ~ /\.stress\.cid/ && !cid)
		check(c, stress ~ /mode=cpu\(cid unavailable\)/,
		      label ": without mm_cid the structure must fall back to cpu indexing")
	cur = ""
	next
}
cur == "" { if (/^\[ *[0-9]+\.[0-9]+\]/ && !/reboot: Power down/) notes = notes "  note " name ": " $0 "\n"; next }
/^1\.\.[0-9]+/ { plan = substr($1, 4) + 0; next }
/^(not )?ok [0-9]+/ {
	taps++
	t = c
	if (t == "" && match($0, /\[[a-z-]+\]/))
		t = substr($0, RSTART + 1, RLENGTH - 2)
	if (!(t in known))
		t = "libc"
	ok = $1 == "ok"
	check(t, ok, cur ": " $0)
	if (ok && match($0, /\([0-9]+ aborts\)/))
		aborts[t] += substr($0, RSTART + 1, RLENGTH - 9) + 0
	if (cur ~ /\.prim$/ && !cid && $0 ~ /^(not )?ok [0-9]+ - cid /)
		check(t, 0, cur ": cid mode ran without mm_cid: " $0)
	next
}
/^\{"available"/ { info = $0; next }
/^rseqkit-stress: / {
	stress = $0
	if (match($0, /aborts=[0-9]+/) && cur !~ /negstress/)
		aborts[c] += substr($0, RSTART + 7, RLENGTH - 7) + 0
	next
}
/^\[ *[0-9]+\.[0-9]+\]/ { notes = notes "  note " name " (" cur "): " $0 "\n"; next }
END {
	if (!done)
		check("libc", 0, "the boot did not finish" (cur != "" ? " (last: " cur ")" : ""))
	for (i = 1; i <= 3; i++)
		if (order[i] in size)
			check(order[i], aborts[order[i]] > 0,
			      "no aborts: the injected delays never made the kernel restart a section")
	for (c in neg_tries)
		check(c, neg_caught[c] > 0,
		      c ".negstress: the unarmed twin must report FAILED (0 of " neg_tries[c] " tries)")
	for (i = 1; i <= 3; i++) {
		c = order[i]
		if (!(c in size) && !(c in pass) && !(c in fail))
			continue
		sz = size[c] == "" ? "?" : size[c]
		printf "%-34s %-8s %3s %-6s  passed %4d  failed %2d  aborts %7d  %6.1fs\n",
		       name " " release, c, sz, (sz + 0 > 32 ? "V2" : "legacy"),
		       pass[c], fail[c], aborts[c], used[c]
	}
	printf "%s", notes fails
	exit (fails != "")
}
