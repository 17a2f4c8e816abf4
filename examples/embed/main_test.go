package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// No setup: the program installs the CRDs itself.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{}) }

func TestRunFailsOnBadKubeconfig(t *testing.T) {
	if err := run(t.Context(), "/does/not/exist", "default"); err == nil {
		t.Error("run with a missing kubeconfig succeeded")
	}
}

// TestEmbed runs the program against a real API server: it installs the
// CRDs, a sim Machine becomes Available, one of a missing class gets an event,
// and the program returns nil once its context ends.
func TestEmbed(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, env.Kubeconfig(), ns) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after the context ended: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of its context ending")
		}
	})

	mc := versioned.NewForConfigOrDie(env.Config())
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := mc.MachineV1alpha1().MachineClasses(ns).List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprintf("CRDs not served yet: %v", err)
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: ns},
		Data:       map[string][]byte{v1alpha1.UserDataKey: []byte("#cloud-config"), sim.CredentialsKey: []byte("token")},
	}
	if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "cloud", Namespace: ns},
	}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: ns},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}},
	}
	if _, err := mc.MachineV1alpha1().Machines(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineAvailable && got.Spec.ProviderID == "sim:///zone-a/worker-1",
			fmt.Sprintf("phase %q, providerID %q, lastOperation %+v", got.Status.CurrentStatus.Phase, got.Spec.ProviderID, got.Status.LastOperation)
	})
	// The event recorder resolved the Machine's kind through the program's
	// own scheme: a machine of a class that does not exist is told by an
	// event (a machine that comes up is not).
	bad := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-2", Namespace: ns},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "missing"}},
	}
	if _, err := mc.MachineV1alpha1().Machines(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		events, err := env.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == bad.Name && e.Reason == machine.ReasonClassNotFound {
				return true, ""
			}
			seen = append(seen, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason)
		}
		return false, fmt.Sprintf("no %s event for Machine %s; events: %v", machine.ReasonClassNotFound, bad.Name, seen)
	})
}
