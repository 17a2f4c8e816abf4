package machine_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned/fake"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/machine"
)

// Example runs the controller without a target cluster (MCM's "none"):
// the machine becomes Available with the driver's addresses.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cloud, _ := sim.New(sim.Options{})
	class := &v1alpha1.MachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "shoot"}, Provider: sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: "shoot"},
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "shoot"},
		Data: map[string][]byte{"userData": []byte("#cloud-config"), sim.CredentialsKey: []byte("token")}}
	m := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "shoot"},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}}}

	machines := fake.NewSimpleClientset(class, m)
	core := k8sfake.NewSimpleClientset(secret)
	mf := externalversions.NewSharedInformerFactoryWithOptions(machines, 0, externalversions.WithNamespace("shoot"))
	cf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace("shoot"))
	ctrl, err := machine.NewController(machines, core, nil, machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
	}, cloud.Driver(), machine.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	go func() { _ = ctrl.Run(ctx, 2) }()

	for ctx.Err() == nil {
		got, _ := machines.MachineV1alpha1().Machines("shoot").Get(ctx, "worker-1", metav1.GetOptions{})
		if got.Status.CurrentStatus.Phase == v1alpha1.MachineAvailable {
			fmt.Println(got.Status.CurrentStatus.Phase, got.Spec.ProviderID, got.Status.LastOperation.Description)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: Available sim:///zone-a/worker-1 Created machine on cloud provider
}
