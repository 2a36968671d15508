#!/usr/bin/env bash
# Install the Debian packages latnet needs, if any is missing. Needs root (or sudo).
set -euo pipefail
# iperf3, irtt, ethtool, iputils-ping, iproute2: emulation testbeds (latnet-switch);
# openvswitch-switch: the Open vSwitch userspace datapath of bench/switch_peers.py;
# tcpdump: reads the simulator's link captures (and captures emulated links);
# tshark: tests tools/wireshark/latnet.lua, the dissector of latnet's LBF block and
# large-flow option; libsqlite3-dev, sqlite3: the Chameleon service's store (latnet-ctld);
# openssl: scripts/tls-certs.sh, certificates for the service's TLS (and its tests).
pkgs=(python3-venv build-essential pkg-config iproute2 iperf3 irtt ethtool iputils-ping
  openvswitch-switch tcpdump tshark libsqlite3-dev sqlite3 openssl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "apt: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
