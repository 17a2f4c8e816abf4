package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver/sim"
)

// The demo's objects. The deployment's template labels carry demoLabel, so
// its MachineSets and Machines carry it too and the demo's caches select
// them.
const (
	demoLabel      = "mcm.mcmkit.io/demo"
	secretName     = "demo-cloud"
	classV1        = "demo"
	classV2        = "demo-v2" // what the rollout moves the deployment to
	deploymentName = "demo"
	// The rollout strategy: one machine above the replicas at a time and
	// none below, so that available machines never drop below the replicas.
	maxSurge, maxUnavailable = 1, 0
)

// apply creates the namespace, the Secret, the first MachineClass and the
// MachineDeployment; objects that exist already are left as they are.
func (d *demo) apply(ctx context.Context) error {
	ns := d.cfg.Namespace
	labels := map[string]string{demoLabel: "true"}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := d.core.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns, Labels: labels},
		Data: map[string][]byte{
			v1alpha1.UserDataKey: []byte("#cloud-config\n# bootstrap for <<MACHINE_NAME>>\n"),
			sim.CredentialsKey:   []byte("demo-token"),
		},
	}
	if _, err := d.core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating secret: %w", err)
	}
	if err := d.createClass(ctx, classV1, "small"); err != nil {
		return err
	}
	replicas := int32(d.opts.machines)
	md := &v1alpha1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: deploymentName, Namespace: ns, Labels: labels},
		Spec: v1alpha1.MachineDeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1alpha1.MachineTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: classV1}},
			},
			Strategy: v1alpha1.MachineDeploymentStrategy{
				Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{
					MaxSurge:       ptr(intstr.FromInt32(maxSurge)),
					MaxUnavailable: ptr(intstr.FromInt32(maxUnavailable)),
				}},
			},
		},
	}
	if _, err := d.machines.MachineV1alpha1().MachineDeployments(ns).Create(ctx, md, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating machine deployment: %w", err)
	}
	d.printf("Applied Secret %s, MachineClass %s and MachineDeployment %s (replicas %d, RollingUpdate maxSurge %d, maxUnavailable %d) in namespace %s.\n",
		secretName, classV1, deploymentName, replicas, maxSurge, maxUnavailable, ns)
	return nil
}

// createClass creates a sim MachineClass of the given instance type, or
// leaves an existing one as it is.
func (d *demo) createClass(ctx context.Context, name, instanceType string) error {
	ns := d.cfg.Namespace
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{demoLabel: "true"}},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: instanceType, Labels: map[string]string{"pool": "demo"}}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: secretName, Namespace: ns},
	}
	if _, err := d.machines.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating machine class %s: %w", name, err)
	}
	return nil
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func ptr[T any](v T) *T { return &v }

// cleanupWait bounds each wait of the clean-up for the manager to finish
// deleting what the demo deleted.
const cleanupWait = time.Minute

// deleteDemoObjects removes the demo's objects from an external cluster,
// each step once the manager has finished the one before: the deployment
// (the controllers delete its sets, machines and VMs), then the classes and
// the secret, which keep their finalizers while machines, respectively
// classes, use them. It runs once.
func (d *demo) deleteDemoObjects() {
	if d.machines == nil {
		return
	}
	mc, core := d.machines, d.core
	d.machines = nil
	ctx, cancel := context.WithTimeout(context.Background(), 2*cleanupWait+10*time.Second)
	defer cancel()
	ns := d.cfg.Namespace
	d.printf("Deleting the demo deployment, its machine sets and machines...\n")
	_ = mc.MachineV1alpha1().MachineDeployments(ns).Delete(ctx, deploymentName, metav1.DeleteOptions{})
	machinesGone := d.waitGone(ctx, "the demo deployment and its machines", func(ctx context.Context) bool {
		_, err := mc.MachineV1alpha1().MachineDeployments(ns).Get(ctx, deploymentName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		list, err := mc.MachineV1alpha1().Machines(ns).List(ctx, metav1.ListOptions{LabelSelector: demoLabel + "=true"})
		return err == nil && len(list.Items) == 0
	})
	d.printf("Deleting the machine classes and the secret...\n")
	for _, class := range []string{classV1, classV2} {
		_ = mc.MachineV1alpha1().MachineClasses(ns).Delete(ctx, class, metav1.DeleteOptions{})
	}
	_ = core.CoreV1().Secrets(ns).Delete(ctx, secretName, metav1.DeleteOptions{})
	if !machinesGone {
		return // machines left hold the classes, and the classes the secret
	}
	d.waitGone(ctx, "the machine classes and the secret", func(ctx context.Context) bool {
		for _, class := range []string{classV1, classV2} {
			if _, err := mc.MachineV1alpha1().MachineClasses(ns).Get(ctx, class, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		_, err := core.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// waitGone polls gone for up to cleanupWait and tells whether it came
// true; it says so if not.
func (d *demo) waitGone(ctx context.Context, what string, gone func(context.Context) bool) bool {
	ctx, cancel := context.WithTimeout(ctx, cleanupWait)
	defer cancel()
	for !gone(ctx) {
		select {
		case <-ctx.Done():
			d.printf("Still there after %[2]v: %[1]s; see %[3]s --kubeconfig %[4]s get mcd,mcs,mc,mcc,secrets -n %[5]s\n",
				what, cleanupWait, d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace)
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
	return true
}
