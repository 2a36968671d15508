#!/usr/bin/env bash
# The Python tests (`make py-test`), in two halves at once: the tests marked `realtime` (they
# run namespaces, switches and real TCP on the machine's clock, mostly waiting) alone in the
# foreground, one at a time as before; the others (simulations, parsers, the controller's
# service: CPU work) beside them at idle priority (SCHED_IDLE), so that they take only the CPU
# time the real-time half leaves over and never delay its wake-ups. Both halves' results are
# printed, with the reason of every skip (`-rs`: a real-time test skips when the machine stalled
# too many of its runs to decide), and the run fails if either failed.
#
# Once the other half has finished, one idle-priority busy loop per CPU keeps the CPUs awake
# until the real-time half ends: on a virtual machine, waking an idle vCPU is where most of the
# emulation's stalls come from (a SCHED_FIFO 1 ms sleep overshot by up to 1.8-11.6 ms on an idle
# 2-vCPU VM, 0.5-0.9 ms beside two such loops; `latnet reproduce lbf --emulated --quick` ran
# again 2, 4, 10 and 6 of its stalled runs without them, 1, 0, 1 and 1 beside them, interleaved),
# and a SCHED_IDLE task gives way to any other at once. Nothing a test measures or allows
# changes. LATNET_KEEP_AWAKE=0 turns it off; without SCHED_IDLE it is off.
#
# Usage: scripts/py-test.sh [PYTEST] [ARGS...]   (PYTEST defaults to .venv/bin/pytest; ARGS go
# to both halves). PY_TEST_BESIDE: a command run in the idle half too (`make test`: the Rust
# tests), its output printed after; its failure fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."
pytest=${1:-.venv/bin/pytest}
shift $(($# > 0 ? 1 : 0))

# Each half gets its own temporary directory; the idle half no pytest cache (the foreground
# half keeps `--lf` working).
tmp=$(mktemp -d -t latnet-py-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
idle=(chrt --idle 0)
if ! chrt --idle 0 true 2>/dev/null; then
	idle=(nice -n 19) # no SCHED_IDLE here: the lowest nice value is the next best
fi
"${idle[@]}" "$pytest" -q -rs -p no:cacheprovider -m "not realtime" --basetemp "$tmp/idle" "$@" \
	>"$tmp/idle.log" 2>&1 &
idle_pid=$!
beside_pid=
if [ -n "${PY_TEST_BESIDE:-}" ]; then
	# (when it ended, from this script's start, in its log: whether it or a half was the longer)
	(
		"${idle[@]}" bash -c "$PY_TEST_BESIDE"
		rc=$?
		echo "(ended ${SECONDS} s after py-test.sh started, exit $rc)"
		exit $rc
	) >"$tmp/beside.log" 2>&1 &
	beside_pid=$!
fi
busy() {
	kill -0 "$idle_pid" 2>/dev/null || { [ -n "$beside_pid" ] && kill -0 "$beside_pid" 2>/dev/null; }
}
if [ "${LATNET_KEEP_AWAKE:-1}" != 0 ] && [ "${idle[0]}" = chrt ]; then
	# (each loop ends when the real-time half has, or the temporary directory is gone; and
	# within two hours whatever happens)
	awake='while [ -d "$1" ] && [ ! -e "$1/stop" ]; do :; done'
	(
		while busy && [ ! -e "$tmp/stop" ]; do sleep 1; done
		[ -e "$tmp/stop" ] && exit 0
		for _ in $(seq "$(nproc)"); do
			timeout 7200 chrt --idle 0 sh -c "$awake" awake "$tmp" &
		done
		wait
	) &
fi
echo "py-test: tests not marked realtime run beside these at idle priority (printed after)"
"$pytest" -q -rs -m realtime "$@"
rt=$?
touch "$tmp/stop"
wait "$idle_pid"
other=$?
echo "--- py-test: the tests not marked realtime (run at idle priority) ---"
cat "$tmp/idle.log"
beside=0
if [ -n "$beside_pid" ]; then
	wait "$beside_pid"
	beside=$?
	echo "--- py-test: $PY_TEST_BESIDE (run at idle priority) ---"
	cat "$tmp/beside.log"
fi
# pytest's exit code 5 is "no tests collected": a selection that empties one half is not a
# failure of the other
failed=$((beside != 0))
for rc in "$rt" "$other"; do
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
		failed=1
	fi
done
if [ "$failed" -ne 0 ]; then
	also=${beside_pid:+, $PY_TEST_BESIDE: exit $beside}
	echo "py-test: failed (realtime half: exit $rt, the rest: exit $other$also)" >&2
	exit 1
fi
