#!/usr/bin/env bash
# two_hosts.sh [--ranks-per-host N] [--timeout S] [--min-bytes N] -- COMMAND ARGS...
#
# Runs COMMAND as an MPI job on two "hosts": two network namespaces joined by a veth pair
# (10.77.X.1 and 10.77.X.2), N ranks in each (default 1), over TCP only (btl self,tcp: no
# shared memory between the hosts), so every byte between them crosses a network interface.
# mpirun runs in the first namespace and reaches the second through Open MPI's rsh launcher,
# pointed at an agent that runs the remote command in the namespace owning the address with
# `ip netns exec` (under its own hostname, `unshare --uts`, so Open MPI sees two nodes).
# Passes COMMAND's output and exit status through; prints the bytes counted on the veth
# interface before and after; fails when COMMAND fails, when fewer than --min-bytes (default
# 1) crossed in each direction, or after --timeout seconds (default 120). Exits 77 (CTest:
# skipped) with one line where mpirun is missing or network namespaces cannot be made. Needs
# root.
set -euo pipefail
timeout_s=120
min_bytes=1
per_host=1
usage="usage: two_hosts.sh [--ranks-per-host N] [--timeout S] [--min-bytes N] -- COMMAND ARGS..."
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) timeout_s="$2"; shift 2 ;;
    --min-bytes) min_bytes="$2"; shift 2 ;;
    --ranks-per-host) per_host="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "two_hosts.sh: unknown option $1" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
for v in "$timeout_s" "$min_bytes" "$per_host"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "two_hosts.sh: not a number: $v" >&2; exit 2; }
done
[ "$per_host" -ge 1 ] || { echo "two_hosts.sh: --ranks-per-host must be at least 1" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "two_hosts: skipped: mpirun not found"; exit 77; }
for tool in ip unshare timeout; do
  command -v "$tool" > /dev/null || { echo "two_hosts: skipped: $tool not found"; exit 77; }
done

id=$$
subnet=$(( id % 200 + 20 ))  # addresses live inside the two namespaces only
ns_a="tc2h_a_$id" ns_b="tc2h_b_$id"
veth_a="tcva$id" veth_b="tcvb$id"
ip_a="10.77.$subnet.1" ip_b="10.77.$subnet.2"
work=$(mktemp -d "${TMPDIR:-/tmp}/tc-two-hosts.XXXXXX")
cleanup() {
  local ns
  for ns in "$ns_a" "$ns_b"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
    ip netns del "$ns" 2> /dev/null || true
  done
  ip link del "$veth_a" 2> /dev/null || true  # only if the move into the namespace failed
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# In a chroot `ip netns add` would mount the chroot's /run/netns from outside it (and
# fail): leave it alone.
# (A chroot that is not itself a mount point has no "/" in its own mountinfo.)
if ! awk '$5 == "/" { found = 1 } END { exit !found }' /proc/self/mountinfo 2> /dev/null; then
  echo "two_hosts: skipped: running in a chroot (network namespaces need the real root)"
  exit 77
fi
# Namespaces need root (CAP_SYS_ADMIN) and a real mount namespace: in a chroot or a
# restricted container a step fails ("mount --make-rslave /" in a chroot). Any failure of
# the setup skips, naming the step's error; the run itself failing is a failure.
setup() {
  ip netns add "$ns_a" && ip netns add "$ns_b" &&
    ip link add "$veth_a" type veth peer name "$veth_b" &&
    ip link set "$veth_a" netns "$ns_a" && ip link set "$veth_b" netns "$ns_b" &&
    ip -n "$ns_a" addr add "$ip_a/24" dev "$veth_a" && ip -n "$ns_b" addr add "$ip_b/24" dev "$veth_b" &&
    ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
    ip -n "$ns_a" link set "$veth_a" up && ip -n "$ns_b" link set "$veth_b" up &&
    ip netns exec "$ns_a" true && ip netns exec "$ns_b" true
}
if ! setup_err=$(setup 2>&1); then
  echo "two_hosts: skipped: cannot make network namespaces here: $(head -n 1 <<< "$setup_err")"
  exit 77
fi

# The rsh agent: Open MPI calls it as `agent [ssh options] HOST COMMAND...` to start its
# daemon on HOST; it runs COMMAND in the namespace that owns HOST, under that host's name.
cat > "$work/agent.sh" << EOF
#!/usr/bin/env bash
while [ "\${1#-}" != "\$1" ]; do shift; done   # options meant for ssh
host=\$1; shift
case "\$host" in
  $ip_a|host-a) ns=$ns_a name=host-a ;;
  $ip_b|host-b) ns=$ns_b name=host-b ;;
  *) echo "two_hosts agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts bash -c "hostname \$name; \$*"
EOF
chmod +x "$work/agent.sh"
printf '%s slots=%d\n%s slots=%d\n' "$ip_a" "$per_host" "$ip_b" "$per_host" > "$work/hostfile"

bytes() { ip netns exec "$ns_a" cat "/sys/class/net/$veth_a/statistics/$1"; }
tx0=$(bytes tx_bytes) rx0=$(bytes rx_bytes)
export OMPI_MCA_plm_rsh_no_tree_spawn=1 OMPI_MCA_orte_keep_fqdn_hostnames=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# Ranks that spin in MPI's progress loop without yielding starve the veth's receive
# processing when the cores are busy: measured on a loaded 2-core VM, every message then
# took one scheduler tick (4 ms instead of 15 us). Yielding when idle costs nothing here.
export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}"
# shellcheck disable=SC2054  # "self,tcp" is one argument
mpi=(mpirun --allow-run-as-root --oversubscribe -np $(( 2 * per_host )) --hostfile "$work/hostfile"
     --map-by "ppr:$per_host:node" --mca plm_rsh_agent "$work/agent.sh"
     --mca btl self,tcp --mca pml ob1
     --mca btl_tcp_if_include "10.77.$subnet.0/24" --mca oob_tcp_if_include "10.77.$subnet.0/24" -x PATH)
for v in LD_LIBRARY_PATH OMP_NUM_THREADS; do  # -x of an unset variable only warns
  if [ -n "${!v:-}" ]; then mpi+=(-x "$v"); fi
done
echo "two_hosts: $veth_a before: tx_bytes=$tx0 rx_bytes=$rx0"
rc=0
start=$SECONDS
# `unshare --uts` gives the first namespace its own hostname too; quoted once for bash -c.
# In the background and waited for, so that a signal to this script is handled at once.
timeout --kill-after=10 "$timeout_s" ip netns exec "$ns_a" unshare --uts bash -c \
  "hostname host-a; cd $(printf '%q' "$PWD") && exec $(printf '%q ' "${mpi[@]}" "$@")" &
child=$!
trap 'kill -TERM "$child" 2> /dev/null; exit 130' INT TERM
wait "$child" || rc=$?
elapsed=$(( SECONDS - start ))
tx1=$(bytes tx_bytes) rx1=$(bytes rx_bytes)
tx=$(( tx1 - tx0 )) rx=$(( rx1 - rx0 ))
echo "two_hosts: $veth_a after: tx_bytes=$tx1 rx_bytes=$rx1"
echo "two_hosts: $tx bytes sent and $rx received over $veth_a ($ip_a <-> $ip_b), $elapsed s"
if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ "$elapsed" -ge "$timeout_s" ]; then
  echo "two_hosts: timed out after $timeout_s s" >&2
  exit 124
fi
[ "$rc" = 0 ] || { echo "two_hosts: the command failed (exit $rc)" >&2; exit "$rc"; }
if [ "$tx" -lt "$min_bytes" ] || [ "$rx" -lt "$min_bytes" ]; then
  echo "two_hosts: fewer than $min_bytes bytes crossed the interface each way" >&2
  exit 1
fi
