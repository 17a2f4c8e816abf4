package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/examples/bespoke/memdriver"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Setup: []func(context.Context, *rest.Config) error{crds.Install}})
}

func TestUsage(t *testing.T) {
	// A kubeconfig that loads; nothing connects to its server.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--no-such-flag"}, exitUsage, "flag provided but not defined"},
		{[]string{"extra"}, exitUsage, `unexpected arguments: ["extra"]`},
		{[]string{"--control-kubeconfig", "/does/not/exist"}, exitFailed, "/does/not/exist"},
		{[]string{"--control-kubeconfig", kubeconfig, "--target-kubeconfig", "/does/not/exist/either"}, exitFailed, "/does/not/exist/either"},
	} {
		var stderr bytes.Buffer
		code := run(t.Context(), tc.args, &stderr, memdriver.New(memdriver.Options{}))
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

// testWriter sends the manager's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestManagerWithoutTargetCluster runs the manager's wiring in-process in
// "none" mode against a real API server: a Machine becomes Available with
// a VM of the in-memory cloud, and deleting it deletes the VM.
func TestManagerWithoutTargetCluster(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cloud := memdriver.New(memdriver.Options{Latency: 10 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--control-kubeconfig", env.Kubeconfig(), "--target-kubeconfig", "none", "--namespace", ns, "-v", "1"}, testWriter{t}, cloud)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("manager exited %d after the context ended, want %d", code, exitOK)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s of its context ending")
		}
	})

	mc := versioned.NewForConfigOrDie(env.Config())
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "memory", Namespace: ns},
		Data:       map[string][]byte{v1alpha1.UserDataKey: []byte("#!/bin/sh\necho hello from <<MACHINE_NAME>>\n")},
	}
	if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: ns},
		Provider:     memdriver.ProviderName,
		ProviderSpec: runtime.RawExtension{Raw: []byte(`{"flavor":"small"}`)},
		SecretRef:    &corev1.SecretReference{Name: "memory", Namespace: ns},
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
		return got.Status.CurrentStatus.Phase == v1alpha1.MachineAvailable,
			fmt.Sprintf("phase %q, lastOperation %+v", got.Status.CurrentStatus.Phase, got.Status.LastOperation)
	})
	got, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vms := cloud.VMs()
	if len(vms) != 1 || vms[0].MachineName != m.Name || vms[0].ProviderID != got.Spec.ProviderID {
		t.Fatalf("VMs %+v, want one for %s with provider ID %q", vms, m.Name, got.Spec.ProviderID)
	}
	if want := "echo hello from worker-1"; !strings.Contains(string(vms[0].UserData), want) {
		t.Errorf("user data %q lacks %q: the placeholder was not replaced", vms[0].UserData, want)
	}
	if !slices.ContainsFunc(got.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == vms[0].Address }) {
		t.Errorf("machine addresses %v lack the VM's %s", got.Status.Addresses, vms[0].Address)
	}
	if !slices.Contains(got.Finalizers, v1alpha1.MachineFinalizer) {
		t.Errorf("machine finalizers %v lack %s", got.Finalizers, v1alpha1.MachineFinalizer)
	}

	if err := mc.MachineV1alpha1().Machines(ns).Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		_, err := mc.MachineV1alpha1().Machines(ns).Get(ctx, m.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("machine still there (%v)", err)
		}
		return len(cloud.VMs()) == 0, fmt.Sprintf("machine gone, VMs left: %+v", cloud.VMs())
	})
}
