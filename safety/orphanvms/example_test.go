package orphanvms_test

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
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/safety/orphanvms"
)

// Example runs the collection against the simulated cloud, which holds
// two VMs of a class: a machine's, and one whose machine is long gone.
// Once the orphan has looked orphaned for the grace period, it is deleted;
// the machine's VM stays. Against a cluster, pass real clientsets and the
// provider's driver.
func Example() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	cloud, err := sim.New(sim.Options{Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "shoot"},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: "shoot"},
	}
	// The driver lists a class's VMs with the class's credentials.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "shoot"},
		Data:       map[string][]byte{v1alpha1.UserDataKey: []byte("#cloud-config"), sim.CredentialsKey: []byte("token")},
	}
	var vms []sim.VM
	for _, name := range []string{"worker-1", "forgotten-1"} {
		// VMSpecFor tags the VM with the class, so that the class's
		// listing, the only one the collection makes, finds it.
		spec, err := sim.VMSpecFor(class, name)
		if err != nil {
			fmt.Println(err)
			return
		}
		vm, err := cloud.AddVM(spec)
		if err != nil {
			fmt.Println(err)
			return
		}
		vms = append(vms, vm)
	}
	worker, orphan := vms[0], vms[1]
	client := fake.NewSimpleClientset(class, &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "shoot"},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Name: "small"}, ProviderID: worker.ProviderID},
	})
	core := k8sfake.NewSimpleClientset(secret)
	mf := externalversions.NewSharedInformerFactory(client, 0)
	cf := informers.NewSharedInformerFactory(core, 0)
	c, err := orphanvms.New(client, cloud.Driver(), orphanvms.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
	}, orphanvms.Options{
		// A VM must look orphaned across passes for the grace period: a
		// cache that is briefly behind cannot get a healthy VM deleted.
		OrphanVMsPeriod:   time.Minute,
		OrphanGracePeriod: 3 * time.Minute,
		// The fake clock runs the passes as fast as the loop below steps
		// it, instead of minutes apart.
		Clock: clk,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	go func() { _ = c.Run(ctx) }()
	for ctx.Err() == nil {
		if _, ok := cloud.VM(orphan.ProviderID); !ok {
			fmt.Println("deleted:", orphan.ProviderID)
			break
		}
		clk.Step(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	for _, vm := range cloud.VMs() {
		fmt.Println("left:", vm.ProviderID, vm.State)
	}
	cancel()
	mf.Shutdown()
	cf.Shutdown()
	// Output:
	// deleted: sim:///zone-a/forgotten-1
	// left: sim:///zone-a/worker-1 Running
}
