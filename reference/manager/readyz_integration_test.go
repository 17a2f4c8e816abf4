package manager

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// TestReadyzNamesStuckDriverCalls runs the manager with a cloud whose
// CreateMachine hangs, deaf to its context: once the call outlives
// --driver-timeouts, /readyz fails naming the machine and the operation,
// and it is ready again when the cloud answers.
func TestReadyzNamesStuckDriverCalls(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := crds.Install(ctx, env.Config()); err != nil {
		t.Fatal(err)
	}
	cloud, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.InjectFault(sim.Fault{Operation: driver.OperationCreateMachine, Hang: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.ClearFaults) // runs first: the hung call returns before the test ends
	drivers := BuiltinDrivers()
	drivers["hung"] = func(context.Context, DriverEnv) (driver.Driver, Runnable, error) { return cloud.Driver(), nil, nil }

	cfg := DefaultConfig()
	cfg.ControlKubeconfig, cfg.TargetKubeconfig, cfg.Driver, cfg.Port = env.Kubeconfig(), NoTarget, "hung", 0
	cfg.Namespace, cfg.LeaderElect, cfg.Controllers = ns, false, []string{"machine"}
	if err := cfg.DriverTimeouts.Set("CreateMachine=2s"); err != nil {
		t.Fatal(err)
	}
	opts := testLogger(t)
	opts.Drivers = drivers
	m, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, m)
	waitReady(t, m, time.Minute, true, "caches synced")

	mc := versioned.NewForConfigOrDie(env.Config())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns},
		Data: map[string][]byte{sim.CredentialsKey: []byte("token"), v1alpha1.UserDataKey: []byte("#!/bin/sh")}}
	if _, err := env.Client().CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "sim", Namespace: ns}, Provider: sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "m1"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "sim", Namespace: ns}}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: ns},
		Spec: v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "sim"}}}
	if _, err := mc.MachineV1alpha1().Machines(ns).Create(ctx, machine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	named := "CreateMachine of machine " + ns + "/m1 running since "
	waitReady(t, m, time.Minute, false, named)
	rec := httpGet(t, m.handler(), "/readyz")
	if rec.code != http.StatusServiceUnavailable || !strings.Contains(rec.body, named) || !strings.Contains(rec.body, "(deadline 2s)") {
		t.Errorf("/readyz = %d %q, want 503 naming the stuck CreateMachine and its deadline", rec.code, rec.body)
	}
	if rec := httpGet(t, m.handler(), "/healthz"); rec.code != http.StatusOK {
		t.Errorf("/healthz = %d %q: a restart would not help a hung cloud", rec.code, rec.body)
	}

	cloud.ClearFaults()
	waitReady(t, m, time.Minute, true, "caches synced")
	if got := cloud.Calls(driver.OperationCreateMachine); got != 1 {
		t.Errorf("%d CreateMachine calls, want the one that hung", got)
	}
}
