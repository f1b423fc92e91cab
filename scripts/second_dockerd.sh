#!/usr/bin/env bash
# A second Docker engine in its own network namespace, reached over TCP with mutual TLS: the
# "remote GPU host" of the multi-host tests, bench and localnet (root only; needs iproute2,
# openssl, dockerd).
#
#   scripts/second_dockerd.sh up DIR [IMAGE]   start it (state, certs and logs under DIR),
#                                              load IMAGE (default compute-base:cpu) into it
#   scripts/second_dockerd.sh stop DIR          kill the daemon only (the namespace stays: "host down")
#   scripts/second_dockerd.sh start DIR         start the daemon again in the same namespace
#   scripts/second_dockerd.sh down DIR          kill the daemon, delete the namespace and DIR
#
# Addresses: only the namespace made here is addressed. A veth pair carries 10.203.N.1/30 (this
# side) and 10.203.N.2/30 (the namespace, where dockerd listens on :2376); the engine's own
# bridge inside the namespace uses 10.203.(N+1).0/24. N (default 17) comes from SECOND_DOCKERD_NET.
# On success `up` prints KEY=VALUE lines (DOCKER_HOST, CA, CERT, KEY, ADDRESS) and writes them
# to DIR/env. Every step is idempotent; `down` always cleans what exists.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
image="${3:-compute-base:cpu}"
if [[ -z "$cmd" || -z "$dir" ]]; then
    echo "usage: $0 up|stop|start|down DIR [IMAGE]" >&2
    exit 2
fi
net="${SECOND_DOCKERD_NET:-17}"
ns="cmp2nd${net}"
veth_host="cmp2h${net}"
veth_ns="cmp2n${net}"
host_ip="10.203.${net}.1"
ns_ip="10.203.${net}.2"
bridge_cidr="10.203.$((net + 1)).1/24"
wait_s="${SECOND_DOCKERD_WAIT_S:-60}"

log() { echo "second_dockerd: $*" >&2; }

make_certs() {
    local certs="$dir/certs"
    [[ -f "$certs/client-key.pem" ]] && return 0
    mkdir -p "$certs"
    (
        cd "$certs"
        # extensions a strict verifier (Python >= 3.13: VERIFY_X509_STRICT) insists on
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj "/CN=compute-test-ca" -keyout ca-key.pem -out ca.pem \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            -addext "subjectKeyIdentifier=hash" 2>/dev/null
        local leaf="basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$ns_ip" \
            -keyout server-key.pem -out server.csr 2>/dev/null
        printf '%s\nsubjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n' "$leaf" "$ns_ip" >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
            -extfile server.ext -out server.pem 2>/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=compute-miner" \
            -keyout client-key.pem -out client.csr 2>/dev/null
        printf '%s\nextendedKeyUsage=clientAuth\n' "$leaf" >client.ext
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 \
            -extfile client.ext -out client.pem 2>/dev/null
        chmod 600 ./*-key.pem
    )
}

make_netns() {
    if ! ip netns list | grep -qw "$ns"; then
        ip netns add "$ns"
    fi
    if ! ip link show "$veth_host" >/dev/null 2>&1; then
        ip link add "$veth_host" type veth peer name "$veth_ns"
        ip link set "$veth_ns" netns "$ns"
        ip addr add "$host_ip/30" dev "$veth_host"
        ip link set "$veth_host" up
        ip netns exec "$ns" ip addr add "$ns_ip/30" dev "$veth_ns"
        ip netns exec "$ns" ip link set "$veth_ns" up
        ip netns exec "$ns" ip link set lo up
        ip netns exec "$ns" ip route add default via "$host_ip"
    fi
}

sock() { echo "unix://$dir/docker.sock"; }

start_daemon() {
    if [[ -f "$dir/dockerd.pid" ]] && kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; then
        return 0
    fi
    mkdir -p "$dir/data" "$dir/exec"
    # the machine engine's storage driver works on this file system (overlay2 on overlay would not)
    local storage="${SECOND_DOCKERD_STORAGE:-$(docker info --format '{{.Driver}}' 2>/dev/null || echo overlay2)}"
    local certs="$dir/certs"
    # Its own containerd namespaces: never share containers with the machine's engine.
    # nsenter --net (not `ip netns exec`, which remounts /sys and hides the cgroup mounts)
    nsenter --net="/var/run/netns/$ns" nohup dockerd \
        --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
        --containerd-namespace "$ns" --containerd-plugins-namespace "${ns}p" \
        -H "$(sock)" -H "tcp://$ns_ip:2376" \
        --tlsverify --tlscacert "$certs/ca.pem" --tlscert "$certs/server.pem" --tlskey "$certs/server-key.pem" \
        --bip "$bridge_cidr" --default-address-pool "base=10.203.$((net + 2)).0/24,size=28" \
        --storage-driver "$storage" \
        >>"$dir/dockerd.log" 2>&1 &
    local started=$! deadline=$((SECONDS + wait_s))
    until docker -H "$(sock)" info >/dev/null 2>&1; do
        if ((SECONDS >= deadline)) || ! kill -0 "$started" 2>/dev/null; then
            log "dockerd did not answer (exited, or not within ${wait_s}s); last log lines:"
            tail -n 20 "$dir/dockerd.log" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
}

stop_daemon() {
    # A power cut, not a shutdown: the lease containers' processes, the daemon, its containerd,
    # shims and port proxies all die at once (no graceful container stop).
    local pid pids=""
    if [[ -f "$dir/dockerd.pid" ]] && kill -0 "$(cat "$dir/dockerd.pid")" 2>/dev/null; then
        for id in $(timeout 10 docker -H "$(sock)" ps -q 2>/dev/null || true); do
            pids="$pids $(timeout 10 docker -H "$(sock)" inspect -f '{{.State.Pid}}' "$id" 2>/dev/null || true)"
        done
        kill -KILL "$(cat "$dir/dockerd.pid")" 2>/dev/null || true
    fi
    # everything else in the namespace, and anything left under this DIR's exec root
    pids="$pids $(ip netns pids "$ns" 2>/dev/null || true) $(pgrep -f -- "$dir/exec" || true)"
    for pid in $pids; do
        [[ "$pid" =~ ^[0-9]+$ && "$pid" -gt 1 ]] && kill -KILL "$pid" 2>/dev/null || true
    done
    for _ in $(seq 1 100); do
        local alive=0
        for pid in $pids; do
            [[ "$pid" =~ ^[0-9]+$ && "$pid" -gt 1 ]] && kill -0 "$pid" 2>/dev/null && alive=1
        done
        ((alive == 0)) && break
        sleep 0.1
    done
    rm -f "$dir/dockerd.pid" "$dir/exec/containerd/containerd.pid"
}

print_env() {
    local certs="$dir/certs"
    cat >"$dir/env" <<EOF
DOCKER_HOST=tcp://$ns_ip:2376
ADDRESS=$ns_ip
CA=$certs/ca.pem
CERT=$certs/client.pem
KEY=$certs/client-key.pem
SOCKET=$(sock)
EOF
    cat "$dir/env"
}

case "$cmd" in
up)
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    make_certs
    make_netns
    start_daemon
    if ! docker -H "$(sock)" image inspect "$image" >/dev/null 2>&1; then
        docker save "$image" | docker -H "$(sock)" load >/dev/null
    fi
    print_env
    ;;
stop)
    dir="$(cd "$dir" && pwd)"
    stop_daemon
    ;;
start)
    dir="$(cd "$dir" && pwd)"
    start_daemon
    ;;
down)
    if [[ -d "$dir" ]]; then
        dir="$(cd "$dir" && pwd)"
        if [[ -S "$dir/docker.sock" ]] && [[ -f "$dir/dockerd.pid" ]]; then
            # remove containers first so their mounts and shims go with the daemon
            ids="$(timeout 20 docker -H "$(sock)" ps -aq 2>/dev/null || true)"
            [[ -n "$ids" ]] && timeout 60 docker -H "$(sock)" rm -f $ids >/dev/null 2>&1 || true
        fi
        stop_daemon
    fi
    ip link del "$veth_host" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    if [[ -d "$dir" ]]; then
        # overlay mounts left by a killed daemon would keep the data root busy
        grep -F " $dir/" /proc/mounts | awk '{print $2}' | sort -r | while read -r mnt; do
            umount -l "$mnt" 2>/dev/null || true
        done
        rm -rf "$dir"
    fi
    ;;
*)
    echo "usage: $0 up|stop|start|down DIR [IMAGE]" >&2
    exit 2
    ;;
esac
