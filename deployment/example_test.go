package deployment_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/deployment"
)

// Example runs the controller on a fake clientset until the deployment has
// its first MachineSet. Against a cluster, pass real clientsets (and the
// target cluster's client and node informer to mark nodes during
// rollouts); the MachineSet controller then creates the machines.
func Example() {
	labels := map[string]string{"pool": "workers"}
	client := fake.NewSimpleClientset(&v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shoot", UID: "u1"},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: 3,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
			},
		},
	})
	mf := externalversions.NewSharedInformerFactory(client, 0)
	ctrl, err := deployment.NewController(client, nil, deployment.Informers{
		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines:    mf.Machine().V1alpha1().Machines(),
	}, deployment.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx, 1) }()
	for ctx.Err() == nil {
		list, _ := client.MachineV1alpha1().MachineSets("shoot").List(ctx, metav1.ListOptions{})
		if len(list.Items) == 1 {
			s := list.Items[0]
			fmt.Println("set of", metav1.GetControllerOf(&s).Name, "with", s.Spec.Replicas, "replicas, revision", s.Annotations[v1alpha1.RevisionAnnotation])
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	mf.Shutdown()
	// Output:
	// set of workers with 3 replicas, revision 1
}

// ExamplePreviewChange tells what a new class does to a deployment of 10
// machines with maxSurge 3, before anything is applied.
func ExamplePreviewChange() {
	labels := map[string]string{"pool": "workers"}
	surge, unavailable := intstr.FromInt32(3), intstr.FromInt32(0)
	current := &v1alpha1.MachineDeployment{Spec: v1alpha1.MachineDeploymentSpec{
		Replicas: 10,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: v1alpha1.MachineTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
		},
		Strategy: v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
			RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
				MaxSurge: &surge, MaxUnavailable: &unavailable}}},
	}}
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "workers-1"},
		Spec: v1alpha1.MachineSetSpec{Replicas: 10, Template: current.Spec.Template}}
	proposed := current.DeepCopy()
	proposed.Spec.Template.Spec.Class.Name = "large"

	p, err := deployment.PreviewChange(current, proposed, []*v1alpha1.MachineSet{set})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d machines in %d waves, because of %v\n", p.Change, p.Machines, p.Waves, p.Fields)
	// Output: Roll: 10 machines in 4 waves, because of [spec.class.name]
}
