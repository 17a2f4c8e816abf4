package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

const (
	policyName         = "mcm-bootstrap-tokens-only"
	bootstrapTokenType = corev1.SecretType("bootstrap.kubernetes.io/token")
)

// bootstrapToken is a bootstrap token Secret as kubeadm issues one; as
// the manager issues one once marked with the machine's annotation.
func bootstrapToken(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}, Type: bootstrapTokenType,
		StringData: map[string]string{"token-id": strings.TrimPrefix(name, "bootstrap-token-"), "token-secret": "0123456789abcdef",
			"usage-bootstrap-authentication": "true", "expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
}

func machineToken(name string) *corev1.Secret {
	s := bootstrapToken(name)
	s.Annotations = map[string]string{"mcmkit.io/machine": "shoot/pool-a-1"}
	return s
}

func opaqueSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
		StringData: map[string]string{"password": "hunter2"}}
}

// deniedByPolicy reports whether err is the policy's refusal.
func deniedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "policy "+policyName)
}

// TestBootstrapTokenPolicy applies the optional
// deploy/bootstrap-token-policy.yaml next to rbac-target.yaml and checks
// it as the manager's identity on the real API server: without it, RBAC
// lets that identity create and delete any Secret in kube-system; with it,
// the identity still creates, patches and deletes machines' bootstrap
// tokens (its own and MCM's) but is refused creating, patching or deleting
// an Opaque Secret there, a Secret of the token type not named as one, or
// a token of kubeadm's; reads are not restricted; other users are not
// affected. Then the binary, run as that identity
// under the policy, issues a machine's bootstrap token and deletes it once
// the machine joined, without a denial.
func TestBootstrapTokenPolicy(t *testing.T) {
	t.Parallel()
	// They share the namespace mcm-system and cluster roles. Unlocked by
	// the first cleanup registered, which runs last, after the test's own
	// cleanups removed what it applied.
	deployManifests.Lock()
	t.Cleanup(deployManifests.Unlock)
	env := testenv.Get(t)
	ctx := context.Background()
	const ns, account = "mcm-system", "machine-controller-manager"
	applyDeploy(t, env, "namespace.yaml", "rbac-control.yaml", "rbac-target.yaml", "rbac-sim.yaml")
	kubeconfig := impersonating(t, env, ns, account)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	manager := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(metav1.NamespaceSystem)
	admin := env.Client().CoreV1().Secrets(metav1.NamespaceSystem)
	suffix, kubeadmID, mcmID := randomSuffix(t), randomSuffix(t), randomSuffix(t)
	t.Cleanup(func() {
		for _, name := range []string{"mcm-probe-" + suffix, "mcm-victim-" + suffix, "bootstrap-token-" + suffix, "typed-" + suffix,
			"bootstrap-token-" + kubeadmID, "bootstrap-token-" + mcmID} {
			if err := admin.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting kube-system/%s: %v", name, err)
			}
		}
	})

	// Without the policy: RBAC alone lets the manager's identity write
	// any Secret in kube-system.
	probe := "mcm-probe-" + suffix
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := manager.Create(ctx, opaqueSecret(probe), metav1.CreateOptions{})
		return err == nil, fmt.Sprintf("creating an Opaque Secret in kube-system as the manager, without the policy: %v", err)
	})
	if err := manager.Delete(ctx, probe, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting an Opaque Secret in kube-system as the manager, without the policy: %v", err)
	}

	applyDeploy(t, env, "bootstrap-token-policy.yaml")
	// The API server enforces a policy once it has compiled it.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := manager.Create(ctx, opaqueSecret(probe), metav1.CreateOptions{})
		if err == nil {
			_ = admin.Delete(ctx, probe, metav1.DeleteOptions{})
		}
		return deniedByPolicy(err), fmt.Sprintf("creating an Opaque Secret in kube-system as the manager, with the policy: %v", err)
	})

	t.Run("the API", func(t *testing.T) {
		// Bootstrap tokens: created, read, patched, deleted.
		token := "bootstrap-token-" + suffix
		if _, err := manager.Create(ctx, machineToken(token), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating a bootstrap token: %v", err)
		}
		if _, err := manager.Get(ctx, token, metav1.GetOptions{}); err != nil {
			t.Errorf("reading a bootstrap token: %v", err)
		}
		if _, err := manager.Patch(ctx, token, types.MergePatchType, []byte(`{"stringData":{"expiration":"2099-01-01T00:00:00Z"}}`), metav1.PatchOptions{}); err != nil {
			t.Errorf("renewing a bootstrap token: %v", err)
		}
		if err := manager.Delete(ctx, token, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting a bootstrap token: %v", err)
		}

		// Anything else: refused.
		if _, err := manager.Create(ctx, opaqueSecret(probe), metav1.CreateOptions{}); !deniedByPolicy(err) {
			t.Errorf("creating an Opaque Secret: %v, want the policy's refusal", err)
		}
		typed := machineToken("typed-" + suffix)
		if _, err := manager.Create(ctx, typed, metav1.CreateOptions{}); !deniedByPolicy(err) {
			t.Errorf("creating a token Secret not named bootstrap-token-<id>: %v, want the policy's refusal", err)
		}
		// A token of kubeadm's (no machine's mark): neither renewed nor
		// deleted. One MCM issued for a machine (its description says so):
		// deleted, as the manager does when it takes a machine over.
		kubeadm := "bootstrap-token-" + kubeadmID
		kubeadms := bootstrapToken(kubeadm)
		kubeadms.StringData["description"] = "The default bootstrap token generated by 'kubeadm init'."
		if _, err := admin.Create(ctx, kubeadms, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating kubeadm's token as an admin: %v", err)
		}
		if _, err := manager.Patch(ctx, kubeadm, types.MergePatchType, []byte(`{"stringData":{"expiration":"2099-01-01T00:00:00Z"}}`), metav1.PatchOptions{}); !deniedByPolicy(err) {
			t.Errorf("renewing kubeadm's token: %v, want the policy's refusal", err)
		}
		if err := manager.Delete(ctx, kubeadm, metav1.DeleteOptions{}); !deniedByPolicy(err) {
			t.Errorf("deleting kubeadm's token: %v, want the policy's refusal", err)
		}
		mcms := bootstrapToken("bootstrap-token-" + mcmID)
		mcms.StringData["description"] = `A bootstrap token for machine "pool-a-2" generated by MachineControllerManager.`
		if _, err := admin.Create(ctx, mcms, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating MCM's token as an admin: %v", err)
		}
		if err := manager.Delete(ctx, mcms.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting MCM's token of a machine: %v", err)
		}
		// Another user, an admin, is not affected.
		victim := "mcm-victim-" + suffix
		if _, err := admin.Create(ctx, opaqueSecret(victim), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating an Opaque Secret as an admin: %v", err)
		}
		if _, err := manager.Patch(ctx, victim, types.MergePatchType, []byte(`{"stringData":{"password":"x"}}`), metav1.PatchOptions{}); !deniedByPolicy(err) {
			t.Errorf("patching an Opaque Secret: %v, want the policy's refusal", err)
		}
		if err := manager.Delete(ctx, victim, metav1.DeleteOptions{}); !deniedByPolicy(err) {
			t.Errorf("deleting an Opaque Secret: %v, want the policy's refusal", err)
		}
		// Reads never reach admission: the manager's identity still reads
		// every Secret in kube-system (reference/README.md says what that
		// means). Should this ever fail, the README is wrong.
		if s, err := manager.Get(ctx, victim, metav1.GetOptions{}); err != nil || string(s.Data["password"]) != "hunter2" {
			t.Errorf("reading an Opaque Secret: %v, want it read (admission cannot restrict reads)", err)
		}
		if err := admin.Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting an Opaque Secret as an admin: %v", err)
		}
	})

	t.Run("the manager", func(t *testing.T) {
		mc := versioned.NewForConfigOrDie(env.Config())
		// Registered before start, so it runs after the binary has ended.
		t.Cleanup(func() { forceDeleteMachineObjects(t, env, mc, ns) })
		createMachineObjects(t, env, mc, ns)
		// The class's user data asks for a bootstrap token.
		userData := []byte("#!/bin/sh\nkubeadm join --token " + v1alpha1.BootstrapTokenPlaceholder + "\n")
		if _, err := env.Client().CoreV1().Secrets(ns).Patch(ctx, "cloud", types.MergePatchType,
			fmt.Appendf(nil, `{"stringData":{%q:%q}}`, v1alpha1.UserDataKey, userData), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		name := "policy-" + suffix
		// The tokens of this machine, as they come and go.
		w, err := admin.Watch(ctx, metav1.ListOptions{FieldSelector: "type=" + string(bootstrapTokenType)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var mu sync.Mutex
		var seen []string
		go func() {
			for ev := range w.ResultChan() {
				if s, ok := ev.Object.(*corev1.Secret); ok && s.Annotations["mcmkit.io/machine"] == ns+"/"+name {
					mu.Lock()
					seen = append(seen, string(ev.Type)+" "+s.Name)
					mu.Unlock()
				}
			}
		}()

		in := start(t, binary(t), "policy", "--control-kubeconfig", kubeconfig, "--target-kubeconfig", kubeconfig,
			"--namespace", ns, "--driver", "sim", "--concurrent-syncs", "5", "-v", "1")
		stop := sync.OnceFunc(func() { terminate(t, in) })
		t.Cleanup(stop)
		createMachine(t, mc, ns, name)
		waitPhase(t, mc, ns, name, v1alpha1.MachineRunning, 2*time.Minute)
		// Once joined, the machine's token is deleted: created and deleted
		// under the policy.
		testenv.Eventually(t, 30*time.Second, func(context.Context) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			added, deleted := 0, 0
			for _, e := range seen {
				added += boolInt(strings.HasPrefix(e, string(watch.Added)+" "))
				deleted += boolInt(strings.HasPrefix(e, string(watch.Deleted)+" "))
			}
			return added == 1 && deleted == 1, fmt.Sprintf("token events of machine %s: %v, want one added and deleted", name, seen)
		})
		deleteMachineObjects(t, env, mc, ns, name)
		stop()
		if denied := forbiddenLines(in); len(denied) > 0 {
			t.Errorf("the manager was denied under the policy:\n%s", strings.Join(denied, "\n"))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
