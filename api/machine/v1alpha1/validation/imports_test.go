package validation_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the package usable by webhooks and tools without the
// controllers: it may import the standard library, the API package,
// k8s.io/apimachinery and k8s.io/api, and must not pull in client-go or
// anything else of this module.
func TestImports(t *testing.T) {
	const apiPackage = "github.com/mcmkit/mcm/api/machine/v1alpha1"
	const self = apiPackage + "/validation"

	imports, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(imports)) {
		isStandard := !strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".")
		switch {
		case isStandard, pkg == apiPackage:
		case strings.HasPrefix(pkg, "k8s.io/apimachinery/"), strings.HasPrefix(pkg, "k8s.io/api/"):
		default:
			t.Errorf("validation imports %s; only the API package, k8s.io/apimachinery and k8s.io/api are allowed", pkg)
		}
	}

	deps, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(deps)) {
		switch {
		case pkg == self, pkg == apiPackage:
		case strings.HasPrefix(pkg, "github.com/mcmkit/mcm"):
			t.Errorf("validation depends on %s from this module", pkg)
		case strings.HasPrefix(pkg, "k8s.io/client-go"):
			t.Errorf("validation depends on client-go (%s)", pkg)
		}
	}
}
