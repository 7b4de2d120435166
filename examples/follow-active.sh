#!/usr/bin/env bash
# A consumer in no particular language that follows an application's failovers: Consul's HTTP API
# (curl, jq) and Kafka's own console consumer, following docs/client-protocol.md step by step.
#
#   examples/follow-active.sh --consul HOST:PORT --namespace NS --app APP --preferred ALIAS \
#       --group GROUP --include REGEX [--kafka-classpath CP]
#
# It watches drsvc/<NS>/apps/<APP>/active with blocking queries, runs the console consumer on the
# active cluster (its servers from the kafka-<alias> service in Consul), stops it (which commits
# what it printed) when the key says none or when Consul has not answered within the lease, and
# starts it again on the new cluster, where the failover set the group's offsets. Records go to
# stdout, one value per line; what it does goes to stderr, each line starting "follow-active:".
#
# Left out for brevity: holding a local partition until the remote copies are read up to the
# failover's cut-off (per-key order across a switch; see the protocol). The Kafka classpath
# defaults to the jars the drsvc install step put in its cache.
set -euo pipefail

consul="" namespace="" app="" preferred="" group="" include=""
classpath="${KAFKA_CLASSPATH:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --consul) consul=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --preferred) preferred=$2; shift 2 ;;
    --group) group=$2; shift 2 ;;
    --include) include=$2; shift 2 ;;
    --kafka-classpath) classpath=$2; shift 2 ;;
    *) echo "follow-active: unknown argument $1" >&2; exit 2 ;;
  esac
done
for name in consul namespace app preferred group include; do
  [ -n "${!name}" ] || { echo "follow-active: --$name is required" >&2; exit 2; }
done
for tool in curl jq java; do
  command -v "$tool" >/dev/null || { echo "follow-active: $tool is required" >&2; exit 2; }
done
if [ -z "$classpath" ]; then
  manifest="${DRSVC_CACHE_DIR:-$HOME/.cache/drsvc}/installed.json"
  [ -f "$manifest" ] || { echo "follow-active: no Kafka jars: set KAFKA_CLASSPATH" >&2; exit 2; }
  classpath="$(jq -r .kafka.libs "$manifest")/*"
fi

key="drsvc/$namespace/apps/$app/active"
say() { echo "follow-active: $*" >&2; }
now_ms() { date +%s%3N; }

index=0 heard_ms=0 lease_ms=15000
cluster="" epoch=-1             # what the key says
running="" running_epoch=-1 pid=""

stop_consumer() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true   # the console consumer commits on the way out
  wait "$pid" 2>/dev/null || true
  say "stopped consuming on $running ($1)"
  pid="" running="" running_epoch=-1
}

start_consumer() {
  local servers
  servers=$(curl -sf "http://$consul/v1/catalog/service/kafka-$1" \
    | jq -r '.[0].ServiceMeta.bootstrap_servers // empty') || servers=""
  if [ -z "$servers" ]; then
    say "no kafka-$1 service in Consul yet"
    return 0
  fi
  java -Xmx128m -cp "$classpath" org.apache.kafka.tools.consumer.ConsoleConsumer \
    --bootstrap-server "$servers" --group "$group" --include "$include" \
    --consumer-property auto.offset.reset=earliest 2>/dev/null &
  pid=$! running=$1 running_epoch=$2
  say "consuming on $1 (epoch $2)"
}

trap 'stop_consumer exiting; exit 0' INT TERM

while true; do
  # Blocking query: answers on a change, or after the wait (a quarter of the lease) without one.
  wait_s=$(( lease_ms / 4000 )); [ "$wait_s" -ge 1 ] || wait_s=1
  sent=$(now_ms)
  body=$(mktemp) headers=$(mktemp)
  code=$(curl -s -o "$body" -D "$headers" -w '%{http_code}' --max-time $(( wait_s + 2 )) \
    "http://$consul/v1/kv/$key?raw&index=$index&wait=${wait_s}s") || code=000
  if [ "$code" = 200 ] || [ "$code" = 404 ]; then
    index=$(tr -d '\r' <"$headers" | sed -n 's/^[Xx]-[Cc]onsul-[Ii]ndex: *//p')
    heard_ms=$sent                         # the lease runs from when the request left
    if [ "$code" = 404 ]; then
      cluster=$preferred epoch=0           # no key: the preferred cluster
    elif jq -e 'type == "object"' "$body" >/dev/null 2>&1; then
      cluster=$(jq -r '.cluster // ""' "$body")
      epoch=$(jq -r '.epoch // 0' "$body")
      lease_ms=$(jq -r '.lease_ms // 15000' "$body")
    else
      cluster=$(tr -d ' \n"' <"$body") epoch=0
      [ "$cluster" != none ] && [ "$cluster" != null ] || cluster=""
    fi
  else
    say "Consul did not answer (HTTP $code)"
    sleep 0.2
  fi
  rm -f "$body" "$headers"

  usable=$cluster
  if [ $(( $(now_ms) - heard_ms )) -ge "$lease_ms" ]; then
    usable=""                              # the lease lapsed: stop, whatever the key said
  fi
  if [ -n "$running" ] && { [ "$usable" != "$running" ] || [ "$epoch" != "$running_epoch" ]; }; then
    stop_consumer "${usable:+now active: }${usable:-no active cluster}"
  fi
  if [ -n "$usable" ] && [ -z "$running" ]; then
    start_consumer "$usable" "$epoch"
  fi
done
