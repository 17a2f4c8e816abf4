#!/usr/bin/env bash
# Builds a scratch module that requires github.com/mcmkit/mcm (replaced by this
# checkout) and imports every non-internal package of it, then fails if the
# module graph contains anything a library user should never download:
# controller-runtime, ginkgo, gomega or k8s.io/kubernetes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

# The root module requires these libraries directly and nothing else.
allowed='^(k8s\.io/(client-go|api|apimachinery|utils)|github\.com/go-logr/logr|github\.com/prometheus/client_golang|github\.com/google/go-cmp|pgregory\.net/rapid)$'
if extra="$(cd "$ROOT" && go list -m -f '{{if not (or .Main .Indirect)}}{{.Path}}{{end}}' all | grep -vE "$allowed")"; then
	echo "check-deps: go.mod requires more than the allowed libraries directly:" >&2
	echo "$extra" >&2
	exit 1
fi

# Commands (examples, the reference binary) cannot be imported; their
# requirements are in go.mod, which the check above covers. Packages made of
# tests only have nothing to import.
mapfile -t pkgs < <(cd "$ROOT" && go list -f '{{if and (ne .Name "main") .GoFiles}}{{.ImportPath}}{{end}}' ./... | grep -v -e '/internal/' -e '/hack/')

{
	echo "package main"
	echo
	echo "import ("
	for p in "${pkgs[@]}"; do
		[[ "$p" == github.com/mcmkit/mcm ]] && continue
		echo "	_ \"$p\""
	done
	echo ")"
	echo
	echo "func main() {}"
} > "$SCRATCH/main.go"

cd "$SCRATCH"
go mod init example.com/scratch >/dev/null 2>&1
go mod edit -require=github.com/mcmkit/mcm@v0.0.0 -replace=github.com/mcmkit/mcm="$ROOT"
go mod tidy >/dev/null
go build ./...

forbidden='^(sigs\.k8s\.io/controller-runtime|github\.com/onsi/ginkgo|github\.com/onsi/gomega|k8s\.io/kubernetes)( |$)'
if found="$(go list -m all | grep -E "$forbidden")"; then
	echo "check-deps: a user of github.com/mcmkit/mcm would download:" >&2
	echo "$found" >&2
	exit 1
fi
echo "check-deps: $(go list -m all | wc -l) modules in a user's graph, none forbidden"
