#!/usr/bin/env bash
# Installs what zkgate needs from Debian's packages, or says exactly what to
# install when it cannot (not root, no apt-get).
#   scripts/deps.sh run    ZooKeeper and Java: enough to run the gateway
#   scripts/deps.sh test   plus Curator, kazoo and Chromium for the test suite, and
#                          Node.js, npm, curl, jq and Python's venv, setuptools and
#                          wheel for the clients' tests (scripts/test-clients.sh), and
#                          buildah, promtool, systemd-analyze, groff and man for the
#                          release and deployment tests (scripts/test-release.sh,
#                          scripts/test-deploy.sh)
set -euo pipefail
what=${1:-run}
pkgs=()
have_java() { command -v java >/dev/null 2>&1; }
have_zk() { [ -f /usr/share/java/zookeeper.jar ] || [ -n "${ZOOKEEPER_HOME:-}" ]; }
have_java || pkgs+=(openjdk-17-jre-headless)
have_zk || pkgs+=(zookeeper)
if [ "$what" = test ]; then
  command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
  [ -f /usr/share/java/curator-recipes.jar ] || pkgs+=(libcurator-recipes-java)
  [ -d /usr/lib/python3/dist-packages/kazoo ] || pkgs+=(python3-kazoo)
  [ -x /usr/bin/chromium ] || pkgs+=(chromium)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
  command -v curl >/dev/null 2>&1 || pkgs+=(curl) # the examples
  command -v jq >/dev/null 2>&1 || pkgs+=(jq)
  /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
  /usr/bin/python3 -c 'import setuptools' >/dev/null 2>&1 || pkgs+=(python3-setuptools)
  /usr/bin/python3 -c 'import wheel' >/dev/null 2>&1 || pkgs+=(python3-wheel)
  command -v buildah >/dev/null 2>&1 || pkgs+=(buildah)
  command -v promtool >/dev/null 2>&1 || pkgs+=(prometheus)
  command -v systemd-analyze >/dev/null 2>&1 || pkgs+=(systemd)
  command -v groff >/dev/null 2>&1 || pkgs+=(groff-base)
  command -v man >/dev/null 2>&1 || pkgs+=(man-db) # systemd-analyze verify checks Documentation=man:
  [ -s /etc/ssl/certs/ca-certificates.crt ] || pkgs+=(ca-certificates)
fi
[ ${#pkgs[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "zkgate needs: ${pkgs[*]}" >&2
  echo "install them with: sudo apt-get update && sudo apt-get install -y ${pkgs[*]}" >&2
  exit 1
fi
echo "installing ${pkgs[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${pkgs[@]}" >/dev/null
