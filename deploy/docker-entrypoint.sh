#!/bin/sh
# aiorocketmq image entry point: the first argument picks the role.
#
#   mqnamesrv [args]   name server on $NAMESRV_PORT (9876)
#   mqbroker  [args]   broker: $ROCKETMQ_BROKER_CONF (a layout file, optional), then one
#                      line per BROKER_<key>=value variable (RocketMQ's property names,
#                      e.g. BROKER_brokerIP1=203.0.113.7 so clients outside the compose
#                      network reach the advertised address); NAMESRV_ADDR names the
#                      name servers ("ns1:9876;ns2:9876")
#   mqadmin | mqcluster [args]
#   health             the HEALTHCHECK: asks the running node over the protocol
#   anything else      run as given
set -eu
STATE="${HOME:-/tmp}/.aiorocketmq-node"

broker_conf() {
    conf="${HOME:-/tmp}/broker.properties"
    : > "$conf"
    if [ -n "${ROCKETMQ_BROKER_CONF:-}" ]; then
        cat "$ROCKETMQ_BROKER_CONF" >> "$conf"
        echo >> "$conf"
    fi
    # Later lines win in a .properties file: the environment overrides the layout.
    env | sed -n 's/^BROKER_\([A-Za-z0-9_.]*\)=\(.*\)$/\1=\2/p' >> "$conf"
    echo "$conf"
}

case "${1:-mqnamesrv}" in
    mqnamesrv)
        [ $# -gt 0 ] && shift
        port="${NAMESRV_PORT:-9876}"
        echo "namesrv 127.0.0.1:$port" > "$STATE"
        exec mqnamesrv --listenPort "$port" "$@"
        ;;
    mqbroker)
        shift
        conf=$(broker_conf)
        port=$(sed -n 's/^listenPort=\([0-9]*\).*/\1/p' "$conf" | tail -n 1)
        echo "broker 127.0.0.1:${port:-10911}" > "$STATE"
        exec mqbroker -c "$conf" "$@"
        ;;
    health)
        read -r role addr < "$STATE"
        exec python - "$role" "$addr" <<'PY'
import asyncio, sys
from aiorocketmq.deploy import probe
role, addr = sys.argv[1], sys.argv[2]
ask = probe.cluster_info if role == "namesrv" else probe.runtime_info
sys.exit(0 if asyncio.run(ask(addr)) is not None else 1)
PY
        ;;
    *)
        exec "$@"
        ;;
esac
