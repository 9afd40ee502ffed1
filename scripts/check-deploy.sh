#!/usr/bin/env bash
# Checks deploy/ with the tools that know its formats: the Kubernetes manifests against
# Kubernetes' own schemas, offline and strict (an unknown field fails), with kubernetes-validate;
# the systemd unit with systemd-analyze verify, where any complaint fails. Install the tools
# first with scripts/install-deploy-checks.sh. tests/deploy.rs checks both against the node.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/deploy-checks/venv
# A release still widely run (StatefulSet minReadySeconds, policy/v1 budgets are older) and the
# newest the pinned validator knows.
versions=(1.30 1.37)

# deploy/autoscaling's HPA and adapter ConfigMap too; KEDA's ScaledObject is a custom resource
# no schema here knows, so tests/autoscaling.rs checks it against the queries instead.
autoscaling=(deploy/autoscaling/hpa.yaml deploy/autoscaling/prometheus-adapter.yaml)
for version in "${versions[@]}"; do
    "$venv/bin/kubernetes-validate" --strict --quiet -k "$version" deploy/kubernetes/*.yaml \
        "${autoscaling[@]}"
done
echo "deploy/kubernetes, ${autoscaling[*]}: valid for Kubernetes ${versions[*]}"

# The unit names the installed binary; verify checks that it exists, so point it at the one
# just built (systemd-analyze exits 0 on unknown keys and values: any output fails here).
cargo build --quiet --bin lintel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#/usr/local/bin/lintel#$PWD/target/debug/lintel#" deploy/systemd/lintel.service \
    > "$work/lintel.service"
if ! systemd-analyze verify "$work/lintel.service" > "$work/verify.log" 2>&1 \
    || [ -s "$work/verify.log" ]; then
    sed "s#$work/##" "$work/verify.log" >&2
    echo "deploy/systemd/lintel.service: systemd-analyze verify complained" >&2
    exit 1
fi
echo "deploy/systemd/lintel.service: systemd-analyze verify is silent"
