#!/usr/bin/env bash
# Runs the GPU test binaries built by scripts/gpu/build.sh. Run it on the
# GPU machine from the repository root (no Go needed there):
#
#   scripts/gpu/run.sh                  # tests, then benchmarks
#   GPU_BENCH=0 scripts/gpu/run.sh      # tests only
#   GPU_RUN='TestGPUFlag' scripts/gpu/run.sh
#   GPU_A2A_BENCH=0 scripts/gpu/run.sh  # without the bench-a2a tables
#
# FERRY_TEST_REQUIRE defaults to "cuda" here: on the GPU machine a missing
# driver or device is a failure, not a skip. Each binary runs in its
# package directory (so testdata/ paths work); logs go to .gpu/results/.
# A short table comes last; the exit status is non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=.gpu
if [ ! -s "$OUT/manifest" ]; then
	echo "gpu-run: no $OUT/manifest: run scripts/gpu/build.sh first (on a machine with Go)" >&2
	exit 2
fi

export FERRY_TEST_REQUIRE=${FERRY_TEST_REQUIRE-cuda}
libpath="$PWD/$OUT/lib"
for d in "${CUDA_HOME:-}" /usr/local/cuda; do
	if [ -n "$d" ] && [ -d "$d/lib64" ]; then libpath="$libpath:$d/lib64"; fi
done
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
RUN=${GPU_RUN:-.}
BENCH=${GPU_BENCH:-1}
BENCHTIME=${GPU_BENCHTIME:-1s}
TIMEOUT=${GPU_TIMEOUT:-15m}
mkdir -p "$OUT/results"
[ -f "$OUT/BUILD" ] && sed 's/^/gpu-run: /' "$OUT/BUILD"
command -v nvidia-smi >/dev/null 2>&1 &&
	nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader | sed 's/^/gpu-run: gpu /'

status=0
while read -r bin dir; do
	name=${bin%.test}
	log="$OUT/results/$name.log"
	args=(-test.v -test.count=1 -test.timeout="$TIMEOUT" -test.run="$RUN")
	if [ "$BENCH" = 1 ]; then args+=(-test.bench=. -test.benchtime="$BENCHTIME" -test.benchmem); fi
	echo "gpu-run: $bin (in $dir) ${args[*]}"
	(cd "$dir" && "$OLDPWD/$OUT/bin/$bin" "${args[@]}") 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	echo "$rc" >"$OUT/results/$name.rc"
	[ "$rc" -ne 0 ] && status=1
done <"$OUT/manifest"

# compute-sanitizer (racecheck, synccheck) over the a2a kernels: eight
# ranks on the GPU in lock step, where the toolkit has the sanitizer.
SANITIZE=${GPU_SANITIZE:-1}
SANITIZE_RUN=${GPU_SANITIZE_RUN:-TestGPUEightRanksOneGPU/lock-step}
sanitized=()
if [ "$SANITIZE" = 1 ] && command -v compute-sanitizer >/dev/null 2>&1 && grep -q '^a2a_cudabackend.test ' "$OUT/manifest"; then
	dir=$(awk '$1 == "a2a_cudabackend.test" { print $2 }' "$OUT/manifest")
	for tool in racecheck synccheck; do
		log="$OUT/results/a2a_cudabackend.$tool.log"
		echo "gpu-run: compute-sanitizer --tool $tool a2a_cudabackend.test -test.run=$SANITIZE_RUN"
		(cd "$dir" && compute-sanitizer --tool "$tool" --error-exitcode 3 "$OLDPWD/$OUT/bin/a2a_cudabackend.test" \
			-test.v -test.count=1 -test.timeout="$TIMEOUT" -test.run="$SANITIZE_RUN") >"$log" 2>&1
		rc=$?
		[ "$rc" -ne 0 ] && status=1
		sanitized+=("$tool:$rc")
	done
fi

# bench-a2a on the one GPU: every rank in one process, one NVLink domain
# (device memory; the in-process fabric carries only count rows and
# signals), decode and prefill, lock step with CUDA graph replays, then
# concurrent streams. Prefill runs 4 ranks: 8 ranks of 4096 tokens need
# about 80 GB of device memory, more than an H100 leaves free. Each run's table goes to .gpu/results/bench-a2a.<name>.txt
# (JSON records beside it) and is printed again at the end.
A2A_BENCH=${GPU_A2A_BENCH:-1}
bench_runs=()
if [ "$A2A_BENCH" = 1 ] && [ -x "$OUT/bin/bench-a2a" ]; then
	common=(--backend cuda --hidden 7168 --scales 56 --in-dtype fp8 --out-dtype bf16 --experts 256 --topk 8 --check-iters 2)
	for shape in "decode 8 128 ${GPU_A2A_DECODE_ITERS:-200} 20" "prefill 4 4096 ${GPU_A2A_PREFILL_ITERS:-20} 3"; do
		read -r phase world tokens iters warmup <<<"$shape"
		for mode in lockstep concurrent; do
			name="$phase-W$world-$mode"
			extra=()
			[ "$mode" = lockstep ] && extra=(--graph)
			echo "gpu-run: bench-a2a $name"
			"$OUT/bin/bench-a2a" "${common[@]}" --world-size "$world" --nvlink "$world" --tokens "$tokens" \
				--iters "$iters" --warmup "$warmup" --mode "$mode" "${extra[@]}" \
				--json "$OUT/results/bench-a2a.$name.jsonl" 2>&1 | tee "$OUT/results/bench-a2a.$name.txt"
			rc=${PIPESTATUS[0]}
			[ "$rc" -ne 0 ] && status=1
			bench_runs+=("$name:$rc")
		done
	done
fi

# The table: one row per top-level test and per benchmark.
echo
echo "==================== GPU results ===================="
printf '%-16s %-44s %-5s %s\n' PACKAGE TEST RESULT DETAIL
while read -r bin dir; do
	name=${bin%.test}
	log="$OUT/results/$name.log"
	awk -v pkg="$name" '
		/^--- (PASS|FAIL|SKIP): / && $3 !~ /\// {
			res = $2; sub(":", "", res); t = $4; gsub(/[()]/, "", t)
			printf "%-16s %-44s %-5s %s\n", pkg, $3, res, t; n[res]++
		}
		/^Benchmark/ && NF >= 3 {
			detail = ""
			for (i = 3; i <= NF; i++) if ($i ~ /(ns\/op|MB\/s|_us|_GBps|_floor)$/) detail = detail $(i-1) " " $i "  "
			printf "%-16s %-44s %-5s %s\n", pkg, $1, "BENCH", detail
		}
		/^(panic:|FAIL\t)/ { crashed = 1 }
		END { printf "%-16s %-44s %-5s pass %d, fail %d, skip %d%s\n", pkg, "(total)", "", n["PASS"], n["FAIL"], n["SKIP"], crashed ? ", FAIL reported" : "" }
	' "$log"
	rc=$(cat "$OUT/results/$name.rc")
	[ "$rc" -ne 0 ] && printf '%-16s %-44s %-5s exit status %s (log: %s)\n' "$name" "(binary)" FAIL "$rc" "$log"
done <"$OUT/manifest"
for t in "${sanitized[@]}"; do
	res=PASS
	[ "${t#*:}" -ne 0 ] && res=FAIL
	printf '%-16s %-44s %-5s %s\n' a2a_cudabackend "compute-sanitizer ${t%%:*}" "$res" "exit ${t#*:} (log: $OUT/results/a2a_cudabackend.${t%%:*}.log)"
done
for b in "${bench_runs[@]}"; do
	res=PASS
	[ "${b#*:}" -ne 0 ] && res=FAIL
	printf '%-16s %-44s %-5s %s\n' bench-a2a "${b%%:*}" "$res" "exit ${b#*:} (table: $OUT/results/bench-a2a.${b%%:*}.txt)"
done
for b in "${bench_runs[@]}"; do
	echo
	echo "==================== bench-a2a ${b%%:*} ===================="
	cat "$OUT/results/bench-a2a.${b%%:*}.txt"
done
if [ $status -eq 0 ]; then echo "gpu-run: all passed"; else echo "gpu-run: FAILURES (see $OUT/results/)"; fi
exit $status
