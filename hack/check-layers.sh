#!/usr/bin/env bash
# Keeps the module's layers apart (internal/README.md says why):
#
#  1. No binary links package testing: `go list -deps` of ./reference/...,
#     ./examples/... and ./kubectl-mcm/... holds no "testing".
#  2. Test support (internal/testsupport/..., e2e/simstack) is imported by
#     tests and by other test support only.
#  3. internal/ is the foundation: its packages import, of this module, only
#     api/..., client/... and other internal/ packages; test support under
#     internal/testsupport may use the library's leaf packages too, but no
#     controller (machine, machineset, deployment, safety, reference).
#
# Test files are held to rules 2 and 3 as well, except that any test may
# import test support.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MOD=github.com/mcmkit/mcm
fail=0

if found="$(go list -deps ./reference/... ./examples/... ./kubectl-mcm/... | grep -x testing)"; then
	echo "check-layers: a binary links package $found:" >&2
	go list -f '{{.ImportPath}}: {{join .Imports " "}}' -deps ./reference/... ./examples/... ./kubectl-mcm/... |
		grep -E '(^| )testing( |$)' | grep "^$MOD" >&2 || true
	fail=1
fi

testsupport="^$MOD/(internal/testsupport|e2e/simstack)(/|\$)"
controller="^$MOD/(machine|machineset|deployment|safety|reference)(/|\$)"
foundation="^$MOD/(api|client|internal)(/|\$)"

# One line per import: "<kind> <importer> <imported>", kind "pkg" for the
# package's own files, "test" for its tests.
edges="$(go list -f '{{$p := .ImportPath}}{{range .Imports}}pkg {{$p}} {{.}}
{{end}}{{range .TestImports}}test {{$p}} {{.}}
{{end}}{{range .XTestImports}}test {{$p}} {{.}}
{{end}}' ./... | awk -v mod="$MOD" 'index($3, mod) == 1' | sort -u)"

while read -r kind from to; do
	[[ -z "$kind" || "$from" == "$to" || "$from" == "$to"_test ]] && continue
	if [[ "$kind" == pkg && "$to" =~ $testsupport && ! "$from" =~ $testsupport ]]; then
		echo "check-layers: $from imports test support $to (only tests may)" >&2
		fail=1
	fi
	[[ "$from" =~ ^$MOD/internal/ ]] || continue
	if [[ "$from" =~ $testsupport ]]; then
		if [[ "$to" =~ $controller ]]; then
			echo "check-layers: test support $from imports the controller package $to" >&2
			fail=1
		fi
	elif [[ ! "$to" =~ $foundation && ! ("$kind" == test && "$to" =~ $testsupport) ]]; then
		echo "check-layers: $from ($kind) imports $to, above internal/ (internal/ may import only api/, client/ and internal/)" >&2
		fail=1
	fi
done <<<"$edges"

if ((fail)); then
	exit 1
fi
echo "check-layers: no binary links testing; test support only in tests; internal/ imports only api/, client/, internal/"
