package orphanvms_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/e2e/simstack"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/safety/orphanvms"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

// TestIntegrationOrphanVMs: five VMs started behind the manager's back in
// the cloud of a class are deleted after the grace period; the VMs of the
// class's machines, and a VM of the same class name in another cluster,
// are not.
func TestIntegrationOrphanVMs(t *testing.T) {
	s := simstack.Start(t, simstack.Options{Safety: true,
		OrphanVMs: orphanvms.Options{OrphanVMsPeriod: time.Second, OrphanGracePeriod: 3 * time.Second}})
	ctx := context.Background()
	mc := s.Machines.MachineV1alpha1()
	class, err := mc.MachineClasses(s.NS).Get(ctx, s.Class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// Generated names: node names follow machine names, and nodes of an
		// earlier run in the same control plane stay.
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{GenerateName: "kept-", Namespace: s.NS},
			Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: s.Class}}}
		if _, err := mc.Machines(s.NS).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		list, _ := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
		n := 0
		for _, m := range list.Items {
			if m.Status.CurrentStatus.Phase == v1alpha1.MachineRunning {
				n++
			}
		}
		return n == 2, fmt.Sprintf("%d of 2 machines Running", n)
	})

	add := func(c *v1alpha1.MachineClass, name string) sim.VM {
		spec, err := sim.VMSpecFor(c, name)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := s.Cluster.Cloud.AddVM(spec)
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	var strays []sim.VM
	for i := range 5 {
		strays = append(strays, add(class, fmt.Sprintf("stray-%d", i)))
	}
	elsewhere := class.DeepCopy()
	var spec sim.ProviderSpec
	if err := json.Unmarshal(class.ProviderSpec.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	spec.Cluster = "another-cluster"
	elsewhere.ProviderSpec = spec.RawExtension()
	foreign := add(elsewhere, "stray-elsewhere")

	alive := func(id string) bool {
		vm, ok := s.Cluster.Cloud.VM(id)
		return ok && vm.State != sim.VMTerminating
	}
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
		left := 0
		for _, vm := range strays {
			if alive(vm.ProviderID) {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d of 5 orphan VMs left", left)
	})
	if !alive(foreign.ProviderID) {
		t.Error("the VM of another cluster was deleted")
	}
	list, err := mc.Machines(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if !alive(m.Spec.ProviderID) {
			t.Errorf("machine %s lost its VM %s", m.Name, m.Spec.ProviderID)
		}
	}
}
