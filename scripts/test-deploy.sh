#!/usr/bin/env bash
# The deployment checks of make test: the Helm chart (helm lint, and helm
# template with several value sets, each checked for what it must and must
# not render, and the values it must refuse), and the Prometheus rules
# (promtool check rules, and their unit tests). deploy/metrics_test.go, run
# by go test, checks the rules' and the dashboard's metrics against a gateway;
# deploy/chart_test.go runs the chart's rendered pods on loopback and rolls
# them out under load (make test-deploy runs it after this script).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "test-deploy.sh: promtool is missing (Debian's prometheus; scripts/deps.sh test installs it)" >&2; exit 1; }
fail() { echo "test-deploy.sh: FAIL: $*" >&2; exit 1; }
step() { echo "--- $*"; }
helm() { scripts/gotool.sh helm "$@"; }
chart=deploy/helm/zkgate
base=(--set 'zookeeper.ensemble=zk1:2181\,zk2:2181\,zk3:2181' --set auth.existingSecret=zkgate-tokens --set peerSecret.existingSecret=zkgate-peer)

# render NAME ARGS...: helm template into $out.
render() {
  local name=$1
  shift
  step "helm template: $name"
  out=$(helm template t "$chart" "$@") || fail "helm template ($name)"
}
# has / lacks LINE...: each line is (is not) in the rendered chart, whole.
has() { for l in "$@"; do grep -qxF -- "$l" <<<"$(sed 's/^ *//' <<<"$out")" || fail "the chart does not render: $l"; done; }
lacks() { for l in "$@"; do ! grep -qxF -- "$l" <<<"$(sed 's/^ *//' <<<"$out")" || fail "the chart renders: $l"; done; }
# refuses MESSAGE ARGS...: helm template fails, saying MESSAGE.
refuses() {
  local want=$1 msg
  shift
  step "helm template refuses: $want"
  if msg=$(helm template t "$chart" "$@" 2>&1); then fail "the chart rendered with $*"; fi
  grep -qF -- "$want" <<<"$msg" || fail "helm template $*: $msg"
}

step "helm lint"
helm lint --strict "$chart" "${base[@]}"

render "an ensemble and tokens" "${base[@]}"
has 'kind: Deployment' 'kind: Service' 'kind: PodDisruptionBudget' 'maxUnavailable: 1' \
  'path: /readyz' 'path: /healthz' 'scheme: HTTP' 'terminationGracePeriodSeconds: 30' '- --drain-timeout=5s' \
  '- "--zk=zk1:2181,zk2:2181,zk3:2181"' '- --auth-file=/etc/zkgate/auth/tokens' 'secretName: zkgate-tokens' \
  '- --metrics-listen=0.0.0.0:9090' '- --advertise=$(POD_IP):8080' 'runAsNonRoot: true' 'readOnlyRootFilesystem: true' \
  '- --peer-secret-file=/etc/zkgate/peer-secret/secret' 'secretName: zkgate-peer' 'defaultMode: 0440' \
  '- --data-dir=/var/lib/zkgate' 'mountPath: /var/lib/zkgate' 'sizeLimit: 64Mi'
lacks 'kind: PodMonitor' '- --insecure' 'scheme: HTTPS' 'targetPort: metrics'

render "TLS, a PodMonitor, a longer drain, creator ACLs" --set 'zookeeper.ensemble=zk1:2181' --set auth.existingSecret=zkgate-tokens \
  --set tls.enabled=true --set tls.secretName=zkgate-tls --set zookeeper.authSecret=zk-digest --set zookeeper.acl=creator \
  --set tls.peerCASecret=zkgate-ca --set metrics.podMonitor.enabled=true --set drainTimeoutSeconds=60
has 'kind: PodMonitor' '- "--zk-acl=creator"' 'scheme: HTTPS' '- --tls-cert=/etc/zkgate/tls/tls.crt' '- --tls-key=/etc/zkgate/tls/tls.key' \
  'secretName: zkgate-tls' '- --tls-peer-ca=/etc/zkgate/peer-ca/ca.crt' 'terminationGracePeriodSeconds: 85' '- --drain-timeout=60s'
lacks 'scheme: HTTP'

render "insecure, without a PodDisruptionBudget, a ZooKeeper identity" --set 'zookeeper.ensemble=zk:2181' --set insecure=true --set replicaCount=1 \
  --set podDisruptionBudget.enabled=false --set zookeeper.authSecret=zk-digest --set terminationGracePeriodSeconds=120 \
  --set 'allowedHosts={zkgate.example.com}'
has '- --insecure' '- --zk-auth-file=/etc/zkgate/zk-auth/auth' 'secretName: zk-digest' 'terminationGracePeriodSeconds: 120' \
  '- "--allowed-hosts=t-zkgate,t-zkgate.default,t-zkgate.default.svc,t-zkgate.default.svc.cluster.local,zkgate.example.com"'
lacks 'kind: PodDisruptionBudget' '- --auth-file=/etc/zkgate/auth/tokens'

refuses "zookeeper.ensemble is required" --set auth.existingSecret=zkgate-tokens
refuses "set auth.existingSecret" --set zookeeper.ensemble=zk:2181
refuses "must be longer than drainTimeoutSeconds" "${base[@]}" --set terminationGracePeriodSeconds=5
refuses "tls.enabled needs tls.secretName" "${base[@]}" --set tls.enabled=true
refuses "set peerSecret.existingSecret" --set 'zookeeper.ensemble=zk:2181' --set auth.existingSecret=zkgate-tokens
refuses "set peerSecret.existingSecret" --set 'zookeeper.ensemble=zk:2181' --set insecure=true
refuses "zookeeper.acl creator needs zookeeper.authSecret" "${base[@]}" --set zookeeper.acl=creator
refuses "metrics.serviceMonitor is now metrics.podMonitor" "${base[@]}" --set metrics.serviceMonitor.enabled=true

step "promtool check rules, test rules"
promtool check rules deploy/prometheus/zkgate-rules.yaml
promtool test rules deploy/prometheus/zkgate-rules.test.yaml
echo "test-deploy.sh: ok"
