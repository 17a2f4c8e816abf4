package overshoot_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/safety/overshoot"
)

// Example runs the check on a fake clientset with a set of one replica
// that has five machines, as if machines had been created by hand into its
// selector. Without a deployment its limit is twice its replicas plus
// SafetyUp (2 by default): 4, which five machines reach, so the set is
// frozen. Against a cluster, pass a real clientset.
func Example() {
	labels := map[string]string{"pool": "workers"}
	set := &v1alpha1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "shoot", UID: "u1"},
		Spec: v1alpha1.MachineSetSpec{
			Replicas: 1,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}},
		},
	}
	objs := []runtime.Object{set}
	for i := range 5 {
		objs = append(objs, &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("workers-%d", i), Namespace: "shoot", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))},
		}})
	}
	client := fake.NewSimpleClientset(objs...)
	mf := externalversions.NewSharedInformerFactory(client, 0)
	ctrl, err := overshoot.New(client, overshoot.Informers{
		MachineSets: mf.Machine().V1alpha1().MachineSets(),
		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
		Machines:    mf.Machine().V1alpha1().Machines(),
	}, overshoot.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx, 1) }()
	// The label is written first, the condition right after it: wait for
	// both.
	frozen := func(s *v1alpha1.MachineSet) *v1alpha1.MachineSetCondition {
		if s.Labels[v1alpha1.FreezeLabelKey] != v1alpha1.FreezeLabelValue {
			return nil
		}
		for i, c := range s.Status.Conditions {
			if c.Type == v1alpha1.MachineSetFrozen {
				return &s.Status.Conditions[i]
			}
		}
		return nil
	}
	for ctx.Err() == nil {
		s, _ := client.MachineV1alpha1().MachineSets("shoot").Get(ctx, "workers", metav1.GetOptions{})
		if c := frozen(s); c != nil {
			fmt.Printf("label %s=%s\n", v1alpha1.FreezeLabelKey, s.Labels[v1alpha1.FreezeLabelKey])
			fmt.Printf("condition %s=%s, %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	mf.Shutdown()
	// Output:
	// label freeze=True
	// condition Frozen=True, OverShootingReplicaCount: 5 machines, at or above the safety limit of 4
}
