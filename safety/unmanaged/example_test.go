package unmanaged_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/safety/unmanaged"
)

// Example runs the controller on fake clientsets: of two nodes that
// registered an hour ago, the one no machine claims (joined by hand) is
// marked not-managed-by-mcm, the one a machine's node label names is not.
// Against clusters, pass real clientsets.
func Example() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	registered := metav1.NewTime(now.Add(-time.Hour))
	target := k8sfake.NewSimpleClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", CreationTimestamp: registered}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "joined-by-hand", CreationTimestamp: registered}},
	)
	control := fake.NewSimpleClientset(&v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: "worker-1", Namespace: "shoot", Labels: map[string]string{v1alpha1.NodeLabelKey: "worker-1"},
	}})
	mf := externalversions.NewSharedInformerFactory(control, 0)
	tf := informers.NewSharedInformerFactory(target, 0)
	ctrl, err := unmanaged.New(target, unmanaged.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Nodes:    tf.Core().V1().Nodes(),
	}, unmanaged.Options{
		// A machine's node label comes only after its node joined: a
		// younger node may still be on its way to one.
		CreationTimeout: 20 * time.Minute,
		// Fixed, so that the nodes' age does not depend on when the
		// example runs.
		Clock: clocktesting.NewFakeClock(now),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mf.Start(ctx.Done())
	tf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx, 1) }()
	for ctx.Err() == nil {
		n, _ := target.CoreV1().Nodes().Get(ctx, "joined-by-hand", metav1.GetOptions{})
		if v, ok := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]; ok {
			fmt.Printf("%s: %s=%s\n", n.Name, v1alpha1.NotManagedByMCMAnnotation, v)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A claimed node is never marked, so its check, whenever it runs,
	// leaves it as it is.
	n, _ := target.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	_, marked := n.Annotations[v1alpha1.NotManagedByMCMAnnotation]
	fmt.Printf("%s: marked %v\n", n.Name, marked)
	cancel()
	mf.Shutdown()
	tf.Shutdown()
	// Output:
	// joined-by-hand: node.machine.sapcloud.io/not-managed-by-mcm=1
	// worker-1: marked false
}
