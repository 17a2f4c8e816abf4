package budget_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/safety/budget"
)

// ExampleNew shows the budget of a deployment of ten machines, one of
// which is already being replaced, at most 20% at once. A deployment's
// machines are those its MachineSets control: the budget follows the
// controller references Machine -> MachineSet -> MachineDeployment.
func ExampleNew() {
	ctx := context.Background()
	f := externalversions.NewSharedInformerFactory(fake.NewSimpleClientset(), 0).Machine().V1alpha1()
	machines, sets := f.Machines(), f.MachineSets()
	max := intstr.FromString("20%")
	b, err := budget.New(machines, budget.Options{Max: &max, MachineSets: sets})
	if err != nil {
		fmt.Println(err)
		return
	}
	deployment := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot", Name: "worker", UID: "d-uid"}}
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot", Name: "worker-5d8f7", UID: "s-uid",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(deployment, v1alpha1.SchemeGroupVersion.WithKind("MachineDeployment"))}}}
	// Started informers fill their caches themselves.
	_ = sets.Informer().GetIndexer().Add(set)
	var fleet []*v1alpha1.Machine
	for i := range 10 {
		m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
			Namespace: "shoot", Name: fmt.Sprintf("worker-%d", i),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))},
		}}
		m.Status.CurrentStatus.Phase = v1alpha1.MachineUnknown
		if i == 0 {
			m.Status.CurrentStatus.Phase = v1alpha1.MachineFailed
		}
		fleet = append(fleet, m)
		_ = machines.Informer().GetIndexer().Add(m)
	}
	for _, m := range fleet[1:4] {
		ok, reason := b.MayReplace(ctx, m)
		if !ok {
			fmt.Printf("%s: wait, %s\n", m.Name, reason)
			continue
		}
		fmt.Printf("%s: may be replaced\n", m.Name)
		// The machine controller marks it Failed, then says so.
		b.Replaced(ctx, m, true)
	}
	// Output:
	// worker-1: may be replaced
	// worker-2: wait, 2 of at most 2 machines of deployment "worker" are being replaced
	// worker-3: wait, 2 of at most 2 machines of deployment "worker" are being replaced
}
