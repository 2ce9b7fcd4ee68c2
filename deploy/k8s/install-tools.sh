#!/usr/bin/env bash
# Builds the pinned helm and kubeconform from source through the Go module proxy into
# .tools/bin/ (git-ignored). Run by `make k8s-tools`, which skips it once its stamp exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${HELM_VERSION:?}" "${KUBECONFORM_VERSION:?}"
command -v go >/dev/null 2>&1 || { echo "error: go not found: install Go 1.24 or newer (it builds helm and kubeconform)" >&2; exit 1; }
bin=$PWD/.tools/bin
log=$PWD/.tools/go-install.log
mkdir -p "$bin"
export GOBIN=$bin GOFLAGS=-buildvcs=false CGO_ENABLED=0
echo "==> building helm $HELM_VERSION and kubeconform $KUBECONFORM_VERSION with go install into .tools/bin (first time: a few minutes)"
build() {  # package@version, version flag
  go install -ldflags "-s -w -X $2" "$1" >"$log" 2>&1 || { cat "$log" >&2; echo "error: go install $1 failed" >&2; exit 1; }
}
build "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" "helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
build "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" "main.version=$KUBECONFORM_VERSION"
echo "    helm $("$bin/helm" version --short), kubeconform $("$bin/kubeconform" -v)"
