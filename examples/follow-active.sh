#!/usr/bin/env bash
# A consumer in no particular language that follows an application's failovers: Consul's HTTP API
# (curl, jq) and Kafka's own console consumer, following docs/client-protocol.md step by step.
#
#   examples/follow-active.sh --consul HOST:PORT --namespace NS --app APP --preferred ALIAS \
#       --group GROUP --include REGEX [--lease-s SECONDS] [--kafka-classpath CP]
#
# It watches drsvc/<NS>/apps/<APP>/active with blocking queries, runs the console consumer on the
# active cluster (its servers from the kafka-<alias> service in Consul), stops it (which commits
# what it printed) when the key says none or when Consul has not answered within the lease, and
# starts it again on the new cluster, where the failover set the group's offsets. Records go to
# stdout, one value per line; what it does goes to stderr, each line starting "follow-active:".
#
# Values it acts on, as the Python client: a document drsvc wrote whose epoch is not lower than
# the highest seen (nor names another cluster at that epoch), or an absent key (the preferred
# cluster at epoch 0, under --lease-s, the application's lease_s in the topology, default 15).
# A plain alias or "none" typed by hand, an older epoch, or an absent key after a document count
# as none. The watch waits a quarter of the shorter of the document's lease and --lease-s, and
# the console consumer is stopped when the lease runs out even while an answer is awaited.
# Whatever ends the script (TERM, INT, an error), the console consumer is stopped with it, and
# killed if it has not stopped within 10 s.
#
# Left out for brevity: holding a local partition until the remote copies are read up to the
# failover's cut-off (per-key order across a switch; see the protocol). The Kafka classpath
# defaults to the jars the drsvc install step put in its cache.
set -euo pipefail

consul="" namespace="" app="" preferred="" group="" include=""
classpath="${KAFKA_CLASSPATH:-}" lease_s=15
while [ $# -gt 0 ]; do
  case "$1" in
    --consul) consul=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --app) app=$2; shift 2 ;;
    --preferred) preferred=$2; shift 2 ;;
    --group) group=$2; shift 2 ;;
    --include) include=$2; shift 2 ;;
    --lease-s) lease_s=$2; shift 2 ;;
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
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo "${t:0:-3}"; }   # no fork: answers are timed
configured_ms=$(awk -v s="$lease_s" 'BEGIN { printf "%d", s * 1000 }')
[ "$configured_ms" -gt 0 ] || { echo "follow-active: --lease-s must be positive" >&2; exit 2; }

index=0 heard_ms=0 lease_ms=$configured_ms
cluster="" epoch=-1 why=""      # what the key says (cluster "" : none, and why)
highest=-1 highest_cluster=""   # the highest epoch acted on, and what it named
running="" running_epoch=-1 pid="" curl_pid="" workdir="" judged=""

stop_consumer() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true   # the console consumer commits on the way out
  local waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 100 ]; do
    nap 0.1; waited=$(( waited + 1 ))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    say "the console consumer on $running did not stop within 10 s: killed"
  fi
  wait "$pid" 2>/dev/null || true
  say "stopped consuming on $running ($1)"
  pid="" running="" running_epoch=-1
}

start_consumer() {
  local servers
  servers=$(curl -sf --max-time 5 "http://$consul/v1/catalog/service/kafka-$1" \
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

cleanup() {
  trap '' TERM INT                       # a second signal must not cut the cleanup short
  [ -z "$curl_pid" ] || kill -TERM "$curl_pid" 2>/dev/null || true
  stop_consumer exiting
  wait 2>/dev/null || true               # reap them all: nothing of ours outlives the script
  [ -z "$workdir" ] || rm -rf "$workdir"
}
# On TERM or INT exit (bash runs the trap as soon as the "wait" below is interrupted); whatever
# ends the script, the EXIT trap stops the console consumer.
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
workdir=$(mktemp -d)

lease_lapsed() { [ $(( $(now_ms) - heard_ms )) -ge "$lease_ms" ]; }
# A pause without a process: read from a pipe nobody writes to, for at most $1 seconds (a busy
# machine starting a JVM makes every fork slow, and the lease is short).
exec {never_fd}<> <(:)
nap() { read -r -t "$1" -u "$never_fd" _ || true; }

# A document drsvc wrote, as "cluster|epoch|lease_ms" (cluster empty: none); fails on anything else.
document_fields='select(type == "object" and (.epoch | type == "number")
    and (.epoch | . >= 0 and floor == .)
    and (.cluster | (type == "string" and test("^[a-zA-Z0-9._-]+$")) or . == null)
    and ((.lease_ms // 1) | type == "number" and . > 0 and floor == .))
  | "\(.cluster // "")|\(.epoch)|\(.lease_ms // 15000)"'

judge() {  # the body of an answer ($1: HTTP code) -> cluster, epoch, why; and the lease
  local body=$workdir/body parsed
  if [ "$1" = 404 ]; then
    if [ "$highest" -gt 0 ] || { [ -n "$highest_cluster" ] && [ "$highest_cluster" != "$preferred" ]; }
    then
      cluster="" epoch=0 why="stale-epoch: the key was deleted after epoch $highest"
    else
      cluster=$preferred epoch=0 why="" lease_ms=$configured_ms
    fi
  elif parsed=$(jq -er "$document_fields" "$body" 2>/dev/null); then
    local c e l
    IFS='|' read -r c e l <<<"$parsed"
    if [ "$e" -lt "$highest" ]; then
      cluster="" epoch=$e why="stale-epoch: epoch $e is older than epoch $highest"
    elif [ "$e" -eq "$highest" ] && [ "$c" != "$highest_cluster" ]; then
      cluster="" epoch=$e why="stale-epoch: epoch $e now names ${c:-none}"
    else
      cluster=$c epoch=$e why="" lease_ms=$l highest=$e highest_cluster=$c
    fi
  else
    cluster="" epoch=-1 why="not-a-document: $(head -c 80 "$body")"
  fi
}

while true; do
  # Blocking query: answers on a change, or after the wait (a quarter of the shorter lease).
  shorter=$(( lease_ms < configured_ms ? lease_ms : configured_ms ))
  wait_ms=$(( shorter / 4 )); [ "$wait_ms" -ge 1 ] || wait_ms=1
  # Consul's wait and its jitter (1/16) plus as much again: about half the lease in all.
  max_ms=$(( wait_ms * 17 / 16 + (wait_ms > 500 ? wait_ms : 500) ))
  sent=$(now_ms)
  curl -s -o "$workdir/body" -D "$workdir/headers" -w '%{http_code}' \
    --max-time "$(( max_ms / 1000 )).$(printf '%03d' $(( max_ms % 1000 )))" \
    "http://$consul/v1/kv/$key?raw&index=$index&wait=${wait_ms}ms" >"$workdir/code" 2>/dev/null &
  curl_pid=$!
  # Wait for the answer in short steps: a lease that runs out meanwhile stops the consumer on
  # time, and a TERM is acted on at once.
  while kill -0 "$curl_pid" 2>/dev/null; do
    if [ -n "$running" ] && lease_lapsed; then
      stop_consumer "no answer from Consul within the lease"
    fi
    nap 0.05
  done
  wait "$curl_pid" 2>/dev/null || true
  curl_pid="" code=""
  read -r code <"$workdir/code" 2>/dev/null || true
  if [ "$code" = 200 ] || [ "$code" = 404 ]; then
    index=0
    while IFS=$' \t\r' read -r name value _; do
      [ "${name,,}" != "x-consul-index:" ] || index=$value
    done <"$workdir/headers"
    if [ "$index:$code" != "$judged" ]; then   # a new value: an unchanged one was judged
      previous_why=$why
      judge "$code"
      judged=$index:$code
      if [ -n "$why" ] && [ "$why" != "$previous_why" ]; then
        say "the active key counts as no active cluster ($why)"
      fi
    fi
    [ -n "$why" ] || heard_ms=$sent        # the lease runs from when the request left
  else
    say "Consul did not answer (HTTP ${code:-none})"
    nap 0.2
  fi

  usable=$cluster
  if lease_lapsed; then
    usable=""                              # the lease lapsed: stop, whatever the key said
  fi
  if [ -n "$running" ] && { [ "$usable" != "$running" ] || [ "$epoch" != "$running_epoch" ]; }; then
    stop_consumer "${usable:+now active: }${usable:-no active cluster}"
  fi
  if [ -n "$usable" ] && [ -z "$running" ]; then
    start_consumer "$usable" "$epoch"
  fi
done
