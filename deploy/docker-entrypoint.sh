#!/bin/sh
# aiorocketmq image entry point: the first argument picks the role.
#
#   mqnamesrv [args]   name server on $NAMESRV_PORT (9876): $ROCKETMQ_NAMESRV_CONF (a
#                      namesrv.properties, optional), then one line per
#                      NAMESRV_<key>=value variable (e.g. NAMESRV_routeByClientNetwork=true;
#                      NAMESRV_ADDR and NAMESRV_PORT are not settings)
#   mqbroker  [args]   broker: $ROCKETMQ_BROKER_CONF (a layout file, optional), then one
#                      line per BROKER_<key>=value variable (RocketMQ's property names,
#                      e.g. BROKER_brokerIP1=203.0.113.7); NAMESRV_ADDR names the name
#                      servers ("ns1:9876;ns2:9876")
#   mqadmin | mqcluster [args]
#   health             the HEALTHCHECK: asks the running node, at the address its own
#                      ready line gave ($AIOROCKETMQ_READY_FILE), over the protocol
#   anything else      run as given
#
# Files go to $TMPDIR, not $HOME, so the image also runs under another uid (`user:`).
set -eu
TMP="${TMPDIR:-/tmp}"
READY="${AIOROCKETMQ_READY_FILE:-$TMP/aiorocketmq-ready}"
export AIOROCKETMQ_READY_FILE="$READY"

# properties FILE PREFIX BASE: BASE (optional), then every PREFIX<key>=value variable
# as key=value. Later lines win in a .properties file: the environment overrides BASE.
properties() {
    : > "$1"
    if [ -n "$3" ]; then
        cat "$3" >> "$1"
        echo >> "$1"
    fi
    env | sed -n "s/^$2\\([A-Za-z0-9_.]*\\)=\\(.*\\)\$/\\1=\\2/p" \
        | grep -v -e '^ADDR=' -e '^PORT=' >> "$1" || true
}

case "${1:-mqnamesrv}" in
    mqnamesrv)
        [ $# -gt 0 ] && shift
        # A ready file left by the previous run (docker start keeps /tmp) is not this run's.
        rm -f "$READY"
        properties "$TMP/namesrv.properties" NAMESRV_ "${ROCKETMQ_NAMESRV_CONF:-}"
        exec mqnamesrv -c "$TMP/namesrv.properties" --listenPort "${NAMESRV_PORT:-9876}" "$@"
        ;;
    mqbroker)
        shift
        rm -f "$READY"
        properties "$TMP/broker.properties" BROKER_ "${ROCKETMQ_BROKER_CONF:-}"
        exec mqbroker -c "$TMP/broker.properties" "$@"
        ;;
    health)
        [ -s "$READY" ] || { echo "not ready: no $READY yet" >&2; exit 1; }
        exec python - "$READY" <<'PY'
import asyncio, sys
from aiorocketmq.deploy import probe
line = open(sys.argv[1], encoding="utf-8").read().split()
fields = dict(word.split("=", 1) for word in line[2:] if "=" in word)
# The port the node bound, on loopback: the advertised host may be one this
# container cannot reach (BROKER_IP, the Docker host's LAN address).
addr = "127.0.0.1:" + fields["address"].rsplit(":", 1)[1]
ask = probe.cluster_info if line[0] == "mqnamesrv" else probe.runtime_info
sys.exit(0 if asyncio.run(ask(addr)) is not None else 1)
PY
        ;;
    *)
        exec "$@"
        ;;
esac
