#!/usr/bin/env bash
# Builds the binaries of the integration test environment — etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl — from source fetched through
# the Go module proxy, in a throwaway module under the cache directory.
#
# Output: ${MCM_TESTENV_DIR:-$HOME/.cache/mcm/testenv/<kube version>}/bin
# A second run finds the binaries and returns at once. A cold build takes about
# 15 minutes on two cores; progress is printed so it never looks hung.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
# Staging modules are published as v0.<minor>.<patch> of the Kubernetes release.
STAGING_VERSION="v0${KUBE_VERSION#v1}"

DIR="${MCM_TESTENV_DIR:-$HOME/.cache/mcm/testenv/$KUBE_VERSION}"
BIN="$DIR/bin"
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

have_all() {
	for b in "${BINARIES[@]}"; do
		[[ -x "$BIN/$b" ]] || return 1
	done
	[[ -f "$BIN/.complete-$KUBE_VERSION-$ETCD_VERSION" ]]
}

if have_all; then
	echo "testenv: binaries present in $BIN"
	exit 0
fi

mkdir -p "$DIR"
# Serialize concurrent builds (make testenv and make test started side by side).
exec 9>"$DIR/.lock"
if ! flock -n 9; then
	echo "testenv: another build holds $DIR/.lock; waiting for it"
	flock 9
fi
if have_all; then
	echo "testenv: binaries present in $BIN"
	exit 0
fi

start=$(date +%s)
ticker() {
	while sleep 30; do
		echo "testenv: still building ($(( ($(date +%s) - start) / 60 ))m$(( ($(date +%s) - start) % 60 ))s elapsed)..."
	done
}
ticker &
ticker_pid=$!
trap 'kill $ticker_pid 2>/dev/null || true' EXIT

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off GOTOOLCHAIN=local
stage="$DIR/stage"
rm -rf "$stage"
mkdir -p "$stage"

# --- etcd --------------------------------------------------------------------
echo "testenv: [1/2] building etcd $ETCD_VERSION (about 2 minutes cold)"
etcd_mod="$DIR/src/etcd"
mkdir -p "$etcd_mod"
cat >"$etcd_mod/go.mod" <<MOD
module mcm.local/testenv/etcd

go 1.26

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
(cd "$etcd_mod" && go build -trimpath -o "$stage/etcd" go.etcd.io/etcd/server/v3)

# --- Kubernetes --------------------------------------------------------------
echo "testenv: [2/2] building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $KUBE_VERSION (about 13 minutes cold)"
kube_mod="$DIR/src/kubernetes"
mkdir -p "$kube_mod"
# k8s.io/kubernetes refers to its staging modules as v0.0.0 with local replaces,
# which do not apply to a dependent module: pin each one to its published version.
kube_gomod=$(cd "$etcd_mod" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
if [[ -z "$kube_gomod" || ! -f "$kube_gomod" ]]; then
	echo "testenv: could not fetch the go.mod of k8s.io/kubernetes@$KUBE_VERSION" >&2
	exit 1
fi
{
	echo "module mcm.local/testenv/kubernetes"
	echo
	echo "go 1.26"
	echo
	echo "require k8s.io/kubernetes $KUBE_VERSION"
	echo
	sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"$STAGING_VERSION"'#p' "$kube_gomod"
} >"$kube_mod/go.mod"
if ! grep -q '^replace k8s.io/api ' "$kube_mod/go.mod"; then
	echo "testenv: found no staging replaces in $kube_gomod" >&2
	exit 1
fi

pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$(echo "$KUBE_VERSION" | cut -d. -f1 | tr -d v) -X $pkg.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
(cd "$kube_mod" && go build -trimpath -ldflags "$ldflags" -o "$stage/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl)

mkdir -p "$BIN"
for b in "${BINARIES[@]}"; do
	mv -f "$stage/$b" "$BIN/$b"
done
touch "$BIN/.complete-$KUBE_VERSION-$ETCD_VERSION"
rm -rf "$stage"
echo "testenv: done in $(( ($(date +%s) - start) / 60 ))m; binaries in $BIN"
"$BIN/kube-apiserver" --version
