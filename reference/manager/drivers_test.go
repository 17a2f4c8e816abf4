package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

func simRequest(name string) (*v1alpha1.Machine, *v1alpha1.MachineClass, *corev1.Secret) {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}},
		&v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "default"},
			Provider:     sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		},
		&corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("#!"), sim.CredentialsKey: []byte("t")}}
}

// A manager restarted with the same state file finds the VMs the last one
// created, under the same provider IDs.
func TestSimDriverWithStateFileSurvivesARestart(t *testing.T) {
	ctx := t.Context()
	factory := SimDriver(SimDriverOptions{StateFile: filepath.Join(t.TempDir(), "sim.json")})
	first, _, err := factory(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	m, class, secret := simRequest("m1")
	created, err := first.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}

	restarted, _, err := factory(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatalf("sim driver after the restart: %v", err)
	}
	status, err := restarted.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatalf("GetMachineStatus after the restart: %v", err)
	}
	if status.ProviderID != created.ProviderID {
		t.Errorf("provider ID after the restart = %s, want %s", status.ProviderID, created.ProviderID)
	}
	listed, err := restarted.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{created.ProviderID: "m1"}, listed.Machines); diff != "" {
		t.Errorf("ListMachines after the restart (-want +got):\n%s", diff)
	}

	// Without a state file, the cloud is the process's.
	inMemory, _, err := NewSimDriver(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inMemory.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret}); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("GetMachineStatus of an in-memory sim: %v, want NotFound", err)
	}
}

// A state file that is not a sim cloud's state fails the driver, and so the
// manager's start, instead of an empty cloud in which every VM looks gone.
func TestSimDriverRefusesACorruptStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "vms": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := SimDriver(SimDriverOptions{StateFile: path})(t.Context(), DriverEnv{Logger: logr.Discard()})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("sim driver with a corrupt state file: %v; want an error naming %s", err, path)
	}
}

// The simulated kubelet of a restarted manager carries on with the Nodes
// of the last one: it renews the lease of a Node registered before the
// restart, which a kubelet of another identity would leave alone.
func TestSimDriverKubeletCarriesOnWithNodesAfterARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	// The last manager created the VM an hour ago and registered its Node.
	before, err := sim.New(sim.Options{Clock: clocktesting.NewFakeClock(time.Now().Add(-time.Hour)), StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	m, class, secret := simRequest("m1")
	created, err := before.Driver().CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	target := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        created.NodeName,
		Annotations: map[string]string{sim.AnnotationSimulated: before.ID()},
	}})

	_, background, err := SimDriver(SimDriverOptions{StateFile: path})(t.Context(), DriverEnv{Target: target, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- background(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet: %v", err)
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := target.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, created.NodeName, metav1.GetOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted manager's kubelet did not renew the lease of node %s", created.NodeName)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
