#!/usr/bin/env bash
# two_hosts.sh [--timeout S] [--min-bytes N] -- COMMAND ARGS...
#
# Runs COMMAND as a 2-rank MPI job on two "hosts": two network namespaces joined by a veth
# pair (10.77.X.1 and 10.77.X.2), one rank in each, over TCP only (btl self,tcp: no shared
# memory between the ranks), so every byte between them crosses a network interface.
# mpirun runs in the first namespace and reaches the second through Open MPI's rsh
# launcher, pointed at an agent that runs the remote command with `ip netns exec` (under
# its own hostname, so Open MPI sees two nodes). Prints the bytes that crossed the veth
# pair; fails when COMMAND fails, when fewer than --min-bytes crossed, or after --timeout
# seconds. Exits 77 (CTest: skipped) where network namespaces cannot be made. Needs root.
set -euo pipefail
timeout_s=180
min_bytes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s="$2"; shift 2 ;;
    --min-bytes) min_bytes="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "two_hosts.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: two_hosts.sh [--timeout S] [--min-bytes N] -- COMMAND ARGS..." >&2; exit 2; }
command -v mpirun > /dev/null || { echo "skipped: no mpirun"; exit 77; }

id=$$
subnet=$(( id % 200 + 20 ))
ns_a="tc2h_a_$id" ns_b="tc2h_b_$id"
veth_a="tcva$id" veth_b="tcvb$id"
ip_a="10.77.$subnet.1" ip_b="10.77.$subnet.2"
work=$(mktemp -d "${TMPDIR:-/tmp}/tc-two-hosts.XXXXXX")
cleanup() {
  ip netns pids "$ns_a" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns pids "$ns_b" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
  ip netns del "$ns_a" 2> /dev/null || true
  ip netns del "$ns_b" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$ns_a" 2> /dev/null; then
  echo "skipped: cannot create network namespaces here (needs root / CAP_SYS_ADMIN)"
  exit 77
fi
ip netns add "$ns_b"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$ns_a"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add "$ip_a/24" dev "$veth_a"
ip -n "$ns_b" addr add "$ip_b/24" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up

# The rsh agent: Open MPI calls it as `agent [options] HOST COMMAND...` to start its daemon
# on HOST; HOST is ip_b here, the namespace of the second host.
cat > "$work/agent.sh" << EOF
#!/usr/bin/env bash
while [ "\${1#-}" != "\$1" ]; do shift; done   # options meant for ssh
shift                                         # the host: always the second namespace
exec ip netns exec $ns_b unshare --uts bash -c "hostname host-b; \$*"
EOF
chmod +x "$work/agent.sh"
printf '%s slots=1\n%s slots=1\n' "$ip_a" "$ip_b" > "$work/hostfile"

bytes() { ip netns exec "$ns_a" cat "/sys/class/net/$veth_a/statistics/$1"; }
tx0=$(bytes tx_bytes) rx0=$(bytes rx_bytes)
# Quoted once for the shell inside the namespace.
cmd=$(printf '%q ' "$@")
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2 --hostfile "$work/hostfile" --map-by node
     --mca plm_rsh_agent "$work/agent.sh" --mca plm_rsh_no_tree_spawn 1
     --mca btl self,tcp --mca btl_tcp_if_include "10.77.$subnet.0/24" --mca oob_tcp_if_include "10.77.$subnet.0/24"
     --mca pml ob1 -x PATH -x OMP_NUM_THREADS)
rc=0
timeout --kill-after=10 "$timeout_s" ip netns exec "$ns_a" unshare --uts bash -c \
  "hostname host-a; cd $(printf '%q' "$PWD") && $(printf '%q ' "${mpi[@]}") $cmd" || rc=$?
tx=$(( $(bytes tx_bytes) - tx0 )) rx=$(( $(bytes rx_bytes) - rx0 ))
echo "two_hosts: $tx bytes sent and $rx received over $veth_a ($ip_a <-> $ip_b)"
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "two_hosts: timed out after $timeout_s s" >&2; exit 1; fi
[ "$rc" = 0 ] || { echo "two_hosts: the command failed (exit $rc)" >&2; exit "$rc"; }
[ "$tx" -ge "$min_bytes" ] && [ "$rx" -ge "$min_bytes" ] ||
  { echo "two_hosts: fewer than $min_bytes bytes crossed the interface each way" >&2; exit 1; }
