#!/usr/bin/env bash
# Installs everything drsvc needs on this machine, idempotently:
#   - the Python virtual environment at .venv (drsvc and its dev tools, editable)
#   - Apache Kafka broker, tools and connect-mirror jars from Maven Central
#   - Spark's Kafka source jars for the pinned PySpark, from Maven Central
#   - a consul agent built from the Go module proxy with this machine's Go toolchain
#   - a toxiproxy server built the same way (the links between sites of 'drsvc dev up --links')
#   - Debian's chromium and chromium-driver, when missing and apt is usable (the operator
#     dashboard's browser tests drive them headless; nothing else needs them)
# into a cache outside the repository (DRSVC_CACHE_DIR, default ~/.cache/drsvc), then writes
# <cache>/installed.json, the manifest the Python side reads to find them.
#
# The Consul build is by far the longest stage on a cold machine, so it starts first, in the
# background, and the other stages run while it compiles. Re-running is cheap: every stage is
# skipped when its output is already complete for the pinned versions.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
source "$repo/deploy/versions.env"
cache=${DRSVC_CACHE_DIR:-$HOME/.cache/drsvc}
maven_settings=${DRSVC_MAVEN_SETTINGS:-$repo/deploy/maven-settings.xml}
python_bin=${DRSVC_PYTHON:-python3.11}
mkdir -p "$cache/logs"
timings="$cache/logs/install-timings.txt"

say() { printf '[install] %s\n' "$*"; }
die() { printf '[install] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }
record() { printf '%s %s %ss\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" >>"$timings"; }

require() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is required but not on PATH ($2)"
}

# ---------------------------------------------------------------- prerequisites
require java "Java 17 or newer runs the Kafka brokers"
require mvn "Maven fetches the Kafka and Spark jars from Maven Central"
require go "Go builds the consul agent from the Go module proxy"
command -v "$python_bin" >/dev/null 2>&1 || python_bin=python3
"$python_bin" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "Python 3.11 is required (found $("$python_bin" --version 2>&1)); set DRSVC_PYTHON"
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = \([0-9]*\).*/\1/p')
[ "${java_major:-0}" -ge 17 ] || die "Java 17 or newer is required (found ${java_major:-unknown})"

# ---------------------------------------------------------------- consul (background)
consul_version=$(sed -n 's#^\tgithub.com/hashicorp/consul \(v[0-9.]*\).*#\1#p' "$repo/deploy/consul/go.mod" | head -n 1)
[ -n "$consul_version" ] || die "cannot read the consul version from deploy/consul/go.mod"
go_version=$(GOTOOLCHAIN=local go env GOVERSION)
consul_dir="$cache/consul/${consul_version}-${go_version}"
consul_bin="$consul_dir/consul"
consul_log="$cache/logs/consul-build.log"
consul_pid=""
consul_started=$(now)
if [ -x "$consul_bin" ] && "$consul_bin" version >/dev/null 2>&1; then
  say "consul $consul_version (built with $go_version): cached"
else
  say "consul $consul_version: building with $go_version in the background (log: $consul_log)"
  (
    set -e
    export GOTOOLCHAIN=local GOFLAGS=-modcacherw
    export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
    mkdir -p "$consul_dir"
    cd "$repo/deploy/consul"
    go mod download github.com/hashicorp/consul
    echo "== build"
    # -v names every package as it is compiled: the install counts them to show progress.
    go build -v -trimpath -o "$consul_bin.tmp" github.com/hashicorp/consul
    mv "$consul_bin.tmp" "$consul_bin"
  ) >"$consul_log" 2>&1 &
  consul_pid=$!
fi

# ---------------------------------------------------------------- python environment
stage_start=$(now)
venv="$repo/.venv"
stamp="$venv/.drsvc-installed"
want=$(cat "$repo/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/drsvc" ]; then
  say "python environment .venv: up to date"
else
  say "python environment .venv: installing drsvc and its dependencies (pip)"
  [ -x "$venv/bin/python" ] || "$python_bin" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null
  "$venv/bin/python" -m pip install --progress-bar off -e "$repo[dev]" \
    >"$cache/logs/pip-install.log" 2>&1 \
    || { tail -n 30 "$cache/logs/pip-install.log" >&2; die "pip install failed (log: $cache/logs/pip-install.log)"; }
  echo "$want" >"$stamp"
  record python-env $(( $(now) - stage_start ))
  say "python environment .venv: done in $(( $(now) - stage_start ))s"
fi

# ---------------------------------------------------------------- toxiproxy
# A small build (seconds once the modules are cached): it runs in the foreground, beside the
# consul build, and only when its binary for the pinned version and this Go is missing.
toxiproxy_version=$(sed -n 's#^\tgithub.com/Shopify/toxiproxy/v2 \(v[0-9.]*\).*#\1#p' "$repo/deploy/toxiproxy/go.mod" | head -n 1)
[ -n "$toxiproxy_version" ] || die "cannot read the toxiproxy version from deploy/toxiproxy/go.mod"
toxiproxy_dir="$cache/toxiproxy/${toxiproxy_version}-${go_version}"
toxiproxy_bin="$toxiproxy_dir/toxiproxy-server"
if [ -x "$toxiproxy_bin" ] && "$toxiproxy_bin" -version >/dev/null 2>&1; then
  say "toxiproxy $toxiproxy_version (built with $go_version): cached"
else
  stage_start=$(now)
  toxiproxy_log="$cache/logs/toxiproxy-build.log"
  say "toxiproxy $toxiproxy_version: building with $go_version (log: $toxiproxy_log)"
  (
    set -e
    export GOTOOLCHAIN=local GOFLAGS=-modcacherw
    export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
    mkdir -p "$toxiproxy_dir"
    cd "$repo/deploy/toxiproxy"
    go mod download github.com/Shopify/toxiproxy/v2
    go build -trimpath -o "$toxiproxy_bin.tmp" github.com/Shopify/toxiproxy/v2/cmd/server
    mv "$toxiproxy_bin.tmp" "$toxiproxy_bin"
  ) >"$toxiproxy_log" 2>&1 \
    || { tail -n 30 "$toxiproxy_log" >&2; die "building toxiproxy failed (log: $toxiproxy_log)"; }
  record "toxiproxy-$toxiproxy_version" $(( $(now) - stage_start ))
  say "toxiproxy: built in $(( $(now) - stage_start ))s"
fi

# ---------------------------------------------------------------- maven-resolved jars
# fetch_jars NAME POM OUTDIR [extra maven args...]: copies runtime dependencies of POM into
# OUTDIR, atomically (a half-copied directory is never taken for a complete one).
fetch_jars() {
  local name=$1 pom=$2 out=$3
  shift 3
  if [ -f "$out/.complete" ]; then
    say "$name: cached"
    return
  fi
  local started
  started=$(now)
  say "$name: resolving from Maven Central"
  rm -rf "$out.tmp"
  mvn -B -q -s "$maven_settings" -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$out.tmp" "$@" \
    >"$cache/logs/maven-$name.log" 2>&1 \
    || { tail -n 20 "$cache/logs/maven-$name.log" >&2; die "maven could not resolve $name (log: $cache/logs/maven-$name.log)"; }
  touch "$out.tmp/.complete"
  rm -rf "$out"
  mv "$out.tmp" "$out"
  record "$name" $(( $(now) - started ))
  say "$name: done in $(( $(now) - started ))s"
}

kafka_libs="$cache/kafka-$KAFKA_VERSION/libs"
fetch_jars "kafka-$KAFKA_VERSION" "$repo/deploy/kafka/pom.xml" "$kafka_libs" \
  -Dkafka.version="$KAFKA_VERSION"

pyspark_pin=$(sed -n 's/.*"pyspark==\([0-9.]*\)".*/\1/p' "$repo/pyproject.toml")
[ "$pyspark_pin" = "$SPARK_VERSION" ] \
  || die "deploy/versions.env SPARK_VERSION=$SPARK_VERSION but pyproject.toml pins pyspark==$pyspark_pin"
spark_jars="$cache/spark-kafka-$SPARK_VERSION/jars"
# PySpark already ships Scala, Hadoop client, logging and compression jars: copying them again
# would put two versions on Spark's classpath.
fetch_jars "spark-kafka-$SPARK_VERSION" "$repo/deploy/spark/pom.xml" "$spark_jars" \
  -Dspark.version="$SPARK_VERSION" \
  -DexcludeArtifactIds=hadoop-client-api,hadoop-client-runtime,scala-library,slf4j-api,lz4-java,snappy-java,jsr305,spark-tags_2.13,zstd-jni

# ---------------------------------------------------------------- headless browser (tests only)
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  say "chromium and chromedriver: present"
elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  stage_start=$(now)
  say "chromium and chromedriver: installing from Debian (for the dashboard's browser tests)"
  browser_log="$cache/logs/apt-chromium.log"
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver; }
  if apt_install >"$browser_log" 2>&1 || { apt-get update -q >>"$browser_log" 2>&1 && apt_install >>"$browser_log" 2>&1; }; then
    record chromium $(( $(now) - stage_start ))
    say "chromium and chromedriver: done in $(( $(now) - stage_start ))s"
  else
    say "warning: could not install chromium (log: $browser_log); the dashboard's browser tests will fail"
  fi
else
  say "warning: chromium and chromedriver are missing and cannot be installed here (needs root and apt);"
  say "         install them for the dashboard's browser tests; nothing else needs them"
fi

# ---------------------------------------------------------------- wait for consul
if [ -n "$consul_pid" ]; then
  say "consul: waiting for the build to finish (first build downloads and compiles for minutes)"
  while kill -0 "$consul_pid" 2>/dev/null; do
    sleep 20
    kill -0 "$consul_pid" 2>/dev/null || break
    compiled=$(sed -n '/^== build$/,$p' "$consul_log" 2>/dev/null | grep -v -e '^== build$' -e '^go: ' | grep -c . || true)
    say "consul: still building, $(( $(now) - consul_started ))s so far, ${compiled:-0} packages compiled (about 2,000 in all)"
  done
  wait "$consul_pid" || { tail -n 30 "$consul_log" >&2; die "building consul failed (log: $consul_log)"; }
  record "consul-$consul_version" $(( $(now) - consul_started ))
  say "consul: built in $(( $(now) - consul_started ))s"
fi
"$consul_bin" version >/dev/null 2>&1 || die "the consul binary at $consul_bin does not run"

# ---------------------------------------------------------------- manifest
manifest="$cache/installed.json"
"$venv/bin/python" - "$manifest" <<PY
import json, os, sys
manifest = {
    "format": 1,
    "kafka": {"version": "$KAFKA_VERSION", "libs": "$kafka_libs"},
    "spark_kafka": {"version": "$SPARK_VERSION", "jars": sorted(
        os.path.join("$spark_jars", name) for name in os.listdir("$spark_jars") if name.endswith(".jar"))},
    "consul": {"version": "$consul_version", "go": "$go_version", "binary": "$consul_bin"},
    "toxiproxy": {"version": "$toxiproxy_version", "go": "$go_version", "binary": "$toxiproxy_bin"},
}
tmp = sys.argv[1] + ".tmp"
with open(tmp, "w") as fh:
    json.dump(manifest, fh, indent=2)
os.replace(tmp, sys.argv[1])
PY
say "ready: manifest $manifest"
