package machine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/internal/testsupport/simcluster"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
	"github.com/mcmkit/mcm/machine"
)

// bootstrapUserData asks for the token in both forms: plain (a kubeadm
// join in a script) and URL-encoded (as Ignition's data URLs carry it).
const bootstrapUserData = "#!/bin/sh\nkubeadm join --token <<BOOTSTRAP_TOKEN>> --node-name <<MACHINE_NAME>>\n" +
	"# ignition: data:,token%3D%3C%3CBOOTSTRAP_TOKEN%3E%3E\n"

var joinToken = regexp.MustCompile(`--token ([a-z0-9]{6})\.([a-z0-9]{16}) `)

// TestIntegrationBootstrapToken runs the machine controller against a real
// API server with the target-cluster rights of reference/deploy (nothing
// more): a machine whose user data asks for a bootstrap token gets one in
// kube-system, the driver receives it in the user data, and the token is
// deleted once the machine is Running; a machine deleted before it joined
// leaves no token either.
func TestIntegrationBootstrapToken(t *testing.T) {
	t.Parallel()
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	mc := versioned.NewForConfigOrDie(env.Config())
	admin := env.Client()
	// Boots slow enough to look at the token before the node joins.
	cloud, err := sim.New(sim.Options{BootDelay: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	simcluster.RunKubelet(t, cloud, admin, sim.KubeletOptions{})
	target := referenceTargetClient(t, env, ns)
	const group = "system:bootstrappers:mcm-test"
	denials := startWithTarget(t, mc, admin, target, ns, cloud, machine.Options{
		HealthCheckPeriod:             time.Second,
		BootstrapTokenAuthExtraGroups: []string{group},
	})
	createBootstrapClass(t, mc, admin, ns)
	prefix := ns[len(ns)-6:]

	// Creation: the token is there before the VM, and the VM has it.
	name := "b" + prefix + "-00"
	createMachine(t, mc, newMachine(ns, name, "sim", nil))
	id, secret := vmToken(t, mc, cloud, ns, name)
	if want := hex.EncodeToString([]byte(name)[len(name)-5:])[:6]; id != want {
		t.Errorf("token ID %q, want MCM's %q for machine %s", id, want, name)
	}
	token, err := admin.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the token Secret of machine %s: %v", name, err)
	}
	m, err := getMachine(ctx, mc, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	started, err := time.Parse(time.RFC3339Nano, m.Annotations[machine.CreationStartedAnnotation])
	if err != nil {
		t.Fatal(err)
	}
	expiry, err := time.Parse(time.RFC3339, string(token.Data["expiration"]))
	if err != nil {
		t.Fatalf("expiration: %v", err)
	}
	// Issued after the creation started, for the 20m creation timeout.
	if lo, hi := started.Add(20*time.Minute).Truncate(time.Second), time.Now().Add(20*time.Minute); expiry.Before(lo) || expiry.After(hi) {
		t.Errorf("expiration %v, want between %v and %v", expiry, lo, hi)
	}
	got := map[string]string{"type": string(token.Type), "machine": token.Annotations["mcmkit.io/machine"]}
	for _, k := range []string{"token-id", "token-secret", "usage-bootstrap-authentication", "usage-bootstrap-signing", "auth-extra-groups"} {
		got[k] = string(token.Data[k])
	}
	want := map[string]string{"type": "bootstrap.kubernetes.io/token", "machine": ns + "/" + name,
		"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		"auth-extra-groups": group}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("token Secret %s: %s = %q, want %q", token.Name, k, got[k], v)
		}
	}

	// The machine joins: the token goes.
	testenv.Eventually(t, 2*time.Minute, phaseIs(mc, ns, name, v1alpha1.MachineRunning))
	testenv.Eventually(t, 30*time.Second, secretGone(admin, "bootstrap-token-"+id))

	// A machine deleted before it joined: its VM never boots (stopped),
	// and the deletion removes its token too.
	early := "b" + prefix + "-01"
	createMachine(t, mc, newMachine(ns, early, "sim", nil))
	earlyID, _ := vmToken(t, mc, cloud, ns, early)
	if vm, ok := vmOf(cloud, early); !ok {
		t.Fatalf("no VM for %s", early)
	} else if err := cloud.StopVM(vm.ProviderID); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+earlyID, metav1.GetOptions{}); err != nil {
		t.Fatalf("the token Secret of machine %s: %v", early, err)
	}
	if err := mc.MachineV1alpha1().Machines(ns).Delete(ctx, early, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(mc, ns, early))
	testenv.Eventually(t, 10*time.Second, secretGone(admin, "bootstrap-token-"+earlyID))

	// The machine that joined is deleted: nothing is left behind.
	if err := mc.MachineV1alpha1().Machines(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, machineGone(mc, ns, name))
	if leaked := cloud.LeakedVMs(nil); len(leaked) > 0 {
		t.Errorf("leaked VMs: %v", leaked)
	}
	// The rights of reference/deploy sufficed for all of it.
	if d := denials(); len(d) > 0 {
		t.Errorf("requests denied with the rights of reference/deploy/rbac-target.yaml:\n%s", strings.Join(d, "\n"))
	}
}

// vmToken waits for the VM of machine name and returns the bootstrap token
// in its user data, after checking that every placeholder was replaced.
func vmToken(t *testing.T, mc versioned.Interface, cloud *sim.Cloud, ns, name string) (id, secret string) {
	t.Helper()
	var vm sim.VM
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		var ok bool
		vm, ok = vmOf(cloud, name)
		if ok {
			return true, ""
		}
		m, err := getMachine(ctx, mc, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("no VM for machine %s yet: phase %q, lastOperation %+v", name, m.Status.CurrentStatus.Phase, m.Status.LastOperation)
	})
	ud := string(vm.UserData)
	match := joinToken.FindStringSubmatch(ud)
	if match == nil {
		t.Fatalf("user data of machine %s has no token: %q", name, ud)
	}
	id, secret = match[1], match[2]
	if wantEncoded := "data:,token%3D" + id + "." + secret + "\n"; !strings.Contains(ud, wantEncoded) ||
		strings.Contains(ud, "BOOTSTRAP_TOKEN") || !strings.Contains(ud, "--node-name "+name+"\n") {
		t.Errorf("user data of machine %s: %q", name, ud)
	}
	return id, secret
}

func vmOf(cloud *sim.Cloud, machineName string) (sim.VM, bool) {
	for _, vm := range cloud.VMs() {
		if vm.MachineName == machineName {
			return vm, true
		}
	}
	return sim.VM{}, false
}

func secretGone(client kubernetes.Interface, name string) func(context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().Secrets("kube-system").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("Secret kube-system/%s still there (%v)", name, err)
	}
}

// createBootstrapClass creates the sim class "sim" whose secret's user
// data asks for a bootstrap token.
func createBootstrapClass(t *testing.T, mc versioned.Interface, core kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sim-secret", Namespace: ns}, Data: map[string][]byte{
		sim.CredentialsKey: []byte("token"), v1alpha1.UserDataKey: []byte(bootstrapUserData)}}
	if _, err := core.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.MachineClass{
		ObjectMeta:   metav1.ObjectMeta{Name: "sim", Namespace: ns},
		Provider:     sim.ProviderName,
		ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "m1"}.RawExtension(),
		SecretRef:    &corev1.SecretReference{Name: "sim-secret", Namespace: ns},
	}
	if _, err := mc.MachineV1alpha1().MachineClasses(ns).Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// referenceTargetClient returns a client of env that has exactly the
// rights reference/deploy/rbac-target.yaml grants: its roles are created
// under names of their own for this test and bound to a user of its own,
// whom the client impersonates. Everything is removed when the test ends.
func referenceTargetClient(t *testing.T, env *testenv.Env, ns string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	admin := env.Client()
	user := "mcm-bootstrap-test-" + ns
	rename := func(name string) string { return name + "-" + ns }
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var cleanups []func(context.Context) error
	t.Cleanup(func() {
		for _, c := range cleanups {
			if err := c(context.Background()); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("removing RBAC: %v", err)
			}
		}
	})
	for _, obj := range decodeManifest(t, "../reference/deploy/rbac-target.yaml") {
		var err error
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			o.Name = rename(o.Name)
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func(ctx context.Context) error {
				return admin.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.ClusterRoleBinding:
			o.Name, o.RoleRef.Name, o.Subjects = rename(o.Name), rename(o.RoleRef.Name), subjects
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func(ctx context.Context) error {
				return admin.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			o.Name = rename(o.Name)
			_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func(ctx context.Context) error {
				return admin.RbacV1().Roles(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.RoleBinding:
			o.Name, o.RoleRef.Name, o.Subjects = rename(o.Name), rename(o.RoleRef.Name), subjects
			_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			cleanups = append(cleanups, func(ctx context.Context) error {
				return admin.RbacV1().RoleBindings(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("rbac-target.yaml: unexpected %T", obj)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg := env.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client := kubernetes.NewForConfigOrDie(cfg)
	// RBAC takes effect once the API server's authorizer cache has it.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		_, err := client.CoreV1().Secrets("kube-system").Get(ctx, "no-such-secret", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("reading a Secret in kube-system as %s: %v", user, err)
	})
	return client
}

// decodeManifest decodes the objects of a multi-document YAML file.
func decodeManifest(t *testing.T, path string) []any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, obj)
	}
}

// startWithTarget runs a controller whose target-cluster client (nodes,
// drain, bootstrap tokens) is target, and whose control clients are mc and
// core, until the test ends. denials returns the lines it logged about a
// request the API server refused as forbidden.
func startWithTarget(t *testing.T, mc versioned.Interface, core, target kubernetes.Interface, ns string, cloud *sim.Cloud, opts machine.Options) (denials func() []string) {
	t.Helper()
	var (
		mu     sync.Mutex
		denied []string
	)
	opts.Logger = funcr.New(func(prefix, args string) {
		t.Log(prefix, args)
		if strings.Contains(args, "forbidden") {
			mu.Lock()
			denied = append(denied, args)
			mu.Unlock()
		}
	}, funcr.Options{Verbosity: 1})
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	kf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(ns))
	tf := informers.NewSharedInformerFactory(target, 0)
	opts.DrainOptions.PollInterval = 500 * time.Millisecond
	ctrl, err := machine.NewController(mc, core, target, machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  kf.Core().V1().Secrets(),
		Nodes:    tf.Core().V1().Nodes(),
		Target:   tf,
	}, cloud.Driver(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mf.Start(ctx.Done())
	kf.Start(ctx.Done())
	tf.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 4) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller Run: %v", err)
		}
		mf.Shutdown()
		kf.Shutdown()
		tf.Shutdown()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(denied)
	}
}
