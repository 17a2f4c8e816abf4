// Command simcloud serves the reference manager's simulated cloud — the
// "sim" driver of reference/manager, its driver/sim cloud with the same
// boot and deletion delays, its simulated kubelet registering a Node for
// every running VM in the target cluster and, with --namespace, its node
// agent, which carries out the in-place updates of the VMs of classes that
// enable it — to a driver in another process over a unix socket. The
// comparison runs MCM's provider machine controller (bench/mcm) and mcm's
// reference manager against it, so that both managers drive the very same
// simulated cloud, in a process of its own: whatever differs in the
// figures is the managers'.
//
// With --create-returns-with-node, CreateMachine returns only once the
// new VM's Node is registered (up to 10 s): the ready-at-once boot model,
// whose VMs boot at once, and whose Nodes exist when the call returns.
//
// The wire format is package bench/internal/simwire's; its Dial is the
// driver of the bench's build of the reference manager
// (bench/compare/reference), bench/mcm/provider/driver.go MCM's.
package main

import (
	"context"
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/bench/internal/simwire"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/driver/sim"
	"github.com/mcmkit/mcm/reference/manager"
)

func main() {
	var (
		socket     = flag.String("socket", "", "unix socket to serve the driver on (required)")
		kubeconfig = flag.String("target-kubeconfig", "", "kubeconfig of the target cluster, where the simulated kubelet registers Nodes (required)")
		namespace  = flag.String("namespace", "", "namespace of the machine objects whose VMs the simulated node agent updates in place (the cluster is control and target alike); empty runs no agent")
		withNodes  = flag.Bool("create-returns-with-node", false, "CreateMachine returns once the new VM's Node is registered (the ready-at-once boot model, for classes whose VMs boot at once)")
		opts       manager.SimDriverOptions
	)
	// The reference manager's --sim-* flags, with its defaults.
	flag.Float64Var(&opts.KubeletQPS, "sim-kubelet-qps", manager.DefaultSimKubeletQPS, "queries per second of the simulated kubelet's client")
	flag.IntVar(&opts.KubeletBurst, "sim-kubelet-burst", manager.DefaultSimKubeletBurst, "burst of the simulated kubelet's client")
	flag.IntVar(&opts.KubeletParallelism, "sim-kubelet-parallelism", sim.DefaultParallelism, "API calls the simulated kubelet makes at once")
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
	if err := run(ctx, *socket, *kubeconfig, *namespace, *withNodes, opts); err != nil {
		fmt.Fprintf(os.Stderr, "simcloud: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, socket, kubeconfig, namespace string, withNodes bool, opts manager.SimDriverOptions) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	target, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	env := manager.DriverEnv{
		Config:       manager.DefaultConfig(),
		Target:       target,
		TargetConfig: cfg,
		Logger:       logr.FromContextOrDiscard(ctx),
		Registerer:   prometheus.NewRegistry(), // the cloud's API metrics, which nobody reads here
	}
	if namespace != "" {
		// The agent reads machine objects only; under the simulated
		// kubelet's user agent, the benchmark's proxy counts its requests
		// as the node side's, not a manager's.
		agentConfig := rest.CopyConfig(cfg)
		agentConfig.UserAgent = manager.SimKubeletUserAgent + "/agent"
		if env.Machines, err = versioned.NewForConfig(agentConfig); err != nil {
			return err
		}
		env.Config.Namespace = namespace
	}
	d, kubelet, err := manager.SimDriver(opts)(ctx, env)
	if err != nil {
		return err
	}
	if withNodes {
		factory := informers.NewSharedInformerFactory(target, 0)
		nodes := factory.Core().V1().Nodes()
		d = withNode{Driver: d, nodes: nodes.Lister()}
		nodes.Informer() // registered before Start
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
	}
	_ = os.Remove(socket) // a socket left by an earlier run
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := &http.Server{Handler: simwire.Handler(d), ReadHeaderTimeout: 10 * time.Second}
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
