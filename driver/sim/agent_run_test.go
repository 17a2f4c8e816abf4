package sim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinefake "github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/driver"
)

// The VM's in-place update outlives the process: a cloud restarted from
// its state file has the updated VM, and its kubelet reports the new
// version.
func TestStateFileKeepsTheInPlaceUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cloud.json")
	clk := clocktesting.NewFakeClock(agentEpoch)
	cloud, err := New(Options{Clock: clk, StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	old, updated := agentClass("old", agentSpec(oldVersion, "a")), agentClass("new", agentSpec(newVersion, "b"))
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: agentNS}}
	secret := &corev1.Secret{Data: map[string][]byte{CredentialsKey: []byte("t"), v1alpha1.UserDataKey: []byte("#!")}}
	resp, err := cloud.Driver().CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine, MachineClass: old, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cloud.classSpec(updated)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cloud.updateInPlace(resp.ProviderID, tagsOf(updated, spec), spec)
	if err != nil {
		t.Fatal(err)
	}
	restarted, err := New(Options{Clock: clk, StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := restarted.VM(resp.ProviderID)
	if !ok {
		t.Fatal("the VM is gone after the restart")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("VM after the restart (-before +after):\n%s", diff)
	}
	if got.KubeletVersion != newVersion || got.UpdatedTo.Name != "new" || got.Class.Name != "old" || !got.InPlaceUpdate.enabled() {
		t.Errorf("restored VM %+v", got)
	}
}

// A state file written before the in-place update's fields reads as VMs
// of the default version, without an agent.
func TestStateFileWithoutInPlaceFields(t *testing.T) {
	data := `{"version":1,"cloud":"c","lastAddress":"10.0.0.1","issuedProviderIDs":["sim:///z/m"],"vms":[
	{"providerID":"sim:///z/m","name":"m","machineName":"m","class":{"cluster":"","namespace":"","name":""},"zone":"z","instanceType":"t",
	 "addresses":[],"createdAt":"2026-01-01T00:00:00Z","bootStartedAt":"2026-01-01T00:00:00Z","bootedAt":"2026-01-01T00:00:00Z","deleteDelay":"0s"}]}`
	s, err := decodeState([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cloud{vms: map[string]*vm{}, issued: map[string]bool{}}
	c.apply(s)
	got := c.vms["sim:///z/m"].snapshot(agentEpoch)
	if got.KubeletVersion != DefaultKubeletVersion || got.InPlaceUpdate != nil {
		t.Errorf("old VM: version %s, agent %v", got.KubeletVersion, got.InPlaceUpdate)
	}
	bad := strings.Replace(data, `"deleteDelay":"0s"`, `"deleteDelay":"0s","kubeletVersion":"latest"`, 1)
	if _, err := decodeState([]byte(bad)); err == nil || !strings.Contains(err.Error(), "kubeletVersion") {
		t.Errorf("a state file with kubeletVersion latest: %v, want an error naming it", err)
	}
}

func TestProviderSpecInPlaceFields(t *testing.T) {
	cases := map[string]struct {
		json     string
		want     *InPlaceUpdate
		version  string
		errPaths []string
	}{
		"all set": {
			json:    `"kubeletVersion":"v1.38.0-sim","inPlaceUpdate":{"agent":true,"updateDelay":"10s","retryDelay":"1m"}`,
			want:    &InPlaceUpdate{Agent: true, UpdateDelay: &metav1.Duration{Duration: 10 * time.Second}, RetryDelay: &metav1.Duration{Duration: time.Minute}},
			version: "v1.38.0-sim",
		},
		"agent off, no delays": {json: `"inPlaceUpdate":{}`, want: &InPlaceUpdate{}},
		"version without v":    {json: `"kubeletVersion":"1.38.0"`, errPaths: []string{"providerSpec.kubeletVersion"}},
		"version not semantic": {json: `"kubeletVersion":"v1.38"`, errPaths: []string{"providerSpec.kubeletVersion"}},
		"version a number":     {json: `"kubeletVersion":1`, errPaths: []string{"providerSpec.kubeletVersion"}},
		"block not an object":  {json: `"inPlaceUpdate":true`, errPaths: []string{"providerSpec.inPlaceUpdate"}},
		"unknown key":          {json: `"inPlaceUpdate":{"agent":true,"delay":"1s"}`, errPaths: []string{"providerSpec.inPlaceUpdate.delay"}},
		"bad delay": {json: `"inPlaceUpdate":{"agent":"yes","updateDelay":"-1s"}`,
			errPaths: []string{"providerSpec.inPlaceUpdate.agent", "providerSpec.inPlaceUpdate.updateDelay"}},
		"delays without agent": {json: `"inPlaceUpdate":{"updateDelay":"1s","retryDelay":"1s"}`,
			errPaths: []string{"providerSpec.inPlaceUpdate.updateDelay", "providerSpec.inPlaceUpdate.retryDelay"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			raw := `{"zone":"z","instanceType":"t",` + tc.json + `}`
			spec, errs := decodeProviderSpec(runtime.RawExtension{Raw: []byte(raw)})
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.Field)
			}
			if diff := cmp.Diff(tc.errPaths, paths); diff != "" {
				t.Fatalf("error paths (-want +got):\n%s\n%v", diff, errs)
			}
			if len(tc.errPaths) > 0 {
				return
			}
			if diff := cmp.Diff(tc.want, spec.InPlaceUpdate); diff != "" || spec.KubeletVersion != tc.version {
				t.Errorf("inPlaceUpdate (-want +got):\n%s\nversion %q, want %q", diff, spec.KubeletVersion, tc.version)
			}
			// Encoding decodes to the same spec.
			again, errs := decodeProviderSpec(spec.RawExtension())
			if len(errs) > 0 || !cmp.Equal(spec, again) {
				t.Errorf("round trip: %v, %v", errs, cmp.Diff(spec, again))
			}
		})
	}
}

func TestInPlaceFaultCannotHang(t *testing.T) {
	cloud, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.InjectFault(Fault{Operation: OperationInPlaceUpdate, Hang: true}); err == nil {
		t.Error("a hanging in-place update fault was accepted")
	}
	if _, err := cloud.InjectFault(Fault{Operation: OperationInPlaceUpdate, Code: driver.Internal, Times: 1}); err != nil {
		t.Errorf("an in-place update fault was refused: %v", err)
	}
}

// Run wires the caches, the event handlers and the delays on the clock: a
// node that becomes ReadyForUpdate is updated once the clock has passed
// the update delay.
func TestAgentRun(t *testing.T) {
	w := newAgentWorld(t, agentSpec(oldVersion, "a"), agentSpec(newVersion, "b"))
	md := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: agentNS}}
	md.Spec.Template.Spec.Class.Name = "new"
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "md-a", Namespace: agentNS, OwnerReferences: controllerRef("MachineDeployment", "md")}}
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: agentNS, OwnerReferences: controllerRef("MachineSet", "md-a")}}
	machines := machinefake.NewSimpleClientset(md, set, machine, agentClass("old", agentSpec(oldVersion, "a")), agentClass("new", agentSpec(newVersion, "b")))
	target := fake.NewClientset(w.readyNode())
	agent, err := NewAgent(w.cloud, target, machines, AgentOptions{Identity: agentIdentity, Namespace: agentNS})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if err := agent.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := target.CoreV1().Nodes().Get(ctx, w.vm.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful {
			return true, nil
		}
		// The VM is updated a moment before its node is labelled: only a
		// new version while the clock is short of the delay is early.
		if got := w.currentVM().KubeletVersion; got != oldVersion && w.clock.Since(agentEpoch) < time.Minute {
			t.Errorf("updated to %s %v on the clock, before the update delay of a minute", got, w.clock.Since(agentEpoch))
		}
		w.clock.Step(5 * time.Second)
		return false, nil
	})
	if err != nil {
		t.Fatalf("the node was never labelled successful: %v", err)
	}
	if got := w.currentVM().KubeletVersion; got != newVersion {
		t.Errorf("VM version %s, want %s", got, newVersion)
	}
	if elapsed := w.clock.Since(agentEpoch); elapsed < time.Minute {
		t.Errorf("updated after %v on the clock, before the update delay of a minute", elapsed)
	}
}
