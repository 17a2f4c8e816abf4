package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
)

// demoLabel marks the objects the demo creates.
const demoLabel = "mcm.mcmkit.io/demo"

// apply creates the namespace, the Secret, the MachineClass and the
// Machines; objects that exist already are left as they are.
func (d *demo) apply(ctx context.Context) error {
	ns := d.cfg.Namespace
	labels := map[string]string{demoLabel: "true"}
	ignoreExists := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := d.core.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-cloud", Namespace: ns, Labels: labels},
		Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte("#cloud-config\n# bootstrap for <<MACHINE_NAME>>\n"),
			sim.CredentialsKey:   []byte("demo-token"),
		},
	}
	if _, err := d.core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating secret: %w", err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "demo", Namespace: ns, Labels: labels},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small", Labels: map[string]string{"pool": "demo"}}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: secret.Name, Namespace: ns},
	}
	if _, err := d.machines.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating machine class: %w", err)
	}
	for i := 1; i <= d.opts.machines; i++ {
		m := &v1alpha1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("demo-%d", i), Namespace: ns, Labels: labels},
			Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: class.Name}},
		}
		if _, err := d.machines.MachineV1alpha1().Machines(ns).Create(ctx, m, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return fmt.Errorf("creating machine %s: %w", m.Name, err)
		}
	}
	d.printf("Applied Secret demo-cloud, MachineClass demo and %d Machines in namespace %s.\n", d.opts.machines, ns)
	return nil
}

// deleteDemoObjects removes the demo's machines (waiting up to a minute
// for the manager to delete their VMs), class and secret from an external
// cluster. It runs once.
func (d *demo) deleteDemoObjects() {
	if d.machines == nil {
		return
	}
	mc, core := d.machines, d.core
	d.machines = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, sel := d.cfg.Namespace, metav1.ListOptions{LabelSelector: demoLabel + "=true"}
	d.printf("Deleting the demo machines...\n")
	_ = mc.MachineV1alpha1().Machines(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	for ctx.Err() == nil {
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, sel)
		if err == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	_ = mc.MachineV1alpha1().MachineClasses(ns).Delete(ctx, "demo", metav1.DeleteOptions{})
	_ = core.CoreV1().Secrets(ns).Delete(ctx, "demo-cloud", metav1.DeleteOptions{})
}
