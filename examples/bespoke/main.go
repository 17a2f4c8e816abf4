// Command bespoke is a bespoke machine manager: the machine controller of
// package machine and nothing else, driving a custom driver (package
// memdriver, an in-memory cloud written for this example).
//
//	go run ./examples/bespoke --control-kubeconfig K [--target-kubeconfig K|none] [--namespace ns]
//
// It is meant to be read: the wiring a provider writes to run its driver
// under the machine controller is clients, informer factories,
// machine.NewController and Run, all of it in run below.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/examples/bespoke/memdriver"
	"github.com/mcmkit/mcm/machine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr, memdriver.New(memdriver.Options{}))
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK     = 0 // stopped by a signal
	exitFailed = 1
	exitUsage  = 2
)

// none as --target-kubeconfig runs without a target cluster, as MCM's
// "none": nothing joins, and a created machine is Available at once.
const none = "none"

// run runs the machine controller with driver d until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer, d driver.Driver) int {
	fs := flag.NewFlagSet("bespoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		controlKubeconfig = fs.String("control-kubeconfig", "", "kubeconfig of the control cluster, which holds Machines, MachineClasses and Secrets (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
		targetKubeconfig  = fs.String("target-kubeconfig", none, `kubeconfig of the target cluster, where the machines' Nodes join; "none" for no target cluster`)
		namespace         = fs.String("namespace", "default", "namespace of the Machines, MachineClasses and Secrets to manage")
		workers           = fs.Int("workers", 5, "machines reconciled at once")
		verbosity         = fs.Int("v", 0, "log verbosity on stderr")
	)
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		return exitUsage
	}
	logger := funcr.New(func(prefix, args string) {
		fmt.Fprintln(stderr, strings.TrimSpace(prefix+" "+args))
	}, funcr.Options{Verbosity: *verbosity})
	ctx = logr.NewContext(ctx, logger)
	fail := func(err error) int {
		logger.Error(err, "Manager failed")
		return exitFailed
	}

	machineClient, controlClient, targetClient, err := clients(*controlKubeconfig, *targetKubeconfig)
	if err != nil {
		return fail(err)
	}

	// Informers: Machines, MachineClasses and Secrets of one namespace;
	// Nodes of the target cluster.
	mf := externalversions.NewSharedInformerFactoryWithOptions(machineClient, 0, externalversions.WithNamespace(*namespace))
	cf := informers.NewSharedInformerFactoryWithOptions(controlClient, 0, informers.WithNamespace(*namespace))
	inf := machine.Informers{
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
	}
	var tf informers.SharedInformerFactory
	if targetClient != nil {
		tf = informers.NewSharedInformerFactory(targetClient, 0)
		inf.Nodes = tf.Core().V1().Nodes()
	}

	// The controller, with MCM's defaults. Options also take metrics
	// (Registerer), events (Recorder), timeouts and a SafetyGate.
	ctrl, err := machine.NewController(machineClient, controlClient, targetClient, inf, d, machine.Options{Logger: logger})
	if err != nil {
		return fail(err)
	}
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	if tf != nil {
		tf.Start(ctx.Done())
	}
	logger.Info("Starting machine controller", "namespace", *namespace, "targetCluster", targetClient != nil)
	err = ctrl.Run(ctx, *workers) // until SIGINT or SIGTERM
	mf.Shutdown()
	cf.Shutdown()
	if tf != nil {
		tf.Shutdown()
	}
	if err != nil && ctx.Err() == nil {
		return fail(err)
	}
	logger.Info("Stopped")
	return exitOK
}

// clients are the machine API and core (Secrets) on the control cluster,
// and core (Nodes, Pods) on the target cluster, nil without one.
func clients(controlKubeconfig, targetKubeconfig string) (versioned.Interface, kubernetes.Interface, kubernetes.Interface, error) {
	controlCfg, err := restConfig(controlKubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	machineClient, err := versioned.NewForConfig(controlCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	controlClient, err := kubernetes.NewForConfig(controlCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if targetKubeconfig == none {
		return machineClient, controlClient, nil, nil
	}
	targetCfg, err := restConfig(targetKubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	targetClient, err := kubernetes.NewForConfig(targetCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return machineClient, controlClient, targetClient, nil
}

// restConfig loads a kubeconfig file, or with an empty path $KUBECONFIG,
// ~/.kube/config or the in-cluster configuration.
func restConfig(kubeconfig string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", kubeconfig, err)
	}
	return cfg, nil
}
