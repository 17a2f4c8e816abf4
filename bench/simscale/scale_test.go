// Package simscale runs one reference manager with the simulated cloud and
// kubelet (--driver=sim) against the test environment's control plane and
// scales a MachineDeployment to thousands of machines: BenchmarkSimMachines
// reports the time until all are Running, the manager's peak RSS and CPU,
// the API requests the run made and every node that went from Ready to not
// Ready during the run and a stable period after it (a flap), and fails on
// any flap. It is slow (minutes), so make bench runs it once, on its own.
package simscale

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/internal/controlplane"
	"github.com/mcmkit/mcm/internal/testsupport/testenv"
)

// The settings of a run. The kubelet's lease renewals (machines /
// leaseRenewPeriod writes per second) and the node monitor grace period,
// which must exceed the renew period with margin, are what decide whether
// thousands of nodes stay Ready on a small machine.
const (
	// defaultMachines is the scale of a run; MCM_BENCH_SIM_MACHINES
	// overrides it.
	defaultMachines = 5000
	// defaultStable is how long the machines must stay Running and their
	// nodes Ready once all are; MCM_BENCH_SIM_STABLE overrides it.
	defaultStable = 2 * time.Minute
	// runTimeout bounds the wait for all machines to be Running.
	runTimeout = 40 * time.Minute

	leaseRenewPeriod       = 20 * time.Second
	nodeMonitorGracePeriod = 90 * time.Second
)

// managerFlags are the manager's flags beyond the clusters, namespace and
// driver: the controllers' client gets a rate limit that lets them create
// and watch over thousands of machines in minutes (the default 20 QPS
// makes that an hour), and the simulated kubelet its own client and
// heartbeats.
func managerFlags() []string {
	return []string{
		"--leader-elect=false",
		"--port=0",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--sim-kubelet-qps=400",
		"--sim-kubelet-burst=800",
		"--sim-node-lease-duration=" + (2 * leaseRenewPeriod).String(),
		"--sim-node-lease-renew-period=" + leaseRenewPeriod.String(),
	}
}

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{
		Setup:        []func(context.Context, *rest.Config) error{crds.Install},
		ControlPlane: controlplane.Options{NodeMonitorGracePeriod: nodeMonitorGracePeriod},
	})
}

// BenchmarkSimMachines scales a MachineDeployment of the sim driver to
// MCM_BENCH_SIM_MACHINES machines (default 5000) with one reference
// manager, the built binary, and watches its nodes until all machines have
// been Running for MCM_BENCH_SIM_STABLE (default 2m). One run takes many
// minutes: use -benchtime 1x.
func BenchmarkSimMachines(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("one run takes many minutes and leaves thousands of nodes in the cluster: use -benchtime 1x (b.N = %d)", b.N)
	}
	machines := envInt(b, "MCM_BENCH_SIM_MACHINES", defaultMachines)
	stable := envDuration(b, "MCM_BENCH_SIM_STABLE", defaultStable)
	env := testenv.Get(b)
	r := newRun(b, env, machines)
	b.ResetTimer()

	res := r.scale(b, stable)

	b.StopTimer()
	progress("%d machines, one manager (--kube-api-qps 200), simulated kubelet with QPS 400, leases renewed every %v, node monitor grace period %v",
		machines, leaseRenewPeriod, nodeMonitorGracePeriod)
	progress("all Running after %v, then stable for %v", res.toRunning.Round(time.Second), res.stable.Round(time.Second))
	progress("manager: peak RSS %d MiB, CPU %.0f s (%.2f cores over the run, %.2f in the stable period)",
		res.peakRSS>>20, res.cpu.Seconds(), res.cpu.Seconds()/res.total.Seconds(), res.cpuStable.Seconds()/res.stable.Seconds())
	progress("machine (all processes, control plane included): %.0f%% of its CPUs busy in the stable period", 100*res.machineBusyStable)
	progress("node flaps (Ready to not Ready): %d during the run, %d in the stable period; machines that left Running: %d",
		res.flapsRun, res.flapsStable, res.machinesLeftRunning)
	progress("API requests of the run: %d in %v (%.0f/s); busiest:\n%s", res.requests.Total(), res.total.Round(time.Second),
		float64(res.requests.Total())/res.total.Seconds(), res.requests.Top(12))
	progress("API requests of the stable period: %.0f/s; busiest:\n%s",
		float64(res.requestsStable.Total())/res.stable.Seconds(), res.requestsStable.Top(8))
	progress("writers in the stable period:\n%s", res.writersStable)
	b.ReportMetric(res.toRunning.Seconds(), "s-to-running")
	b.ReportMetric(float64(res.peakRSS)/(1<<20), "MiB-peak-rss")
	b.ReportMetric(res.cpu.Seconds(), "manager-cpu-s")
	b.ReportMetric(100*res.machineBusyStable, "%cpu-busy-stable")
	b.ReportMetric(float64(res.flapsRun+res.flapsStable), "flaps")
	b.ReportMetric(float64(res.requests.Total())/res.total.Seconds(), "api-req/s")
	b.ReportMetric(0, "ns/op") // one run: the figures above say it
	if res.flapsRun+res.flapsStable > 0 || res.machinesLeftRunning > 0 {
		b.Errorf("%d node flaps and %d machines that left Running; want none:\n%s",
			res.flapsRun+res.flapsStable, res.machinesLeftRunning, res.flapSamples)
	}
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a duration", name, s)
	}
	return d
}
