// Command embed is the smallest program embedding mcm (see README.md); lines marked CHANGE are yours to replace.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/crds"
	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/driver/sim" // CHANGE: your provider's driver package
	"github.com/mcmkit/mcm/machine"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster that holds the Machines")
	namespace := flag.String("namespace", "default", "namespace of the Machines, MachineClasses and Secrets")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, kubeconfig, namespace string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, cfg); err != nil { // create or update the machine.sapcloud.io CRDs
		return err
	}
	scheme := runtime.NewScheme() // your own scheme (mcm never touches global ones); events find Machines' kind here
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	machines, core := versioned.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
	events := record.NewBroadcaster(record.WithContext(ctx)) // stops when ctx ends
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events(namespace)})
	cloud, err := sim.New(sim.Options{}) // CHANGE: construct your driver.Driver instead
	if err != nil {
		return err
	}
	mf := externalversions.NewSharedInformerFactoryWithOptions(machines, 0, externalversions.WithNamespace(namespace))
	cf := informers.NewSharedInformerFactoryWithOptions(core, 0, informers.WithNamespace(namespace))
	ctrl, err := machine.NewController(machines, core, nil, machine.Informers{ // nil target, no Nodes: MCM's "none"
		Machines: mf.Machine().V1alpha1().Machines(),
		Classes:  mf.Machine().V1alpha1().MachineClasses(),
		Secrets:  cf.Core().V1().Secrets(),
	}, cloud.Driver(), machine.Options{Recorder: events.NewRecorder(scheme, corev1.EventSource{Component: "embed"})})
	if err != nil {
		return err
	}
	mf.Start(ctx.Done())
	cf.Start(ctx.Done())
	return ctrl.Run(ctx, 5) // 5 machines at once; blocks until ctx ends
}
