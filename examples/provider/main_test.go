package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcmkit/mcm/reference/manager"
)

// The provider's driver is selectable with --driver, next to the built-in ones.
func TestDriverRegistered(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := manager.ParseFlags("mycloud-mcm", []string{"--driver=mycloud", "--control-kubeconfig", kc, "--target-kubeconfig", "none"},
		manager.DefaultControllers(), drivers(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Driver != "mycloud" {
		t.Errorf("driver = %q", cfg.Driver)
	}
	if _, ok := drivers()["sim"]; !ok {
		t.Error("built-in sim driver missing")
	}
}
