package v1alpha1_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the API package importable on its own: it may depend on
// the standard library, k8s.io/apimachinery and k8s.io/api, but on nothing
// else from this module and never on client-go.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/mcmkit/mcm/api/machine/v1alpha1"
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == self:
		case strings.HasPrefix(pkg, "github.com/mcmkit/mcm"):
			t.Errorf("API package depends on %s from this module", pkg)
		case strings.HasPrefix(pkg, "k8s.io/client-go"):
			t.Errorf("API package depends on client-go (%s)", pkg)
		}
	}
}
