package manager

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinefake "github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// The sim driver's background work runs the node agent beside the
// kubelet: a node of a class that enables it, ReadyForUpdate, is updated
// to its deployment's class, and its kubelet reports the new version.
func TestSimDriverRunsTheNodeAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	before, err := sim.New(sim.Options{StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(version string) sim.ProviderSpec {
		return sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", KubeletVersion: version, InPlaceUpdate: &sim.InPlaceUpdate{Agent: true}}
	}
	m, old, secret := simRequest("m1")
	old.ProviderSpec = spec("v1.37.0").RawExtension()
	updated := old.DeepCopy()
	updated.Name, updated.ProviderSpec = "big", spec("v1.38.0").RawExtension()
	created, err := before.Driver().CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: m, MachineClass: old, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}

	owner := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}}
	}
	m.OwnerReferences = owner("MachineSet", "set")
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "default", OwnerReferences: owner("MachineDeployment", "md")}}
	md := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "default"}}
	md.Spec.Template.Spec.Class.Name = "big"
	machines := machinefake.NewSimpleClientset(m, set, md, old, updated)
	target := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: created.NodeName, Annotations: map[string]string{sim.AnnotationSimulated: before.ID()}},
		Spec:       corev1.NodeSpec{ProviderID: created.ProviderID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: v1alpha1.ReadyForUpdate,
		}}},
	})

	cfg := DefaultConfig()
	cfg.SimStateFile = path
	_, background, err := NewSimDriver(t.Context(), DriverEnv{Config: cfg, Target: target, Machines: machines, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- background(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("background: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := target.CoreV1().Nodes().Get(ctx, created.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[v1alpha1.UpdateResultLabel] == v1alpha1.UpdateResultSuccessful && n.Status.NodeInfo.KubeletVersion == "v1.38.0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: labels %v, kubelet version %q; want updated to v1.38.0 and labelled successful",
				n.Name, n.Labels, n.Status.NodeInfo.KubeletVersion)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
