#!/usr/bin/env bash
# `make run`: a name server and one broker as local processes, in the foreground.
# Ctrl-C (or SIGTERM) stops both cleanly: the broker first, then the name server.
set -euo pipefail
BIN=${BIN:-.venv/bin}
NAMESRV_PORT=${NAMESRV_PORT:-9876}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p data

"$BIN/mqnamesrv" -p "$NAMESRV_PORT" &
NS_PID=$!
BROKER_PID=
stop() {
    trap - INT TERM EXIT
    [ -n "$BROKER_PID" ] && kill -TERM "$BROKER_PID" 2>/dev/null && wait "$BROKER_PID" || true
    kill -TERM "$NS_PID" 2>/dev/null && wait "$NS_PID" || true
}
trap stop INT TERM EXIT

"$BIN/mqbroker" -c "$HERE/broker-a.properties" -n "127.0.0.1:$NAMESRV_PORT" &
BROKER_PID=$!
echo "aiorocketmq: connect clients with NAMESRV_ADDR=127.0.0.1:$NAMESRV_PORT (broker-a on 127.0.0.1:10911, store in ./data); Ctrl-C stops" >&2
wait -n "$NS_PID" "$BROKER_PID"
