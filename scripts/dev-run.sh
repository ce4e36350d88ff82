#!/usr/bin/env bash
# Starts a local Free Agent farm: the controller on its built-in PostgreSQL
# and one worker with the local driver (builds run as plain processes on
# this machine: no VM isolation). Prints the URL and an admin API key. Data
# lives in .run/ (delete it to start over). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

run_dir=${FREEAGENT_RUN_DIR:-.run}
data_dir=${FREEAGENT_DATA_DIR:-$run_dir/controller}
listen=${FREEAGENT_LISTEN:-127.0.0.1:8080}
controller=bin/freeagent-controller
mkdir -p "$run_dir"
log="$run_dir/controller.log"

"$controller" serve --data-dir "$data_dir" --listen "$listen" >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; exit 0' INT TERM EXIT

url=""
for _ in $(seq 1 300); do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "the controller exited; its log ($log):" >&2
		cat "$log" >&2
		exit 1
	fi
	url=$(sed -n 's/.*listening on \(http[^" ]*\).*/\1/p' "$log" | head -1)
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

# The worker: local driver, so a submitted build really runs here.
FREEAGENT_API_KEY=$(cat "$worker_key_file") bin/freeagent run --vm-driver local --controller-url "$url" \
	--data-dir "$run_dir/agent" --bootstrap bin/freeagent-vm --name "make-run-worker" >"$run_dir/agent.log" 2>&1 &
agent_pid=$!

cat <<MSG

  Free Agent controller: $url
  Dashboard:             $url/  (sign in with the admin key)
  Admin API key:         $key   (saved in $key_file)
  Log:                   $log (worker: $run_dir/agent.log)

  Try it:
    curl -s $url/health/ready
    curl -s -H "X-API-Key: $key" $url/api/builds
    $controller keys create --name my-mac --role worker --data-dir $data_dir

  Submit an Expo project (app.json with a slug; eas.json profiles and
  credentials.json are honoured; a package.json "freeagent:build" script that
  writes files into \$FREEAGENT_ARTIFACTS_DIR replaces the default pipeline):
    EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$key \\
      bin/expo-build submit path/to/project --platform android --profile production --wait

  Ctrl-C stops the worker, the controller and its database.

MSG
tail -n +1 -f "$log" "$run_dir/agent.log" &
tail_pid=$!
stop_all() {
	kill "$tail_pid" 2>/dev/null
	kill -TERM "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
	exit 0
}
trap stop_all INT TERM EXIT
wait "$pid"
