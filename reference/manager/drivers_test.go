package manager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

func simRequest(name string) (*v1alpha1.Machine, *v1alpha1.MachineClass, *corev1.Secret) {
	return &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}},
		&v1alpha1.MachineClass{
			ObjectMeta:   metav1.ObjectMeta{Name: "small", Namespace: "default"},
			Provider:     sim.ProviderName,
			ProviderSpec: sim.ProviderSpec{Zone: "zone-a", InstanceType: "small"}.RawExtension(),
		},
		&corev1.Secret{Data: map[string][]byte{v1alpha1.UserDataKey: []byte("#!"), sim.CredentialsKey: []byte("t")}}
}

// A manager restarted with the same state file finds the VMs the last one
// created, under the same provider IDs.
func TestSimDriverWithStateFileSurvivesARestart(t *testing.T) {
	ctx := t.Context()
	factory := SimDriver(SimDriverOptions{StateFile: filepath.Join(t.TempDir(), "sim.json")})
	first, _, err := factory(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	m, class, secret := simRequest("m1")
	created, err := first.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}

	restarted, _, err := factory(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatalf("sim driver after the restart: %v", err)
	}
	status, err := restarted.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatalf("GetMachineStatus after the restart: %v", err)
	}
	if status.ProviderID != created.ProviderID {
		t.Errorf("provider ID after the restart = %s, want %s", status.ProviderID, created.ProviderID)
	}
	listed, err := restarted.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{created.ProviderID: "m1"}, listed.Machines); diff != "" {
		t.Errorf("ListMachines after the restart (-want +got):\n%s", diff)
	}

	// Without a state file, the cloud is the process's.
	inMemory, _, err := NewSimDriver(ctx, DriverEnv{Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inMemory.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: m, MachineClass: class, Secret: secret}); driver.CodeOf(err) != driver.NotFound {
		t.Errorf("GetMachineStatus of an in-memory sim: %v, want NotFound", err)
	}
}

// A state file that is not a sim cloud's state fails the driver, and so the
// manager's start, instead of an empty cloud in which every VM looks gone.
func TestSimDriverRefusesACorruptStateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "vms": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := SimDriver(SimDriverOptions{StateFile: path})(t.Context(), DriverEnv{Logger: logr.Discard()})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("sim driver with a corrupt state file: %v; want an error naming %s", err, path)
	}
}

// The simulated kubelet of a restarted manager carries on with the Nodes
// of the last one: it renews the lease of a Node registered before the
// restart, which a kubelet of another identity would leave alone.
func TestSimDriverKubeletCarriesOnWithNodesAfterARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	// The last manager created the VM an hour ago and registered its Node.
	before, err := sim.New(sim.Options{Clock: clocktesting.NewFakeClock(time.Now().Add(-time.Hour)), StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	m, class, secret := simRequest("m1")
	created, err := before.Driver().CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	target := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        created.NodeName,
		Annotations: map[string]string{sim.AnnotationSimulated: before.ID()},
	}})

	_, background, err := SimDriver(SimDriverOptions{StateFile: path})(t.Context(), DriverEnv{Target: target, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- background(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet: %v", err)
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := target.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, created.NodeName, metav1.GetOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted manager's kubelet did not renew the lease of node %s", created.NodeName)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSimKubeletConfig(t *testing.T) {
	shared := flowcontrol.NewTokenBucketRateLimiter(20, 30)
	manager := &rest.Config{Host: "https://target", QPS: 20, Burst: 30, UserAgent: "mcm-reference", RateLimiter: shared}
	type limits struct {
		QPS                       float32
		Burst                     int
		UserAgent                 string
		ContentType, AcceptTypes  string
		SharesManagersRateLimiter bool
		Host                      string
	}
	tests := []struct {
		name string
		opts SimDriverOptions
		want limits
	}{
		{"defaults", SimDriverOptions{}, limits{
			QPS: DefaultSimKubeletQPS, Burst: DefaultSimKubeletBurst, UserAgent: SimKubeletUserAgent,
			ContentType: "application/vnd.kubernetes.protobuf", AcceptTypes: "application/vnd.kubernetes.protobuf,application/json", Host: "https://target",
		}},
		{"flags", SimDriverOptions{KubeletQPS: 400, KubeletBurst: 800}, limits{
			QPS: 400, Burst: 800, UserAgent: SimKubeletUserAgent,
			ContentType: "application/vnd.kubernetes.protobuf", AcceptTypes: "application/vnd.kubernetes.protobuf,application/json", Host: "https://target",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := simKubeletConfig(manager, tc.opts)
			got := limits{c.QPS, c.Burst, c.UserAgent, c.ContentType, c.AcceptContentTypes, c.RateLimiter != nil, c.Host}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("kubelet client config (-want +got):\n%s", diff)
			}
			if manager.QPS != 20 || manager.Burst != 30 || manager.UserAgent != "mcm-reference" || manager.RateLimiter != shared {
				t.Errorf("the manager's config changed: %+v", manager)
			}
		})
	}
}

// With the target cluster's configuration, the kubelet talks to it through
// a client of its own, told apart by its user agent, not through the
// controllers' client.
func TestSimDriverKubeletHasItsOwnClient(t *testing.T) {
	agents := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case agents <- r.UserAgent() + " accepts " + r.Header.Get("Accept"):
		default:
		}
		http.Error(w, "not here", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	controllers := fake.NewClientset()
	_, background, err := SimDriver(SimDriverOptions{})(t.Context(), DriverEnv{
		Target: controllers, TargetConfig: &rest.Config{Host: srv.URL, UserAgent: "mcm-reference"}, Logger: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- background(ctx) }()
	var got string
	select {
	case got = <-agents:
	case <-time.After(10 * time.Second):
		t.Fatal("the kubelet sent no request to the target cluster's API server")
	}
	cancel()
	<-done // the caches never synced: Run returns an error, or nil as ctx ended
	if want := SimKubeletUserAgent + " accepts application/vnd.kubernetes.protobuf,application/json"; got != want {
		t.Errorf("kubelet request: %q, want %q", got, want)
	}
	if actions := controllers.Actions(); len(actions) > 0 {
		t.Errorf("the kubelet used the controllers' client: %v", actions)
	}
}

func TestSimDriverRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts SimDriverOptions
		want string
	}{
		{"negative QPS", SimDriverOptions{KubeletQPS: -1}, "sim driver: negative kubelet QPS -1, burst 0 or parallelism 0"},
		{"negative parallelism", SimDriverOptions{KubeletParallelism: -1}, "sim driver: negative kubelet QPS 0, burst 0 or parallelism -1"},
		{"negative renew period", SimDriverOptions{NodeLeaseRenewPeriod: -time.Second},
			"sim driver: negative node lease duration 0s, renew period -1s or status report period 0s"},
		{"lease of fractional seconds", SimDriverOptions{NodeLeaseDuration: 1500 * time.Millisecond}, "sim driver: node lease duration 1.5s is not whole seconds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := SimDriver(tc.opts)(t.Context(), DriverEnv{Logger: logr.Discard()})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// The --sim-node-* flags reach the kubelet: the lease of a node it
// registers has the configured duration.
func TestNewSimDriverConfiguresTheKubelet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sim.json")
	// A VM that finished booting long ago, so that its node registers at
	// the kubelet's first sync.
	before, err := sim.New(sim.Options{Clock: clocktesting.NewFakeClock(time.Now().Add(-time.Hour)), StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	m, class, secret := simRequest("m1")
	created, err := before.Driver().CreateMachine(t.Context(), &driver.CreateMachineRequest{Machine: m, MachineClass: class, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.SimStateFile = path
	cfg.SimNodeLeaseDuration = time.Minute
	cfg.SimNodeLeaseRenewPeriod = 15 * time.Second
	target := fake.NewClientset()
	_, background, err := NewSimDriver(t.Context(), DriverEnv{Config: cfg, Target: target, Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- background(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lease, err := target.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, created.NodeName, metav1.GetOptions{})
		if err == nil {
			if got := ptr.Deref(lease.Spec.LeaseDurationSeconds, 0); got != 60 {
				t.Errorf("lease duration %d s, want the flag's 60", got)
			}
			return
		}
		if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lease for node %s", created.NodeName)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
