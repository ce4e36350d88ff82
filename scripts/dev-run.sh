#!/usr/bin/env bash
# Starts a local Free Agent farm: the controller on its built-in PostgreSQL
# and one worker with the local driver (builds run as plain processes on
# this machine: no VM isolation). Prints the URL and an admin API key. Data
# lives in .run/ (delete it to start over). Ctrl-C stops everything.
#
# One farm per .run directory: a second start says the farm is running, with
# its URL and pid (.run/farm.pid; a file left by a killed run is replaced).
# The logs (.run/controller.log, .run/agent.log) are appended to, each run
# after a banner.
set -euo pipefail
cd "$(dirname "$0")/.."

run_dir=${FREEAGENT_RUN_DIR:-.run}
data_dir=${FREEAGENT_DATA_DIR:-$run_dir/controller}
listen=${FREEAGENT_LISTEN:-127.0.0.1:8080}
bin=${FREEAGENT_BIN_DIR:-bin}
controller=$bin/freeagent-controller
mkdir -p "$run_dir"
log="$run_dir/controller.log"
agent_log="$run_dir/agent.log"
pid_file="$run_dir/farm.pid"

# farm_alive PID: the pid is a running dev-run.sh (not a reused pid).
farm_alive() {
	kill -0 "$1" 2>/dev/null || return 1
	command -v ps >/dev/null 2>&1 || return 0
	ps -o args= -p "$1" 2>/dev/null | grep -q dev-run
}

# farm.pid: this script's pid, the URL once known, then its children's pids.
# noclobber makes the claim atomic: of two starts at once, one wins.
claim() { (set -o noclobber; echo "$$" >"$pid_file") 2>/dev/null; }
if ! claim; then
	old_pid=$(sed -n 1p "$pid_file" 2>/dev/null || true)
	if [[ "$old_pid" =~ ^[0-9]+$ ]] && farm_alive "$old_pid"; then
		old_url=$(sed -n 2p "$pid_file" 2>/dev/null || true)
		echo "The farm of $run_dir is already running: ${old_url:-starting} (make run, pid $old_pid)." >&2
		echo "Use it, or stop it with Ctrl-C in its terminal (or kill $old_pid) before starting another." >&2
		exit 1
	fi
	rm -f "$pid_file" # left by a run that was killed
	if ! claim; then
		echo "another make run is starting on $run_dir (see $pid_file)" >&2
		exit 1
	fi
fi

controller_pid="" agent_pid="" tail_pids=""
# shellcheck disable=SC2317 # called by the traps
stop_all() {
	trap - INT TERM EXIT
	for p in $tail_pids; do kill "$p" 2>/dev/null || true; done
	if [ -n "$agent_pid" ]; then
		kill -TERM "$agent_pid" 2>/dev/null || true
		wait "$agent_pid" 2>/dev/null || true
	fi
	if [ -n "$controller_pid" ]; then
		kill -TERM "$controller_pid" 2>/dev/null || true
		wait "$controller_pid" 2>/dev/null || true
	fi
	if [ "$(sed -n 1p "$pid_file" 2>/dev/null)" = "$$" ]; then
		rm -f "$pid_file"
	fi
}
trap 'stop_all; echo "Stopped the farm of $run_dir." >&2; exit 0' INT TERM
trap stop_all EXIT

banner="=== make run: $(date '+%Y-%m-%d %H:%M:%S') pid $$ ==="
echo "$banner" >>"$log"
echo "$banner" >>"$agent_log"
log_from=$(($(wc -c <"$log") + 1))
agent_log_from=$(($(wc -c <"$agent_log") + 1))

"$controller" serve --data-dir "$data_dir" --listen "$listen" >>"$log" 2>&1 &
controller_pid=$!

url=""
for _ in $(seq 1 300); do
	if ! kill -0 "$controller_pid" 2>/dev/null; then
		echo "the controller exited; its log ($log):" >&2
		tail -c "+$log_from" "$log" >&2
		exit 1
	fi
	url=$(tail -c "+$log_from" "$log" | sed -n 's/.*listening on \(http[^" ]*\).*/\1/p' | head -1)
	[ -n "$url" ] && break
	sleep 0.1
done
[ -n "$url" ] || { echo "the controller did not start within 30 s; see $log" >&2; exit 1; }

# One admin key per .run directory, kept (0600) so it can be shown again.
key_file="$run_dir/admin.key"
if [ ! -s "$key_file" ]; then
	(umask 077; "$controller" keys create --name "make run admin" --role admin --data-dir "$data_dir" >"$key_file" 2>/dev/null)
fi
key=$(cat "$key_file")
worker_key_file="$run_dir/worker.key"
if [ ! -s "$worker_key_file" ]; then
	(umask 077; "$controller" keys create --name "make run worker" --role worker --data-dir "$data_dir" >"$worker_key_file" 2>/dev/null)
fi

# The worker: local driver, so a submitted build really runs here (Android;
# iOS too on a Mac with Xcode). The person at the keyboard started it for
# their own builds, so the polite-guest rules that wait for an idle Mac, for
# mains power and for a VM's worth of free disk do not apply; the schedule,
# heat and memory rules do (docs/polite-guest.md). Android is set, not
# detected: the README's sample app brings a stand-in Gradle and needs a JDK
# but no Android SDK, which a worker left to detect it would ask for
# (`bin/freeagent doctor --vm-driver local` says what this host builds).
# iOS stays only on a Mac with Xcode. FREEAGENT_PLATFORMS overrides.
FREEAGENT_API_KEY=$(cat "$worker_key_file") "$bin/freeagent" run --vm-driver local --controller-url "$url" \
	--platforms "${FREEAGENT_PLATFORMS:-android,ios}" \
	--data-dir "$run_dir/agent" --bootstrap "$bin/freeagent-vm" --name "make-run-worker" \
	--idle-minutes 0 --build-on-battery --min-free-gb 2 >>"$agent_log" 2>&1 &
agent_pid=$!
printf '%s\n%s\ncontroller %s\nworker %s\n' "$$" "$url" "$controller_pid" "$agent_pid" >"$pid_file"

cat <<MSG

  Free Agent controller: $url
  Dashboard:             $url/  (sign in with the admin key)
  Admin API key:         $key   (saved in $key_file)
  Log:                   $log (worker: $agent_log)

  Try it:
    curl -s $url/health/ready
    curl -s -H "X-API-Key: $key" $url/api/builds
    $controller keys create --name my-mac --role worker --data-dir $data_dir

  Build the sample app (its stand-in Gradle needs a JDK, zipalign and apksigner):
    EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$key \\
      $bin/expo-build build vmbootstrap/testdata/android-app --platform android

  Or your own Expo project (package.json and app.json with a slug; eas.json
  profiles and credentials.json are honoured; a package.json
  "freeagent:build" script that writes files into \$FREEAGENT_ARTIFACTS_DIR
  replaces the default pipeline):
    EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$key \\
      $bin/expo-build build path/to/project --platform android --profile production

  Ctrl-C stops the worker, the controller and its database.

MSG
tail -c "+$log_from" -f "$log" &
tail_pids=$!
tail -c "+$agent_log_from" -f "$agent_log" &
tail_pids="$tail_pids $!"
status=0
wait "$controller_pid" || status=$?
controller_pid=""
echo "the controller exited (status $status); see $log" >&2
exit 1
