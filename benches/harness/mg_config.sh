# Sourced by the proxy benchmarks (proxy.sh, consume.sh): mirrorgate's config in front of one
# destination cluster, all listener ports on 127.0.0.1.
# usage: mg_config DIRECT_BOOTSTRAP FIRST_PORT [EXTRA_YAML] > mirrorgate.yaml
# (FIRST_PORT is the bootstrap port; 12 ports from it are used.)
mg_config() {
  cat <<Y
destination:
  bootstrap_servers: $1
listeners:
  - name: bench
    bind_host: 127.0.0.1
    advertised_host: 127.0.0.1
    port_range: $2-$(($2 + 11))
mirror_state:
  topic: __mirror_state
  num_partitions: 3
log:
  level: warn
${3:-}
Y
}
