#!/usr/bin/env bash
# Fails when generated code or CRDs differ from what hack/update-codegen.sh
# produces from the current API types. Generates into a scratch copy of the
# tree so that the checkout is never modified.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

tar -C "$ROOT" --exclude=./.git --exclude=./_output -cf - . | tar -C "$SCRATCH" -xf -
CODEGEN_OUTPUT_ROOT="$SCRATCH" "$ROOT/hack/update-codegen.sh"

status=0
for path in client api/crds api/machine/v1alpha1/zz_generated.deepcopy.go; do
	if ! diff -ruN "$ROOT/$path" "$SCRATCH/$path"; then
		status=1
	fi
done
if [[ $status -ne 0 ]]; then
	echo "verify-codegen: generated code is stale; run hack/update-codegen.sh and commit the result" >&2
	exit 1
fi
echo "verify-codegen: generated code is up to date"
