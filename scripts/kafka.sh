#!/usr/bin/env bash
# Local Apache Kafka (KRaft) clusters for mirrorgate tests, without Docker.
#
#   scripts/kafka.sh fetch [VERSION]
#   scripts/kafka.sh start NAME [--nodes 1|3] [--version V] [--owner-pid PID] [--tiered] [--prop key=value ...]
#                    [--extra-listener LNAME@HOST[@ADVERTISED_HOST]] [--feature NAME=LEVEL ...]   (a second client
#                    listener per node on another loopback address and port; its bootstrap is written to
#                    <state>/NAME/bootstrap.LNAME; ADVERTISED_HOST, when given, is the host it advertises with the
#                    same port, and the bootstrap's host, e.g. a TCP relay's address in a benchmark)
#        --feature: a feature level given to `kafka-storage format --feature` (Kafka 3.9+, KIP-1022),
#        e.g. transaction.version=1 for a Kafka 4.x cluster with transaction version 1
#        --tiered: KIP-405 tiered storage on, remote tier = Kafka's LocalTieredStorage (a directory
#        under the cluster's state; from the kafka-storage test jar, fetched by fetch-tiered)
#        [--secure SSL|SASL_SSL|SASL_PLAINTEXT] [--client-auth none|requested|required]
#        [--user MECHANISM:NAME:PASSWORD ...]
#        --secure: one more listener SECURE for clients with that protocol (inter-broker and
#        controller listeners stay PLAINTEXT); certificates are made in <state>/NAME/tls by
#        openssl/keytool (ca.pem, client.pem, client.key, client-chain.pem, client.p12,
#        truststore.p12, truststore.jks; store password "changeit"); --user adds a PLAIN user or
#        a SCRAM-SHA-256/512 credential (kafka-storage format --add-scram). Stdout then has a
#        second line `secure=<bootstrap>` and a third `tls=<dir>`.
#   scripts/kafka.sh fetch-tiered [VERSION]    (org.apache.kafka:kafka-storage:VERSION:test jar)
#   scripts/kafka.sh stop NAME [--kill]      (--kill: SIGKILL at once instead of TERM, 10 s, KILL)
#   scripts/kafka.sh stop-node NAME N
#   scripts/kafka.sh start-node NAME N
#   scripts/kafka.sh status NAME               (per-node pid/port/up; exit 1 if a node is down)
#   scripts/kafka.sh tool TOOL-OR-CLASS args...
#   scripts/kafka.sh classpath [VERSION]
#
# Environment:
#   KAFKA_VERSION              default Kafka version (4.1.1)
#   MIRRORGATE_CACHE           jar cache root (default <repo>/.cache)
#   MIRRORGATE_KAFKA_DIR       cluster state root (default <repo>/.kafka)
#   MIRRORGATE_KAFKA_HEAP      broker -Xmx (default 384m)
#   MIRRORGATE_KAFKA_START_TIMEOUT   seconds to wait for readiness (default 90)
#   MIRRORGATE_KAFKA_STOP_TIMEOUT    seconds between TERM and KILL (default 10)
#   MIRRORGATE_KAFKA_KEEP=1    `stop` keeps <state>/NAME (logs) instead of deleting it
#   MIRRORGATE_KAFKA_FULL_JIT=1  brokers use the full tiered JIT (default: C1 only, faster startup)
#   MIRRORGATE_KAFKA_JAVA_OPTS / MIRRORGATE_TOOL_JAVA_OPTS   extra JVM options
#   MIRRORGATE_TOOL_HEAP       tool -Xmx (default 256m)
#
# Stdout carries only results (bootstrap line, classpath); progress and errors go to stderr.
# Exit codes: 0 ok, 1 failure, 2 usage error.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
SELF="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"
CACHE="${MIRRORGATE_CACHE:-$REPO/.cache}"
STATE="${MIRRORGATE_KAFKA_DIR:-$REPO/.kafka}"
DEFAULT_VERSION="${KAFKA_VERSION:-4.1.1}"
LOG4J_VERSION="${MIRRORGATE_LOG4J_VERSION:-2.24.3}"
BROKER_HEAP="${MIRRORGATE_KAFKA_HEAP:-384m}"
TOOL_HEAP="${MIRRORGATE_TOOL_HEAP:-256m}"
START_TIMEOUT="${MIRRORGATE_KAFKA_START_TIMEOUT:-90}"
STOP_TIMEOUT="${MIRRORGATE_KAFKA_STOP_TIMEOUT:-10}"

log() { printf '[kafka.sh] %s\n' "$*" >&2; }
die() { printf '[kafka.sh] ERROR: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,41p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit 2; }
now_ms() { date +%s%3N; }

need() { command -v "$1" >/dev/null 2>&1 || die "required command not found: $1"; }

kafka_home() { echo "$CACHE/kafka-$1"; }

# ---------------------------------------------------------------------------
# fetch
# ---------------------------------------------------------------------------
write_tools_log4j() {
  local f="$1"
  [[ -f "$f" ]] && return 0
  cat >"$f.tmp.$$" <<'EOF'
status = error
name = mirrorgate-tools
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
  mv -f "$f.tmp.$$" "$f"
}

cmd_fetch() {
  local version="${1:-$DEFAULT_VERSION}"
  local home; home="$(kafka_home "$version")"
  local libs="$home/libs" marker="$home/.fetched"
  if [[ -f "$marker" ]]; then
    write_tools_log4j "$home/tools-log4j2.properties"
    return 0
  fi
  need mvn; need java; need unzip
  mkdir -p "$CACHE"
  exec 8>"$CACHE/kafka-$version.lock"
  flock 8
  if [[ -f "$marker" ]]; then exec 8>&-; return 0; fi   # someone else finished meanwhile

  local t0; t0=$(now_ms)
  log "fetching Apache Kafka $version jars from Maven Central into $libs"
  local tmp; tmp="$(mktemp -d "${TMPDIR:-/tmp}/mirrorgate-kafka-fetch.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  # connect-mirror is optional: some Kafka releases (e.g. 4.4.0) are not on Central for it.
  local mirror_dep="<dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>$version</version></dependency>"
  gen_pom() {
  cat >"$tmp/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.mirrorgate.test</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$version</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$version</version></dependency>
    $1
    <!-- Logging backend. Kafka 4.x logs through slf4j (1.7.x API as of 4.1/4.4) and ships log4j2.
         Both slf4j bindings are included (slf4j 1.x uses log4j-slf4j-impl, slf4j 2.x uses
         log4j-slf4j2-impl); their own slf4j-api dependency is excluded so Kafka's version wins. -->
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-api</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version>
      <exclusions><exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version>
      <exclusions><exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-1.2-api</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
  }
  run_mvn() {
    rm -rf "$libs.tmp"
    mvn -B -f "$tmp/pom.xml" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$libs.tmp" >"$home/fetch-mvn.log" 2>&1
  }
  mkdir -p "$home"
  gen_pom "$mirror_dep"
  log "running mvn dependency:copy-dependencies (log: $home/fetch-mvn.log)"
  if ! run_mvn; then
    if grep '^\[ERROR\]' "$home/fetch-mvn.log" | grep -q 'org.apache.kafka:connect-mirror:jar'; then
      log "WARNING: org.apache.kafka:connect-mirror:$version is not on Maven Central; continuing without it"
      gen_pom ""
      run_mvn || { tail -n 40 "$home/fetch-mvn.log" >&2 || true; die "maven failed to resolve Kafka $version (see $home/fetch-mvn.log)"; }
    else
      tail -n 40 "$home/fetch-mvn.log" >&2 || true
      die "maven failed to resolve Kafka $version (see $home/fetch-mvn.log)"
    fi
  fi
  local n; n=$(find "$libs.tmp" -name '*.jar' | wc -l)
  [[ "$n" -gt 20 ]] || die "only $n jars resolved for Kafka $version; see $home/fetch-mvn.log"
  [[ -f "$libs.tmp/kafka_2.13-$version.jar" ]] || die "kafka_2.13-$version.jar missing after resolution"
  log "resolved $n jars; indexing classes"
  local j
  : >"$home/classes.idx.tmp"
  for j in "$libs.tmp"/kafka*.jar "$libs.tmp"/connect-*.jar; do
    [[ -f "$j" ]] || continue
    unzip -Z1 "$j" | grep '\.class$' | grep -v '\$' | sed 's/\.class$//; s#/#.#g' >>"$home/classes.idx.tmp" || true
  done
  rm -rf "$libs"
  mv "$libs.tmp" "$libs"
  mv -f "$home/classes.idx.tmp" "$home/classes.idx"
  write_tools_log4j "$home/tools-log4j2.properties"
  date -u +%FT%TZ >"$marker"
  rm -rf "$tmp"; trap - EXIT
  exec 8>&-
  log "Kafka $version ready: $n jars in $(( ($(now_ms) - t0) / 1000 ))s"
}

# The kafka-storage test jar (LocalTieredStorage) of VERSION, in <home>/tiered/.
cmd_fetch_tiered() {
  local version="${1:-$DEFAULT_VERSION}"
  ensure_fetched "$version"
  local dir; dir="$(kafka_home "$version")/tiered"
  local jar="$dir/kafka-storage-$version-test.jar"
  [[ -f "$jar" ]] && return 0
  need mvn
  exec 8>"$CACHE/kafka-$version.lock"
  flock 8
  if [[ ! -f "$jar" ]]; then
    log "fetching org.apache.kafka:kafka-storage:$version:test (LocalTieredStorage) into $dir"
    mkdir -p "$dir"
    mvn -B org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
      -Dartifact="org.apache.kafka:kafka-storage:$version:jar:test" -DoutputDirectory="$dir.tmp" \
      >"$dir/fetch-mvn.log" 2>&1 || { tail -n 20 "$dir/fetch-mvn.log" >&2; die "maven could not fetch the kafka-storage $version test jar"; }
    mv -f "$dir.tmp/kafka-storage-$version-test.jar" "$jar"
    rm -rf "$dir.tmp"
  fi
  exec 8>&-
}

ensure_fetched() { [[ -f "$(kafka_home "$1")/.fetched" ]] || cmd_fetch "$1"; }

classpath_of() {
  local libs; libs="$(kafka_home "$1")/libs"
  local cp="" j
  for j in "$libs"/*.jar; do cp="${cp:+$cp:}$j"; done
  echo "$cp"
}

cmd_classpath() {
  local version="${1:-$DEFAULT_VERSION}"
  ensure_fetched "$version"
  classpath_of "$version"
}

# ---------------------------------------------------------------------------
# tool
# ---------------------------------------------------------------------------
# Candidate main classes per short name; first one present in the jars wins.
tool_candidates() {
  case "$1" in
    topics) echo "org.apache.kafka.tools.TopicCommand kafka.admin.TopicCommand" ;;
    console-producer) echo "org.apache.kafka.tools.ConsoleProducer kafka.tools.ConsoleProducer" ;;
    console-consumer) echo "org.apache.kafka.tools.consumer.ConsoleConsumer kafka.tools.ConsoleConsumer" ;;
    consumer-groups) echo "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand kafka.admin.ConsumerGroupCommand" ;;
    configs) echo "org.apache.kafka.tools.ConfigCommand kafka.admin.ConfigCommand" ;;
    get-offsets) echo "org.apache.kafka.tools.GetOffsetShell kafka.tools.GetOffsetShell" ;;
    producer-perf) echo "org.apache.kafka.tools.ProducerPerformance" ;;
    consumer-perf) echo "org.apache.kafka.tools.ConsumerPerformance" ;;
    dump-log) echo "org.apache.kafka.tools.DumpLogSegments kafka.tools.DumpLogSegments" ;;
    broker-api-versions) echo "org.apache.kafka.tools.BrokerApiVersionsCommand kafka.admin.BrokerApiVersionsCommand" ;;
    delete-records) echo "org.apache.kafka.tools.DeleteRecordsCommand kafka.admin.DeleteRecordsCommand" ;;
    transactions) echo "org.apache.kafka.tools.TransactionsCommand" ;;
    acls) echo "org.apache.kafka.tools.AclCommand kafka.admin.AclCommand" ;;
    metadata-quorum) echo "org.apache.kafka.tools.MetadataQuorumCommand" ;;
    features) echo "org.apache.kafka.tools.FeatureCommand" ;;
    leader-election) echo "org.apache.kafka.tools.LeaderElectionCommand kafka.admin.LeaderElectionCommand" ;;
    reassign-partitions) echo "org.apache.kafka.tools.reassign.ReassignPartitionsCommand kafka.admin.ReassignPartitionsCommand" ;;
    storage) echo "kafka.tools.StorageTool" ;;
    mirror-maker) echo "org.apache.kafka.connect.mirror.MirrorMaker" ;;
    *) return 1 ;;
  esac
}

resolve_tool_class() {
  local version="$1" name="$2" idx c
  idx="$(kafka_home "$version")/classes.idx"
  if [[ "$name" == *.* ]]; then echo "$name"; return 0; fi   # fully-qualified class
  local cands
  cands="$(tool_candidates "$name")" || die "unknown tool '$name' (use a short name or a fully-qualified class)"
  for c in $cands; do
    if grep -qxF "$c" "$idx"; then echo "$c"; return 0; fi
  done
  die "no main class for tool '$name' in Kafka $version (tried: $cands)"
}

cmd_tool() {
  [[ $# -ge 1 ]] || usage
  local name="$1"; shift
  local version="$DEFAULT_VERSION"
  ensure_fetched "$version"
  local cls; cls="$(resolve_tool_class "$version" "$name")"
  local home; home="$(kafka_home "$version")"
  local jit=(-XX:TieredStopAtLevel=1)
  case "$name" in producer-perf|consumer-perf|*Performance) jit=() ;; esac
  # shellcheck disable=SC2086
  exec java -Xmx"$TOOL_HEAP" -XX:+UseSerialGC "${jit[@]}" -Xshare:auto -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$home/tools-log4j2.properties" \
    ${MIRRORGATE_TOOL_JAVA_OPTS:-} \
    -cp "$(classpath_of "$version")" "$cls" "$@"
}

# ---------------------------------------------------------------------------
# cluster helpers
# ---------------------------------------------------------------------------
# Pick COUNT free loopback TCP ports below the ephemeral range, avoiding ports
# recorded by other clusters in $STATE/*/ports. Must run under the global lock.
alloc_ports() {
  local count="$1"
  python3 - "$count" "$STATE" <<'EOF'
import glob, os, random, socket, sys
count, state = int(sys.argv[1]), sys.argv[2]
used = set()
for f in glob.glob(os.path.join(state, "*", "ports")):
    try:
        used.update(int(x) for x in open(f).read().split())
    except Exception:
        pass
lo, hi = 20000, 32000
try:
    a, _ = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    hi = min(hi, a - 1)
except Exception:
    pass
out, held = [], []
tries = 0
while len(out) < count:
    tries += 1
    if tries > 5000:
        sys.exit("could not find free ports")
    p = random.randint(lo, hi)
    if p in used or p in out:
        continue
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        s.close()
        continue
    held.append(s)
    out.append(p)
for s in held:
    s.close()
print(" ".join(map(str, out)))
EOF
}

# Readiness probe: send a Metadata v4 request (no topics) to 127.0.0.1:PORT and
# succeed if the broker answers and reports at least EXPECTED live brokers.
probe_metadata() {
  python3 - "$1" "$2" <<'EOF'
import socket, struct, sys
port, expected = int(sys.argv[1]), int(sys.argv[2])
def rd(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.settimeout(3)
    cid = b"mirrorgate-probe"
    body = struct.pack(">hhih", 3, 4, 7, len(cid)) + cid + struct.pack(">i?", 0, False)
    s.sendall(struct.pack(">i", len(body)) + body)
    n = struct.unpack(">i", rd(s, 4))[0]
    r = rd(s, n)
    corr, throttle, nb = struct.unpack(">iii", r[:12])
    if corr != 7:
        sys.exit(3)
    print(nb)
    sys.exit(0 if nb >= expected else 1)
except SystemExit:
    raise
except Exception:
    sys.exit(2)
EOF
}

cluster_dir() { echo "$STATE/$1"; }

valid_name() { [[ "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "invalid cluster name '$1'"; }

write_node_config() {
  # args: cdir node nodes voters
  local cdir="$1" n="$2" nodes="$3" voters="$4"
  local ndir="$cdir/node-$n"
  local bport cport sport secure=""
  bport=$(sed -n "${n}p" "$cdir/broker_ports")
  cport=$(sed -n "${n}p" "$cdir/controller_ports")
  sport=$(sed -n "${n}p" "$cdir/secure_ports" 2>/dev/null || true)
  [[ -f "$cdir/secure" ]] && secure="$(cat "$cdir/secure")"
  local listeners="PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport"
  local advertised="PLAINTEXT://127.0.0.1:$bport"
  local protomap="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  if [[ -n "$secure" ]]; then
    listeners="$listeners,SECURE://127.0.0.1:$sport"
    advertised="$advertised,SECURE://127.0.0.1:$sport"
    protomap="$protomap,SECURE:$secure"
  fi
  local rf=$(( nodes < 3 ? nodes : 3 ))
  local minisr=$(( nodes == 1 ? 1 : 2 ))
  # Optional extra client listener (start --extra-listener LNAME@HOST[@ADVERTISED_HOST]): same
  # security, own port.
  local xl="" xa="" xm=""
  if [[ -s "$cdir/extra_listener" ]]; then
    local lname lhost ladv xport
    IFS=@ read -r lname lhost ladv <"$cdir/extra_listener" || true
    xport=$(sed -n "${n}p" "$cdir/extra_ports")
    xl=",$lname://$lhost:$xport"; xa=",$lname://${ladv:-$lhost}:$xport"; xm=",$lname:PLAINTEXT"
  fi
  mkdir -p "$ndir/data"
  cat >"$ndir/server.properties" <<EOF
# generated by scripts/kafka.sh
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=$listeners$xl
advertised.listeners=$advertised$xa
listener.security.protocol.map=$protomap$xm
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$ndir/data
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=false
delete.topic.enable=true
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$minisr
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$minisr
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
num.replica.fetchers=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=8388608
log.retention.check.interval.ms=10000
log.initial.task.delay.ms=1000
replica.lag.time.max.ms=10000
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=6000
controller.quorum.election.timeout.ms=1000
controller.quorum.fetch.timeout.ms=2000
EOF
  if [[ -s "$cdir/extra.properties" ]]; then
    { echo "# --prop overrides"; cat "$cdir/extra.properties"; } >>"$ndir/server.properties"
  fi
  cat >"$ndir/log4j2.properties" <<EOF
status = error
name = mirrorgate-broker-$n
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $ndir/server.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
logger.zk.name = org.apache.kafka.clients.NetworkClient
logger.zk.level = WARN
EOF
}

# Certificates for a --secure cluster in DIR: a CA, a broker certificate for localhost and
# 127.0.0.1 (PKCS12 for the broker), a client certificate (PEM, PKCS12), the CA as PKCS12
# and JKS trust stores. Store password: changeit.
make_tls() {
  local d="$1"
  need openssl; need keytool
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=mirrorgate-test-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    for who in broker client; do
      openssl req -newkey rsa:2048 -nodes -keyout "$who.key" -out "$who.csr" -subj "/CN=$who" 2>/dev/null
      printf 'basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$who.ext"
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$who.pem" -days 30 \
        -extfile "$who.ext" 2>/dev/null
      cat "$who.pem" ca.pem >"$who-chain.pem"
      openssl pkcs12 -export -in "$who.pem" -inkey "$who.key" -certfile ca.pem -name "$who" \
        -out "$who.p12" -passout pass:changeit
    done
    openssl pkcs8 -topk8 -nocrypt -in client.key -out client-pkcs8.key
    keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 -storetype PKCS12 \
      -storepass changeit >/dev/null 2>&1
    keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.jks -storetype JKS \
      -storepass changeit >/dev/null 2>&1
  ) || die "making test certificates in $d failed"
}

# Launch one node's JVM in its own session, fully detached from our stdio.
launch_node() {
  local cdir="$1" n="$2"
  local ndir="$cdir/node-$n" version
  version="$(cat "$cdir/version")"
  local cp; cp="$(classpath_of "$version")"
  [[ -s "$cdir/extra_classpath" ]] && cp="$cp:$(cat "$cdir/extra_classpath")"
  # C1-only JIT roughly halves startup on small machines (3 nodes on 2 cores: ~15s -> ~8s);
  # MIRRORGATE_KAFKA_FULL_JIT=1 restores the full tiered JIT (better peak throughput).
  local jit=(-XX:TieredStopAtLevel=1)
  [[ "${MIRRORGATE_KAFKA_FULL_JIT:-0}" == "1" ]] && jit=()
  # shellcheck disable=SC2086
  setsid java -Xms64m -Xmx"$BROKER_HEAP" -XX:+UseSerialGC "${jit[@]+"${jit[@]}"}" -Xss512k -Xshare:auto \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$ndir/log4j2.properties" -Dkafka.logs.dir="$ndir" \
    -Dmirrorgate.cluster="$(basename "$cdir")" -Dmirrorgate.node="$n" \
    ${MIRRORGATE_KAFKA_JAVA_OPTS:-} \
    -cp "$cp" kafka.Kafka "$ndir/server.properties" \
    </dev/null >"$ndir/stdout.log" 2>&1 8>&- 9>&- &
  echo $! >"$ndir/pid"
}

node_pid() { cat "$(cluster_dir "$1")/node-$2/pid" 2>/dev/null || true; }

pid_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }

write_pids_file() {
  local cdir="$1" nodes n
  nodes="$(cat "$cdir/nodes")"
  : >"$cdir/pids.tmp"
  for ((n = 1; n <= nodes; n++)); do
    [[ -f "$cdir/node-$n/pid" ]] && cat "$cdir/node-$n/pid" >>"$cdir/pids.tmp"
  done
  mv -f "$cdir/pids.tmp" "$cdir/pids"
}

# Kill pids: TERM, wait up to STOP_TIMEOUT, then KILL.
kill_pids() {
  local live=() p
  for p in "$@"; do pid_alive "$p" && live+=("$p"); done
  [[ ${#live[@]} -eq 0 ]] && return 0
  kill -TERM "${live[@]}" 2>/dev/null || true
  local deadline=$(( $(date +%s) + STOP_TIMEOUT ))
  while :; do
    local still=()
    for p in "${live[@]}"; do pid_alive "$p" && still+=("$p"); done
    [[ ${#still[@]} -eq 0 ]] && return 0
    if [[ $(date +%s) -ge $deadline ]]; then
      log "killing (KILL) pids still alive after ${STOP_TIMEOUT}s: ${still[*]}"
      kill -KILL "${still[@]}" 2>/dev/null || true
      sleep 0.2
      return 0
    fi
    sleep 0.2
  done
}

dump_logs() {
  local cdir="$1" n
  for n in "${@:2}"; do
    local ndir="$cdir/node-$n"
    echo "----- node-$n: tail of $ndir/server.log -----" >&2
    tail -n 40 "$ndir/server.log" >&2 2>/dev/null || echo "(no server.log)" >&2
    if [[ -s "$ndir/stdout.log" ]]; then
      echo "----- node-$n: tail of $ndir/stdout.log -----" >&2
      tail -n 20 "$ndir/stdout.log" >&2
    fi
  done
}

# Wait until every listed node answers Metadata reporting `nodes` live brokers.
wait_ready() {
  local cdir="$1"; shift
  local nodes; nodes="$(cat "$cdir/nodes")"
  local deadline=$(( $(date +%s) + START_TIMEOUT ))
  local pending=("$@")
  while [[ ${#pending[@]} -gt 0 ]]; do
    local next=() n
    for n in "${pending[@]}"; do
      local pid; pid="$(cat "$cdir/node-$n/pid")"
      if ! pid_alive "$pid"; then
        log "node-$n (pid $pid) exited during startup"
        dump_logs "$cdir" "$n"
        return 1
      fi
      local port; port=$(sed -n "${n}p" "$cdir/broker_ports")
      probe_metadata "$port" "$nodes" >/dev/null 2>&1 || next+=("$n")
    done
    pending=("${next[@]+"${next[@]}"}")
    [[ ${#pending[@]} -eq 0 ]] && break
    if [[ $(date +%s) -ge $deadline ]]; then
      log "timed out after ${START_TIMEOUT}s waiting for node(s) ${pending[*]} of cluster $(basename "$cdir") to accept requests"
      dump_logs "$cdir" "${pending[@]}"
      return 1
    fi
    sleep 0.25
  done
}

lock_cluster() {
  mkdir -p "$STATE"
  exec 9>"$STATE/.$1.lock"
  flock 9
}

# ---------------------------------------------------------------------------
# start / stop
# ---------------------------------------------------------------------------
cmd_start() {
  [[ $# -ge 1 ]] || usage
  local name="$1"; shift
  valid_name "$name"
  local nodes=1 version="$DEFAULT_VERSION" owner="" props=() tiered=0 extra="" secure="" client_auth="none" users=()
  local features=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --nodes) nodes="${2:?--nodes needs a value}"; shift 2 ;;
      --nodes=*) nodes="${1#*=}"; shift ;;
      --version) version="${2:?--version needs a value}"; shift 2 ;;
      --version=*) version="${1#*=}"; shift ;;
      --owner-pid) owner="${2:?--owner-pid needs a value}"; shift 2 ;;
      --owner-pid=*) owner="${1#*=}"; shift ;;
      --prop) props+=("${2:?--prop needs key=value}"); shift 2 ;;
      --prop=*) props+=("${1#*=}"); shift ;;
      --tiered) tiered=1; shift ;;
      --feature) features+=(--feature "${2:?--feature needs NAME=LEVEL}"); shift 2 ;;
      --extra-listener) extra="${2:?--extra-listener needs LNAME@HOST}"; shift 2 ;;
      --extra-listener=*) extra="${1#*=}"; shift ;;
      --secure) secure="${2:?--secure needs a protocol}"; shift 2 ;;
      --client-auth) client_auth="${2:?--client-auth needs a value}"; shift 2 ;;
      --user) users+=("${2:?--user needs MECHANISM:NAME:PASSWORD}"); shift 2 ;;
      *) log "unknown option: $1"; usage ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9]$ ]] || die "--nodes must be 1..9"
  case "$secure" in ""|SSL|SASL_SSL|SASL_PLAINTEXT) ;; *) die "--secure must be SSL, SASL_SSL or SASL_PLAINTEXT" ;; esac
  case "$client_auth" in none|requested|required) ;; *) die "--client-auth must be none, requested or required" ;; esac
  if [[ -n "$owner" ]]; then
    [[ "$owner" =~ ^[0-9]+$ ]] || die "--owner-pid must be a pid"
    pid_alive "$owner" || die "--owner-pid $owner is not running"
  fi
  local p
  for p in "${props[@]+"${props[@]}"}"; do
    [[ "$p" == *=* ]] || die "--prop '$p' is not key=value"
  done
  if [[ -n "$extra" ]]; then
    [[ "$extra" =~ ^[A-Z][A-Z0-9_]*@[0-9.]+(@[0-9.]+)?$ && "$extra" != PLAINTEXT@* && "$extra" != CONTROLLER@* ]] \
      || die "--extra-listener '$extra' is not LNAME@IPV4[@IPV4] (upper-case name other than PLAINTEXT/CONTROLLER)"
  fi
  need java; need python3
  ensure_fetched "$version"
  [[ "$tiered" == 1 ]] && cmd_fetch_tiered "$version"

  local t0; t0=$(now_ms)
  local cdir; cdir="$(cluster_dir "$name")"
  lock_cluster "$name"
  if [[ -d "$cdir" ]]; then
    log "cluster $name exists; killing it first (its data is wiped anyway)"
    STOP_TIMEOUT=0 stop_cluster "$name"
  fi

  # Allocate ports under the global lock so concurrent starts never collide.
  mkdir -p "$cdir"
  (
    exec 7>"$STATE/.ports.lock"
    flock 7
    # Per node: broker, controller, secure and extra listener ports.
    ports="$(alloc_ports $((nodes * 4)))" || exit 1
    echo "$ports" >"$cdir/ports"
  ) || die "port allocation failed"
  read -r -a all_ports <"$cdir/ports"
  : >"$cdir/broker_ports"; : >"$cdir/controller_ports"; : >"$cdir/secure_ports"; : >"$cdir/extra_ports"
  printf '%s' "$extra" >"$cdir/extra_listener"
  local n voters=""
  for ((n = 1; n <= nodes; n++)); do
    echo "${all_ports[$(( (n - 1) * 4 ))]}" >>"$cdir/broker_ports"
    echo "${all_ports[$(( (n - 1) * 4 + 1 ))]}" >>"$cdir/controller_ports"
    echo "${all_ports[$(( (n - 1) * 4 + 2 ))]}" >>"$cdir/secure_ports"
    [[ -n "$extra" ]] && echo "${all_ports[$(( (n - 1) * 4 + 3 ))]}" >>"$cdir/extra_ports"
    voters="${voters:+$voters,}$n@127.0.0.1:${all_ports[$(( (n - 1) * 4 + 1 ))]}"
  done
  local scram_args=()
  if [[ -n "$secure" ]]; then
    echo "$secure" >"$cdir/secure"
    make_tls "$cdir/tls"
    local jaas_plain="org.apache.kafka.common.security.plain.PlainLoginModule required" u mech uname upass
    for u in "${users[@]+"${users[@]}"}"; do
      mech="${u%%:*}"; u="${u#*:}"; uname="${u%%:*}"; upass="${u#*:}"
      case "$mech" in
        PLAIN) jaas_plain="$jaas_plain user_${uname}=\"${upass}\"" ;;
        SCRAM-SHA-256|SCRAM-SHA-512) scram_args+=(--add-scram "${mech}=[name=${uname},password=${upass}]") ;;
        *) die "--user mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512" ;;
      esac
    done
    props=(
      "listener.name.secure.ssl.keystore.type=PKCS12"
      "listener.name.secure.ssl.keystore.location=$cdir/tls/broker.p12"
      "listener.name.secure.ssl.keystore.password=changeit"
      "listener.name.secure.ssl.key.password=changeit"
      "listener.name.secure.ssl.truststore.type=PEM"
      "listener.name.secure.ssl.truststore.location=$cdir/tls/ca.pem"
      "listener.name.secure.ssl.client.auth=$client_auth"
      "listener.name.secure.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
      "listener.name.secure.plain.sasl.jaas.config=$jaas_plain;"
      "listener.name.secure.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
      "listener.name.secure.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
      "${props[@]+"${props[@]}"}"
    )
  fi
  echo "$nodes" >"$cdir/nodes"
  echo "$version" >"$cdir/version"
  if [[ "$tiered" == 1 ]]; then
    echo "$(kafka_home "$version")/tiered/kafka-storage-$version-test.jar" >"$cdir/extra_classpath"
    mkdir -p "$cdir/remote-storage"
    # Defaults first so that --prop can still override them (later lines win).
    props=(
      "remote.log.storage.system.enable=true"
      "remote.log.storage.manager.class.name=org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
      "remote.log.storage.manager.impl.prefix=rsm.config."
      "rsm.config.dir=$cdir/remote-storage"
      "remote.log.metadata.manager.listener.name=PLAINTEXT"
      "remote.log.metadata.manager.impl.prefix=rlmm.config."
      "rlmm.config.remote.log.metadata.topic.replication.factor=$(( nodes < 3 ? nodes : 3 ))"
      "rlmm.config.remote.log.metadata.topic.num.partitions=2"
      "remote.log.manager.task.interval.ms=1000"
      "${props[@]+"${props[@]}"}"
    )
  fi
  printf '%s\n' "${props[@]+"${props[@]}"}" >"$cdir/extra.properties"
  local cluster_id
  # A leading "-" would be read as an option by kafka-storage: draw again until there is none.
  cluster_id="-"
  while [[ "$cluster_id" == -* ]]; do
    cluster_id="$(python3 -c 'import base64,os;print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')"
  done
  echo "$cluster_id" >"$cdir/cluster.id"

  local cp; cp="$(classpath_of "$version")"
  [[ -s "$cdir/extra_classpath" ]] && cp="$cp:$(cat "$cdir/extra_classpath")"
  local fmt_pids=()
  for ((n = 1; n <= nodes; n++)); do
    write_node_config "$cdir" "$n" "$nodes" "$voters"
    java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
      -Dlog4j2.configurationFile="$(kafka_home "$version")/tools-log4j2.properties" \
      -cp "$cp" kafka.tools.StorageTool format -t "$cluster_id" "${scram_args[@]+"${scram_args[@]}"}" "${features[@]+"${features[@]}"}" \
      -c "$cdir/node-$n/server.properties" </dev/null >"$cdir/node-$n/format.log" 2>&1 8>&- 9>&- &
    fmt_pids+=($!)
  done
  local i
  for i in "${!fmt_pids[@]}"; do
    if ! wait "${fmt_pids[$i]}"; then
      cat "$cdir/node-$((i + 1))/format.log" >&2
      rm -f "$cdir/ports" "$cdir/cluster.id"
      die "storage format failed for node-$((i + 1)) of $name (config in $cdir)"
    fi
  done

  for ((n = 1; n <= nodes; n++)); do launch_node "$cdir" "$n"; done
  write_pids_file "$cdir"

  if [[ -n "$owner" ]]; then
    local ostart; ostart="$(proc_starttime "$owner")"
    setsid nohup "$SELF" _watchdog "$name" "$owner" "$ostart" "$cluster_id" \
      </dev/null >/dev/null 2>&1 8>&- 9>&- &
    echo $! >"$cdir/watchdog.pid"
  fi

  local nodelist=()
  for ((n = 1; n <= nodes; n++)); do nodelist+=("$n"); done
  if ! wait_ready "$cdir" "${nodelist[@]}"; then
    log "start of cluster $name failed; stopping it (data kept in $cdir for inspection)"
    MIRRORGATE_KAFKA_KEEP=1 stop_cluster "$name"
    exit 1
  fi

  local bootstrap=""
  while read -r p; do bootstrap="${bootstrap:+$bootstrap,}127.0.0.1:$p"; done <"$cdir/broker_ports"
  echo "$bootstrap" >"$cdir/bootstrap"
  if [[ -n "$extra" ]]; then
    local xb="" xname xhost xadv
    IFS=@ read -r xname xhost xadv <<<"$extra"
    while read -r p; do xb="${xb:+$xb,}${xadv:-$xhost}:$p"; done <"$cdir/extra_ports"
    echo "$xb" >"$cdir/bootstrap.$xname"
  fi
  log "cluster $name ($nodes node(s), Kafka $version, id $cluster_id) ready in $(( ($(now_ms) - t0) ))ms: $bootstrap"
  echo "$bootstrap"
  if [[ -n "$secure" ]]; then
    local sb=""
    while read -r p; do sb="${sb:+$sb,}127.0.0.1:$p"; done <"$cdir/secure_ports"
    echo "$sb" >"$cdir/secure_bootstrap"
    log "cluster $name: $secure listener (client auth $client_auth) at $sb, certificates in $cdir/tls"
    echo "secure=$sb"
    echo "tls=$cdir/tls"
  fi
}

proc_starttime() {
  # field 22 of /proc/PID/stat (after the parenthesised comm)
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}' || true
}

# Internal: kill cluster NAME when OWNER dies (started detached by `start --owner-pid`).
cmd_watchdog() {
  local name="$1" owner="$2" ostart="$3" cid="$4"
  local cdir; cdir="$(cluster_dir "$name")"
  while :; do
    [[ "$(cat "$cdir/cluster.id" 2>/dev/null || true)" == "$cid" ]] || exit 0   # cluster replaced/removed
    if ! pid_alive "$owner" || [[ "$(proc_starttime "$owner")" != "$ostart" ]]; then
      break
    fi
    sleep 1
  done
  rm -f "$cdir/watchdog.pid"
  exec "$SELF" stop "$name" --kill
}

# Stop all JVMs of a cluster and remove its directory. Caller holds the lock.
stop_cluster() {
  local name="$1"
  local cdir; cdir="$(cluster_dir "$name")"
  [[ -d "$cdir" ]] || return 0
  local wd; wd="$(cat "$cdir/watchdog.pid" 2>/dev/null || true)"
  if [[ -n "$wd" && "$wd" != "$$" ]] && pid_alive "$wd"; then kill -TERM "$wd" 2>/dev/null || true; fi
  local pids=() f
  for f in "$cdir"/node-*/pid; do
    [[ -f "$f" ]] && pids+=("$(cat "$f")")
  done
  # only kill pids that really are this cluster's JVMs (guards against pid reuse)
  local mine=() p
  for p in "${pids[@]+"${pids[@]}"}"; do
    if pid_alive "$p" && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-Dmirrorgate.cluster=$name "; then
      mine+=("$p")
    fi
  done
  kill_pids "${mine[@]+"${mine[@]}"}"
  if [[ "${MIRRORGATE_KAFKA_KEEP:-0}" == "1" ]]; then
    rm -f "$cdir/ports" "$cdir/cluster.id"
  else
    rm -rf "$cdir"
  fi
}

cmd_stop() {
  if [[ "${2:-}" == "--kill" ]]; then STOP_TIMEOUT=0; set -- "$1"; fi
  [[ $# -eq 1 ]] || usage
  valid_name "$1"
  lock_cluster "$1"
  [[ -d "$(cluster_dir "$1")" ]] || { log "cluster $1 not running"; return 0; }
  stop_cluster "$1"
  log "cluster $1 stopped"
}

check_node_arg() {
  local cdir="$1" n="$2"
  [[ -f "$cdir/nodes" ]] || die "cluster $(basename "$cdir") does not exist"
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le "$(cat "$cdir/nodes")" ]] || die "no node $n in cluster $(basename "$cdir")"
}

cmd_stop_node() {
  [[ $# -eq 2 ]] || usage
  valid_name "$1"
  local cdir; cdir="$(cluster_dir "$1")"
  lock_cluster "$1"
  check_node_arg "$cdir" "$2"
  local pid; pid="$(node_pid "$1" "$2")"
  kill_pids "$pid"
  rm -f "$cdir/node-$2/pid"
  write_pids_file "$cdir"
  log "node $2 of cluster $1 stopped"
}

cmd_start_node() {
  [[ $# -eq 2 ]] || usage
  valid_name "$1"
  local name="$1" n="$2"
  local cdir; cdir="$(cluster_dir "$name")"
  lock_cluster "$name"
  check_node_arg "$cdir" "$n"
  local pid; pid="$(node_pid "$name" "$n")"
  if pid_alive "$pid"; then
    log "node $n of cluster $name already running (pid $pid)"
  else
    local t0; t0=$(now_ms)
    launch_node "$cdir" "$n"
    write_pids_file "$cdir"
    wait_ready "$cdir" "$n" || die "node $n of cluster $name failed to restart"
    log "node $n of cluster $name ready in $(( $(now_ms) - t0 ))ms"
  fi
  cat "$cdir/bootstrap"
}

cmd_status() {
  [[ $# -eq 1 ]] || usage
  local cdir; cdir="$(cluster_dir "$1")"
  [[ -f "$cdir/nodes" ]] || { echo "$1: not running"; return 1; }
  local nodes n rc=0; nodes="$(cat "$cdir/nodes")"
  for ((n = 1; n <= nodes; n++)); do
    local pid port live; pid="$(node_pid "$1" "$n")"; port=$(sed -n "${n}p" "$cdir/broker_ports")
    if pid_alive "$pid"; then
      live="$(probe_metadata "$port" 0 2>/dev/null || echo '?')"
      echo "node-$n pid=$pid port=$port up (sees $live live brokers)"
    else
      echo "node-$n port=$port down"; rc=1
    fi
  done
  return $rc
}

# ---------------------------------------------------------------------------
[[ $# -ge 1 ]] || usage
sub="$1"; shift
case "$sub" in
  fetch) cmd_fetch "$@" ;;
  fetch-tiered) cmd_fetch_tiered "$@" ;;
  classpath) cmd_classpath "$@" ;;
  tool) cmd_tool "$@" ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  stop-node) cmd_stop_node "$@" ;;
  start-node) cmd_start_node "$@" ;;
  status) cmd_status "$@" ;;
  _watchdog) cmd_watchdog "$@" ;;
  -h|--help|help) usage ;;
  *) log "unknown subcommand: $sub"; usage ;;
esac
