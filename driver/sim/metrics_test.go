package sim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/driver/sim"
)

// TestCloudAPIMetrics: every call of a VM operation is one request to the
// simulated compute API; refused ones fail, answered lookups do not, and
// GetVolumeIDs, which reads only the volumes it is given, is none.
func TestCloudAPIMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	w := newWorld(t, sim.Options{Registerer: reg})
	w.mustCreate("a")                                                   // answered
	if _, err := w.status("b"); driver.CodeOf(err) != driver.NotFound { // answered: no VM
		t.Fatalf("status of a machine without VM: %v", err)
	}
	if _, err := w.cloud.InjectFault(sim.Fault{Operation: driver.OperationListMachines, Code: driver.Unavailable}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.list(); driver.CodeOf(err) != driver.Unavailable { // refused
		t.Fatalf("list with a fault: %v", err)
	}
	if _, err := w.d.GetVolumeIDs(context.Background(), &driver.GetVolumeIDsRequest{}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP mcm_cloud_api_requests_failed_total Number of requests a driver made to its cloud's API that failed, by provider and service.
# TYPE mcm_cloud_api_requests_failed_total counter
mcm_cloud_api_requests_failed_total{provider="sim",service="compute"} 1
# HELP mcm_cloud_api_requests_total Number of requests a driver made to its cloud's API, by provider and service.
# TYPE mcm_cloud_api_requests_total counter
mcm_cloud_api_requests_total{provider="sim",service="compute"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcm_cloud_api_requests_total", "mcm_cloud_api_requests_failed_total"); err != nil {
		t.Error(err)
	}
	if n, ok := w.d.(driver.ProviderNamer); !ok || n.ProviderName() != sim.ProviderName {
		t.Errorf("the sim's driver does not name its provider %q", sim.ProviderName)
	}
}
