package mcmdriver_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestOneBinaryWithMCMAndOurKubernetes checks what minimal version
// selection made of this module, whose test binary links MCM's driver, its
// API types and ours: MCM at the version this module supports, and
// Kubernetes' API at the root module's version, not at the older one MCM
// was built with.
func TestOneBinaryWithMCMAndOurKubernetes(t *testing.T) {
	// A test binary carries no module versions in its build information,
	// so ask the go command, which built it, what it selected.
	selected := func(path string) string {
		out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", path).Output()
		if err != nil {
			t.Fatalf("go list -m %s: %v", path, err)
		}
		return strings.TrimSpace(string(out))
	}
	rootMod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api (v\S+)`).FindSubmatch(rootMod)
	if m == nil {
		t.Fatal("the root go.mod requires no k8s.io/api")
	}
	for path, want := range map[string]string{
		"github.com/gardener/machine-controller-manager": "v0.62.1",
		"k8s.io/api": string(m[1]),
	} {
		if got := selected(path); got != want {
			t.Errorf("the build selects %s %q, want %s", path, got, want)
		}
	}
	graph, err := exec.CommandContext(t.Context(), "go", "mod", "graph").Output()
	if err != nil {
		t.Fatalf("go mod graph: %v", err)
	}
	// MCM asks for an older Kubernetes; the selection above overrides it.
	mcmWants := regexp.MustCompile(`(?m)^github\.com/gardener/machine-controller-manager@v0\.62\.1 k8s\.io/api@(v\S+)$`).FindSubmatch(graph)
	if mcmWants == nil || string(mcmWants[1]) == string(m[1]) {
		t.Errorf("MCM v0.62.1 requires k8s.io/api %q; this test is about a binary that overrides MCM's Kubernetes", mcmWants)
	}
}
