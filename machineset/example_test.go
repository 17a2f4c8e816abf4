package machineset_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/machineset"
)

// Example runs the controller on a fake clientset until the set has its
// machines. Against a cluster, pass a real clientset.
func Example() {
	labels := map[string]string{"pool": "workers"}
	client := fake.NewSimpleClientset(&v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shoot", UID: "u1"},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: 1,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				// The name is the set's name and a random suffix; the fake
				// clientset leaves it empty, which is enough for one machine.
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "small"}},
			},
		},
	})
	mf := externalversions.NewSharedInformerFactory(client, 0)
	ctrl, err := machineset.NewController(client, machineset.Informers{
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Machines:    mf.Machine().V1alpha1().Machines(),
	}, machineset.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx, 1) }()
	for ctx.Err() == nil {
		list, _ := client.MachineV1alpha1().Machines("shoot").List(ctx, metav1.ListOptions{})
		if len(list.Items) == 1 {
			m := list.Items[0]
			fmt.Println("machine of", metav1.GetControllerOf(&m).Name, "with class", m.Spec.Class.Name)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	mf.Shutdown()
	// Output:
	// machine of workers with class small
}
