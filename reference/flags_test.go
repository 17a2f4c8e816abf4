package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// mcmCommandLines are the command lines of MCM v0.62.1's two processes:
// first as Gardener deploys them (the machine-controller-manager container,
// and the provider's machine-controller sidecar its provider extensions
// inject), then every other flag the two register, at MCM's defaults or as
// MCM's own sample manifest sets them. Together they are every flag of
// MCM's `--help`.
func mcmCommandLines(kubeconfig, namespace string) (machineControllerManager, machineController, others []string) {
	machineControllerManager = []string{
		"--control-kubeconfig=" + kubeconfig, "--machine-safety-overshooting-period=1m", "--namespace=" + namespace, "--port=10258",
		"--safety-up=2", "--safety-down=1", "--target-kubeconfig=" + kubeconfig,
		"--concurrent-syncs=30", "--kube-api-qps=150", "--kube-api-burst=200", "--v=3",
	}
	machineController = []string{
		"--control-kubeconfig=" + kubeconfig, "--machine-creation-timeout=20m", "--machine-drain-timeout=2h", "--machine-health-timeout=10m",
		"--machine-safety-apiserver-statuscheck-timeout=30s", "--machine-safety-apiserver-statuscheck-period=1m",
		"--machine-safety-orphan-vms-period=30m", "--namespace=" + namespace, "--port=10259", "--target-kubeconfig=" + kubeconfig, "--v=3",
	}
	others = []string{
		"--address=0.0.0.0", "--cloud-provider=aws", "--profiling", "--contention-profiling", "--controller-start-interval=0s",
		"--min-resync-period=12h0m0s", "--kube-api-content-type=application/vnd.kubernetes.protobuf", "--leader-elect=true",
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
		"--leader-elect-resource-lock=leases", "--log-flush-frequency=5s", "--vmodule=", "--autoscaler-scaledown-annotation-during-rollout=true",
		"--bootstrap-token-auth-extra-groups=system:bootstrappers:worker", "--machine-inplace-update-timeout=20m",
		"--machine-max-evict-retries=360", "--machine-preserve-timeout=96h", "--machine-pv-detach-timeout=2m",
		"--machine-pv-reattach-timeout=90s", "--node-conditions=ReadonlyFilesystem,KernelDeadlock,DiskPressure,NetworkUnavailable",
		"--resource-exhausted-retry=10m",
	}
	return machineControllerManager, machineController, others
}

// The binary started with the flags of both of MCM's processes at once
// runs, gets a machine Running, and names the flags that mean nothing here
// in exactly one warning line.
func TestBinaryTakesMCMCommandLines(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	createMachineObjects(t, env, mc, ns)
	mcm, mcmMC, others := mcmCommandLines(env.Kubeconfig(), ns)
	args := append(append(append(append([]string{}, mcm...), mcmMC...), others...), "--driver=sim")
	in := start(t, binary(t), "manager", args...)

	name := "flags-" + randomSuffix(t)
	createMachine(t, mc, ns, name)
	waitPhase(t, mc, ns, name, v1alpha1.MachineRunning, 2*time.Minute)

	checkIgnoredWarning(t, in, `"msg"="Flags accepted for compatibility with machine-controller-manager and ignored: --cloud-provider, --controller-start-interval, `+
		`--min-resync-period, --log-flush-frequency, --vmodule"`)
	// With both of MCM's command lines, it is both of MCM's processes.
	for _, group := range []string{"machine-controller", "machine-controller-manager"} {
		if v := in.groupRunning(group); v != "1" {
			t.Errorf("mcm_manager_group_running{group=%q} = %q, want 1", group, v)
		}
	}
}

// checkIgnoredWarning fails the test unless the log of in has exactly one
// line naming ignored flags, and it contains want.
func checkIgnoredWarning(t *testing.T, in *instance, want string) {
	t.Helper()
	in.mu.Lock()
	log := in.log.String()
	in.mu.Unlock()
	var warnings []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "and ignored:") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], want) {
		t.Errorf("warning lines:\n%s\nwant exactly one with %s", strings.Join(warnings, ""), want)
	}
}

// MCM takes the leader election flags with --leader-elect=false and
// ignores them; a single-replica MCM deployment passes them so. The binary
// runs with them, gets a machine Running, and names them in the one
// warning line.
func TestBinaryTakesLeaseFlagsWithoutElection(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	createMachineObjects(t, env, mc, ns)
	in := start(t, binary(t), "manager", "--control-kubeconfig="+env.Kubeconfig(), "--target-kubeconfig="+env.Kubeconfig(),
		"--namespace="+ns, "--driver=sim", "--leader-elect=false", "--leader-elect-lease-duration=15s",
		"--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s", "--leader-elect-resource-lock=leases")

	name := "no-election-" + randomSuffix(t)
	createMachine(t, mc, ns, name)
	waitPhase(t, mc, ns, name, v1alpha1.MachineRunning, 2*time.Minute)
	checkIgnoredWarning(t, in, `"msg"="Flags accepted for compatibility with machine-controller-manager and ignored: --leader-elect-lease-duration, `+
		`--leader-elect-renew-deadline, --leader-elect-retry-period, --leader-elect-resource-lock"`)
}

// A flag neither of this manager nor of MCM ends the binary with exit
// code 2 and one line naming it; -h lists MCM's ignored flags apart.
func TestBinaryRejectsUnknownFlag(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--control-kubeconfig=none", "--no-such-flag", "--driver=sim")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want exit code 2; stderr:\n%s", err, stderr.String())
	}
	if want := "mcm: unknown flag --no-such-flag: neither this manager's nor machine-controller-manager's (see mcm -h)\n"; stderr.String() != want {
		t.Errorf("stderr = %q\nwant     %q", stderr.String(), want)
	}

	out, err := exec.Command(bin, "-h").Output()
	if err != nil {
		t.Fatalf("-h: %v", err)
	}
	_, ignored, ok := strings.Cut(string(out), "Flags of machine-controller-manager accepted for compatibility and ignored")
	if !ok || !strings.Contains(ignored, "-min-resync-period duration") || !strings.Contains(ignored, "(ignored, accepted for compatibility with MCM)") {
		t.Errorf("-h does not list the ignored flags apart:\n%s", out)
	}
}

// groupRunning is the value of mcm_manager_group_running for group, or ""
// if absent.
func (in *instance) groupRunning(group string) string {
	_, body := in.get("/metrics")
	prefix := fmt.Sprintf("mcm_manager_group_running{group=%q} ", group)
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return v
		}
	}
	return ""
}
