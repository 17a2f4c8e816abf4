package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcmkit/mcm/reference/manager"
)

// TestAcceptsTheProviderBinaryFlags parses the flags Gardener passes to an
// MCM provider container, with no --driver among them: the provider's
// driver is selected and the flags are taken as MCM takes them.
func TestAcceptsTheProviderBinaryFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--control-kubeconfig=inClusterConfig",
		"--machine-creation-timeout=20m",
		"--machine-drain-timeout=2h",
		"--machine-health-timeout=10m",
		"--machine-safety-apiserver-statuscheck-timeout=30s",
		"--machine-safety-apiserver-statuscheck-period=1m",
		"--machine-safety-orphan-vms-period=30m",
		"--namespace=shoot--core--prod",
		"--port=10259",
		"--target-kubeconfig=" + kc,
		"--v=3",
	}
	cfg, err := manager.ParseFlags("machine-controller-manager-provider-sim", withDefaultDriver(args), manager.DefaultControllers(), drivers(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{cfg.Driver, cfg.Namespace, cfg.Port, cfg.TargetKubeconfig, cfg.Verbosity}
	if diff := cmp.Diff([]any{providerName, "shoot--core--prod", 10259, kc, 3}, got); diff != "" {
		t.Errorf("driver, namespace, port, target kubeconfig, verbosity (-want +got):\n%s", diff)
	}
}

func TestWithDefaultDriver(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{nil, []string{"--driver=" + providerName}},
		{[]string{"--v=2"}, []string{"--driver=" + providerName, "--v=2"}},
		{[]string{"--driver=sim"}, []string{"--driver=sim"}},
		{[]string{"--driver", "sim"}, []string{"--driver", "sim"}},
		{[]string{"-driver=sim"}, []string{"-driver=sim"}},
		{[]string{"--driver-timeouts=CreateMachine=1m"}, []string{"--driver=" + providerName, "--driver-timeouts=CreateMachine=1m"}},
	} {
		if diff := cmp.Diff(tc.want, withDefaultDriver(tc.args)); diff != "" {
			t.Errorf("withDefaultDriver(%q) (-want +got):\n%s", tc.args, diff)
		}
	}
}
