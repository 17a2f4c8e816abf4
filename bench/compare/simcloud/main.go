// Command simcloud serves the reference manager's simulated cloud — the
// "sim" driver of reference/manager, its driver/sim cloud with the same
// boot and deletion delays, and its simulated kubelet registering a Node
// for every running VM in the target cluster — to a driver in another
// process over a unix socket. The comparison with Gardener MCM runs MCM's
// provider machine controller (bench/mcm) against it, so that both
// managers drive the very same simulated cloud: whatever differs in the
// figures is the managers'.
//
// The wire format: one POST per driver operation to /<operation>
// (CreateMachine, InitializeMachine, DeleteMachine, GetMachineStatus,
// ListMachines, GetVolumeIDs) with a JSON wireRequest; the answer, always
// 200 once the request was understood, is a JSON wireResponse carrying the
// driver error's code and message, if any. bench/mcm/provider/driver.go
// is the other side.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/reference/manager"
)

type wireRequest struct {
	Machine      *v1alpha1.Machine              `json:"machine,omitempty"`
	MachineClass *v1alpha1.MachineClass         `json:"machineClass,omitempty"`
	Secret       *corev1.Secret                 `json:"secret,omitempty"`
	PVSpecs      []*corev1.PersistentVolumeSpec `json:"pvSpecs,omitempty"`
}

type wireResponse struct {
	ProviderID     string               `json:"providerID,omitempty"`
	NodeName       string               `json:"nodeName,omitempty"`
	LastKnownState string               `json:"lastKnownState,omitempty"`
	Addresses      []corev1.NodeAddress `json:"addresses,omitempty"`
	Machines       map[string]string    `json:"machines,omitempty"`
	VolumeIDs      []string             `json:"volumeIDs,omitempty"`
	// Code is the driver error's code; mcm's codes have MCM's numbers.
	Code    driver.Code `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}

func main() {
	var (
		socket     = flag.String("socket", "", "unix socket to serve the driver on (required)")
		kubeconfig = flag.String("target-kubeconfig", "", "kubeconfig of the target cluster, where the simulated kubelet registers Nodes (required)")
		opts       manager.SimDriverOptions
	)
	// The reference manager's --sim-* flags, with its defaults.
	flag.Float64Var(&opts.KubeletQPS, "sim-kubelet-qps", manager.DefaultSimKubeletQPS, "queries per second of the simulated kubelet's client")
	flag.IntVar(&opts.KubeletBurst, "sim-kubelet-burst", manager.DefaultSimKubeletBurst, "burst of the simulated kubelet's client")
	flag.IntVar(&opts.KubeletParallelism, "sim-kubelet-parallelism", 0, "API calls the simulated kubelet makes at once (0: the sim's default)")
	flag.DurationVar(&opts.NodeLeaseDuration, "sim-node-lease-duration", manager.DefaultSimNodeLeaseDuration, "duration of the simulated nodes' leases, whole seconds")
	flag.DurationVar(&opts.NodeLeaseRenewPeriod, "sim-node-lease-renew-period", manager.DefaultSimNodeLeaseRenewPeriod, "how often a simulated node's lease is renewed")
	flag.DurationVar(&opts.NodeStatusReportPeriod, "sim-node-status-report-period", manager.DefaultSimNodeStatusReportPeriod, "how often a simulated node's unchanged status is written again")
	flag.Parse()
	if *socket == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "simcloud: --socket and --target-kubeconfig are required")
		os.Exit(2)
	}
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	ctx, stop := signal.NotifyContext(logr.NewContext(context.Background(), log), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *socket, *kubeconfig, opts); err != nil {
		fmt.Fprintf(os.Stderr, "simcloud: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, socket, kubeconfig string, opts manager.SimDriverOptions) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	target, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	d, kubelet, err := manager.SimDriver(opts)(ctx, manager.DriverEnv{
		Target:       target,
		TargetConfig: cfg,
		Logger:       logr.FromContextOrDiscard(ctx),
		Registerer:   prometheus.NewRegistry(), // the cloud's API metrics, which nobody reads here
	})
	if err != nil {
		return err
	}
	_ = os.Remove(socket) // a socket left by an earlier run
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := &http.Server{Handler: handler(d), ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- server.Serve(listener) }()
	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	defer stopKubelet()
	if kubelet != nil {
		go func() { errs <- kubelet(kubeletCtx) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return server.Shutdown(shutdownCtx)
}

// handler serves the driver's operations.
func handler(d driver.Driver) http.Handler {
	ops := map[string]func(context.Context, wireRequest) (wireResponse, error){
		"CreateMachine": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.CreateMachine(ctx, &driver.CreateMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, LastKnownState: resp.LastKnownState, Addresses: resp.Addresses}, err
		},
		"InitializeMachine": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.InitializeMachine(ctx, &driver.InitializeMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
		},
		"DeleteMachine": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{LastKnownState: resp.LastKnownState}, err
		},
		"GetMachineStatus": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.GetMachineStatus(ctx, &driver.GetMachineStatusRequest{Machine: r.Machine, MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{ProviderID: resp.ProviderID, NodeName: resp.NodeName, Addresses: resp.Addresses}, err
		},
		"ListMachines": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: r.MachineClass, Secret: r.Secret})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{Machines: resp.Machines}, err
		},
		"GetVolumeIDs": func(ctx context.Context, r wireRequest) (wireResponse, error) {
			resp, err := d.GetVolumeIDs(ctx, &driver.GetVolumeIDsRequest{PVSpecs: r.PVSpecs})
			if resp == nil {
				return wireResponse{}, err
			}
			return wireResponse{VolumeIDs: resp.VolumeIDs}, err
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, ok := ops[r.URL.Path[1:]]
		if !ok || r.Method != http.MethodPost {
			http.Error(w, "no such operation: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		var req wireRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := op(r.Context(), req)
		if err != nil {
			resp.Code, resp.Message = driver.CodeOf(err), err.Error()
			if resp.Code == driver.OK { // CodeOf never says so for an error; keep it an error on the wire
				resp.Code = driver.Unknown
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
}
