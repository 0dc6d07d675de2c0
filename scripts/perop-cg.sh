#!/usr/bin/env bash
# Instructions per operation of the engine's per-operation path, counted by
# valgrind's callgrind (not part of the build: install valgrind to use it).
# Unlike wall-clock benchmarks the counts do not move with the machine's
# load, so two revisions can be compared on a busy machine.
#
#   scripts/perop-cg.sh [REV...]     (no REV, or ".": the work tree)
#
# For each revision it builds the fabric test binary with the work tree's
# fabric/perop_cg_test.go (a revision without the harness's hooks gets
# fabric/export_perop_test.go, adapted to older field names) and runs
# TestPerOpInstructions under callgrind, counting only perOpMeasure: the
# submit -> accept -> post -> poll -> completion path over the null
# provider, driven on the worker's own goroutine, no idle passes, no GC.
# Printed per case: the engine's instructions per op (per page for paged,
# per empty pass for idle; imm1 takes one request per pass, as a worker
# that keeps up with its submitter does), and in brackets the total including the null
# provider's PostWrites and Poll.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=/usr/local/go/bin:$PATH GOFLAGS=-buildvcs=false
if ! command -v valgrind >/dev/null; then
	echo "perop-cg: needs valgrind (apt-get install valgrind)" >&2
	exit 2
fi
[ $# -gt 0 ] || set -- .
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# legacy_export is the harness's hooks for revisions whose workers took
# requests from a channel.
legacy_export() {
	cat <<'EOF'
package fabric

func PerOpOnWorker(e *Engine, fn func()) {
	done := make(chan struct{})
	e.main().queue.ctl <- func(*worker) { fn(); close(done) }
	<-done
}

func PerOpPass(e *Engine) {
	w := e.main()
	w.now = nanotime()
	for i := 0; i < reqsPerPass; i++ {
		select {
		case r := <-w.queue.reqs:
			w.accept(&r)
			continue
		default:
		}
		break
	}
	w.progress()
	w.flush()
}
EOF
}

build() { # rev out
	local rev=$1 out=$2 d
	if [ "$rev" = . ]; then
		(cd "$root" && go test -c -o "$out" ./fabric)
		return
	fi
	d=$tmp/src
	rm -rf "$d"
	mkdir -p "$d"
	git -C "$root" archive "$rev" | tar -x -C "$d"
	# Every revision runs the work tree's cases (a newer case, such as
	# imm1, on an older revision too).
	cp "$root/fabric/perop_cg_test.go" "$d/fabric/"
	if [ ! -f "$d/fabric/export_perop_test.go" ]; then
		legacy_export >"$d/fabric/export_perop_test.go"
		# Older workers kept the queue's fields on the worker, and the
		# oldest had no cached clock.
		if ! (cd "$d" && go test -c -o "$out" ./fabric) >/dev/null 2>&1; then
			sed -i 's/\.queue\././g' "$d/fabric/export_perop_test.go"
			if ! (cd "$d" && go test -c -o "$out" ./fabric) >/dev/null 2>&1; then
				sed -i '/w.now = nanotime()/d' "$d/fabric/export_perop_test.go"
			fi
		fi
	fi
	(cd "$d" && go test -c -o "$out" ./fabric)
}

printf '%-12s %-18s %-18s %-18s %-18s %-18s\n' rev "imm /op" "imm1 /op" "paged100 /page" "paged10000 /page" "idle /pass"
for rev in "$@"; do
	bin=$tmp/fabric.test
	if ! build "$rev" "$bin" >"$tmp/build.log" 2>&1; then
		echo "$rev: build failed" >&2
		tail -5 "$tmp/build.log" >&2
		continue
	fi
	line=$(printf '%-12s' "$rev")
	for m in imm:20:5120 imm1:20:5120 paged100:20:8000 paged10000:2:80000 idle:5:5000; do
		IFS=: read -r mode rounds ops <<<"$m"
		out=$tmp/cg.$mode
		if ! GOGC=off GODEBUG=asyncpreemptoff=1 FERRY_PEROP_CG=$mode FERRY_PEROP_N=$rounds \
			valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*perOpMeasure*' \
			--callgrind-out-file="$out" "$bin" -test.run '^TestPerOpInstructions$' >"$out.log" 2>&1 ||
			! grep -q '^PASS' "$out.log"; then
			line="$line $(printf '%-18s' failed)"
			continue
		fi
		v=$(callgrind_annotate --inclusive=yes "$out" 2>/dev/null | awk -v ops="$ops" '
			/PROGRAM TOTALS/ {gsub(",", "", $1); tot = $1}
			/^ *[0-9,]+ .*memfabric\.\(\*Domain\)\.(PostWrites|Poll) \[/ {gsub(",", "", $1); prov += $1}
			END {printf "%.0f (%.0f)", (tot - prov) / ops, tot / ops}')
		line="$line $(printf '%-18s' "$v")"
	done
	echo "$line"
	rm -f "$tmp"/cg.*
done
