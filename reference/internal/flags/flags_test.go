package flags

import (
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testTables are a binary's tables of one controller that needs the
// driver, and the sim driver.
var testTables = Tables{
	Controllers: map[string]Controller{"machine": {Group: "machine-controller", NeedsDriver: true}},
	Groups:      []string{"machine-controller", "machine-controller-manager"},
	Drivers:     []string{"sim"},
}

func kubeconfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParseFlagsHelp(t *testing.T) {
	var out strings.Builder
	_, err := Parse("mcm", []string{"-h"}, testTables, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	used, ignored, ok := strings.Cut(out.String(), "Flags of machine-controller-manager accepted for compatibility and ignored")
	if !ok {
		t.Fatalf("usage has no group of ignored flags:\n%s", out.String())
	}
	lists := func(usage, name string) bool {
		return regexp.MustCompile(`(?m)^  -` + name + `( |$)`).MatchString(usage)
	}
	for _, f := range []string{"control-kubeconfig", "target-kubeconfig", "leader-elect-lease-duration", "machine-drain-timeout", "driver",
		"bootstrap-token-auth-extra-groups", "kube-api-content-type", "contention-profiling", "leader-elect-resource-lock"} {
		if !lists(used, f) {
			t.Errorf("usage lacks -%s before the ignored flags:\n%s", f, out.String())
		}
	}
	for _, f := range ignoredFlags {
		if !lists(ignored, f.name) || lists(used, f.name) {
			t.Errorf("usage does not list -%s among the ignored flags only:\n%s", f.name, out.String())
		}
	}
	if !strings.Contains(ignored, "(default 12h0m0s)") {
		t.Errorf("usage lacks MCM's default of --min-resync-period:\n%s", ignored)
	}
}

// mcmFlags are the flags the two binaries of MCM v0.62.1 register (their
// options' AddFlags, component-base's logs.AddFlags and MCM's leader
// election flags, as `machine-controller-manager --help` and a provider's
// `machine-controller --help` list them), each with a value: every one is
// accepted, with its type.
var mcmFlags = map[string]string{
	// Both processes.
	"address": "0.0.0.0", "cloud-provider": "aws", "concurrent-syncs": "10", "contention-profiling": "true",
	"control-kubeconfig": "", "controller-start-interval": "0s", "kube-api-burst": "30",
	"kube-api-content-type": "application/vnd.kubernetes.protobuf", "kube-api-qps": "20", "leader-elect": "true",
	"leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s", "leader-elect-resource-lock": "leases",
	"leader-elect-retry-period": "2s", "log-flush-frequency": "5s", "min-resync-period": "12h", "namespace": "shoot--a--b",
	"port": "10258", "profiling": "true", "target-kubeconfig": "", "v": "3", "vmodule": "",
	// machine-controller-manager.
	"autoscaler-scaledown-annotation-during-rollout": "true", "machine-safety-overshooting-period": "1m", "safety-down": "1", "safety-up": "2",
	// machine-controller.
	"bootstrap-token-auth-extra-groups": "system:bootstrappers:worker", "machine-creation-timeout": "20m", "machine-drain-timeout": "2h",
	"machine-health-timeout": "10m", "machine-inplace-update-timeout": "20m", "machine-max-evict-retries": "360",
	"machine-preserve-timeout": "96h", "machine-pv-detach-timeout": "2m", "machine-pv-reattach-timeout": "90s",
	"machine-safety-apiserver-statuscheck-period": "1m", "machine-safety-apiserver-statuscheck-timeout": "30s",
	"machine-safety-orphan-vms-period": "15m",
	"node-conditions":                  "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable", "resource-exhausted-retry": "10m",
}

// Every flag of MCM is accepted, with the value types MCM gives them, and
// exactly the ones that mean nothing here are named as ignored.
func TestParseFlagsAcceptsEveryMCMFlag(t *testing.T) {
	kc := kubeconfigFile(t)
	var args []string
	for _, name := range slices.Sorted(maps.Keys(mcmFlags)) {
		value := mcmFlags[name]
		if name == "control-kubeconfig" || name == "target-kubeconfig" {
			value = kc
		}
		args = append(args, "--"+name+"="+value)
	}
	c, err := Parse("mcm", append(args, "--driver=sim"), testTables, io.Discard)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var want []string
	for _, f := range ignoredFlags {
		want = append(want, f.name)
	}
	if diff := cmp.Diff(want, c.IgnoredFlags, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("ignored flags (-want +got):\n%s", diff)
	}
	// Every ignored flag is one of MCM's: none is ignored that MCM lacks.
	for _, f := range ignoredFlags {
		if _, ok := mcmFlags[f.name]; !ok {
			t.Errorf("--%s is ignored but is not a flag of MCM", f.name)
		}
	}
	if c.Namespace != "shoot--a--b" || c.Verbosity != 3 || c.ConcurrentSyncs != 10 || !c.ContentionProfiling {
		t.Errorf("values not taken: %+v", c)
	}
}

func TestMCMSpellings(t *testing.T) {
	got := mcmSpellings([]string{"--machine_drain_timeout=1h_x", "-v3", "-v", "2", "--a_b", "x_y", "-vmodule=a_b=1", "-", "--", "--c_d", "-v5"})
	want := []string{"--machine-drain-timeout=1h_x", "-v=3", "-v", "2", "--a-b", "x_y", "-vmodule=a_b=1", "-", "--", "--c_d", "-v5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mcmSpellings (-want +got):\n%s", diff)
	}
}

// A table entry that names no known group is refused, as is a driver the
// registry lacks; both name what is known.
func TestValidateChecksTheTables(t *testing.T) {
	c := Default()
	c.ControlKubeconfig, c.TargetKubeconfig, c.Driver = InCluster, NoTarget, "aws"
	tables := Tables{
		Controllers: map[string]Controller{"machine": {Group: "machine-controller"}, "odd": {Group: "elsewhere"}},
		Groups:      []string{"machine-controller", "machine-controller-manager"},
		Drivers:     []string{"sim", "gcp"},
	}
	want := `controller "odd": its table entry names no group (machine-controller or machine-controller-manager), got "elsewhere"; ` +
		`--driver: unknown driver "aws" (known: gcp, sim)`
	err := Validate(c, tables)
	if err == nil {
		t.Fatal("Validate accepted the configuration")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}
