package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// tinyCloud is a complete, if minimal, provider: VMs live in a map keyed by
// machine name, which makes create idempotent by construction.
type tinyCloud struct {
	driver.UnimplementedOptional // no InitializeMachine, ListMachines, GetVolumeIDs

	mu  sync.Mutex
	vms map[string]string // machine name -> provider ID
}

func (c *tinyCloud) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	if len(req.Secret.Data[v1alpha1.UserDataKey]) == 0 {
		return nil, driver.NewError(driver.InvalidArgument, "secret has no userData")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.vms[req.Machine.Name]
	if !ok { // only create if there is no VM for this machine yet
		id = "tiny:///" + req.Machine.Name
		c.vms[req.Machine.Name] = id
	}
	return &driver.CreateMachineResponse{ProviderID: id, NodeName: req.Machine.Name}, nil
}

func (c *tinyCloud) DeleteMachine(ctx context.Context, req *driver.DeleteMachineRequest) (*driver.DeleteMachineResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.vms, req.Machine.Name) // no VM is fine: delete is idempotent
	return &driver.DeleteMachineResponse{}, nil
}

func (c *tinyCloud) GetMachineStatus(ctx context.Context, req *driver.GetMachineStatusRequest) (*driver.GetMachineStatusResponse, error) {
	if err := driver.ContextError(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.vms[req.Machine.Name]
	if !ok {
		return nil, driver.Errorf(driver.NotFound, "no VM for machine %s", req.Machine.Name)
	}
	return &driver.GetMachineStatusResponse{ProviderID: id, NodeName: req.Machine.Name}, nil
}

// Example implements a provider and drives it the way the machine
// controller does: look up, create, create again after a "lost response",
// delete twice.
func Example() {
	var d driver.Driver = &tinyCloud{vms: map[string]string{}}
	ctx := context.Background()

	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Namespace: "shoot"}}
	class := &v1alpha1.MachineClass{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "shoot"}}
	secret := driver.MergeSecrets(
		&corev1.Secret{Data: map[string][]byte{"userData": []byte("#cloud-config")}},
		&corev1.Secret{Data: map[string][]byte{"token": []byte("s3cr3t")}},
	)

	_, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: machine, MachineClass: class, Secret: secret})
	fmt.Println("status before create:", driver.CodeOf(err))

	for range 2 {
		resp, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
		fmt.Println("create:", resp.ProviderID, driver.CodeOf(err))
	}

	_, err = d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: secret})
	fmt.Println("list:", driver.CodeOf(err))

	for range 2 {
		_, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: machine, MachineClass: class, Secret: secret})
		fmt.Println("delete:", driver.CodeOf(err))
	}
	// Output:
	// status before create: NotFound
	// create: tiny:///worker-1 OK
	// create: tiny:///worker-1 OK
	// list: Unimplemented
	// delete: OK
	// delete: OK
}

// ExampleCodeOf shows that codes survive wrapping and that plain errors are
// Unknown.
func ExampleCodeOf() {
	quota := driver.Errorf(driver.ResourceExhausted, "zone %s: no capacity for %s", "eu-1a", "m5.large")
	wrapped := fmt.Errorf("create machine worker-1: %w", quota)

	fmt.Println(driver.CodeOf(wrapped))
	fmt.Println(driver.CodeOf(errors.New("connection reset")))
	fmt.Println(driver.CodeOf(context.DeadlineExceeded))
	fmt.Println(driver.CodeOf(nil))
	fmt.Println(wrapped)
	// Output:
	// ResourceExhausted
	// Unknown
	// DeadlineExceeded
	// OK
	// create machine worker-1: ResourceExhausted: zone eu-1a: no capacity for m5.large
}

// ExampleMergeSecrets merges a class's user-data secret with its
// credentials secret; the credentials win.
func ExampleMergeSecrets() {
	merged := driver.MergeSecrets(
		&corev1.Secret{Data: map[string][]byte{"userData": []byte("#cloud-config"), "token": []byte("old")}},
		&corev1.Secret{Data: map[string][]byte{"token": []byte("new")}},
	)
	fmt.Println(string(merged.Data["userData"]), string(merged.Data["token"]))
	// Output: #cloud-config new
}

// ExampleInstrument records driver metrics on a registry of your own.
func ExampleInstrument() {
	reg := prometheus.NewRegistry()
	d, err := driver.Instrument(&tinyCloud{vms: map[string]string{}}, reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	machine := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}}
	class := &v1alpha1.MachineClass{Provider: "tinycloud"} // the provider label
	_, _ = d.GetMachineStatus(context.Background(), &driver.GetMachineStatusRequest{Machine: machine, MachineClass: class})

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_cloud_api_driver_requests_failed_total Number of failed driver operations, by provider, operation and driver error code.
# TYPE mcm_cloud_api_driver_requests_failed_total counter
mcm_cloud_api_driver_requests_failed_total{error_code="NotFound",operation="GetMachineStatus",provider="tinycloud"} 1
`), "mcm_cloud_api_driver_requests_failed_total")
	fmt.Println("metrics as expected:", err == nil)
	// Output: metrics as expected: true
}

// ExampleCloudAPI counts a provider's own calls to its cloud's API, per
// service, under MCM's names.
func ExampleCloudAPI() {
	reg := prometheus.NewRegistry()
	api, err := driver.NewCloudAPI(reg, "tinycloud")
	if err != nil {
		fmt.Println(err)
		return
	}
	compute, err := api.Service("compute")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In the driver, around each request to the cloud:
	start := time.Now()
	err = errors.New("503 Service Unavailable") // what the cloud's SDK returned
	compute.Record(time.Since(start), err != nil)

	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcm_cloud_api_requests_failed_total Number of requests a driver made to its cloud's API that failed, by provider and service.
# TYPE mcm_cloud_api_requests_failed_total counter
mcm_cloud_api_requests_failed_total{provider="tinycloud",service="compute"} 1
`), "mcm_cloud_api_requests_failed_total")
	fmt.Println("metrics as expected:", err == nil)
	// Output: metrics as expected: true
}
