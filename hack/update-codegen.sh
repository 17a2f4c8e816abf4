#!/usr/bin/env bash
# Regenerates everything derived from the API types:
#   - deepcopy functions      api/machine/v1alpha1/zz_generated.deepcopy.go
#   - clientset (with fake)   client/clientset/versioned
#   - listers and informers   client/listers, client/informers
#   - CustomResourceDefinitions api/crds/*.yaml (schemas, CEL rules, columns)
# The generators are pinned in hack/tools/go.mod, a module of their own, so
# that users of the library never download them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# OUT lets verify-codegen.sh generate into a copy of the tree.
OUT="${CODEGEN_OUTPUT_ROOT:-$ROOT}"
TOOLS="$ROOT/_output/tools"
MODULE=github.com/mcmkit/mcm
API_PKG=./api/machine/v1alpha1
BOILERPLATE="$ROOT/hack/boilerplate.go.txt"

mkdir -p "$TOOLS"
# One build for all of them, so that their packages compile side by side.
(
	cd "$ROOT/hack/tools"
	go build -o "$TOOLS/" k8s.io/code-generator/cmd/deepcopy-gen k8s.io/code-generator/cmd/client-gen \
		k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen \
		sigs.k8s.io/controller-tools/cmd/controller-gen ./crdbounds
)

cd "$OUT"
rm -rf client api/crds/*.yaml api/machine/v1alpha1/zz_generated.deepcopy.go

"$TOOLS/deepcopy-gen" --go-header-file "$BOILERPLATE" \
	--output-file zz_generated.deepcopy.go "$API_PKG"

"$TOOLS/client-gen" --go-header-file "$BOILERPLATE" \
	--clientset-name versioned \
	--input-base "$MODULE/api" --input machine/v1alpha1 \
	--output-pkg "$MODULE/client/clientset" --output-dir client/clientset

"$TOOLS/lister-gen" --go-header-file "$BOILERPLATE" \
	--output-pkg "$MODULE/client/listers" --output-dir client/listers "$API_PKG"

"$TOOLS/informer-gen" --go-header-file "$BOILERPLATE" \
	--versioned-clientset-package "$MODULE/client/clientset/versioned" \
	--listers-package "$MODULE/client/listers" \
	--output-pkg "$MODULE/client/informers" --output-dir client/informers "$API_PKG"

# generateEmbeddedObjectMeta gives template metadata a schema, so that CEL
# rules can compare the selector with the template's labels.
"$TOOLS/controller-gen" crd:generateEmbeddedObjectMeta=true \
	paths="$API_PKG/..." output:crd:dir=api/crds
# Label selectors and labels come from Kubernetes types that take no markers;
# bound their sizes so the API server can cost the CEL rules over them.
"$TOOLS/crdbounds" api/crds/*.yaml

gofmt -s -w client api/machine/v1alpha1
