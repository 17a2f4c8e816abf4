package manager

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/machine"
	"github.com/mcmkit/mcm/machineset"
	"github.com/mcmkit/mcm/safety"
)

// ControllerContext is what a controller is built from. The informer
// factories are shared by all controllers of one run; a controller takes
// the informers it needs (before they start) and must not start them.
type ControllerContext struct {
	Config Config

	// Control cluster clients.
	Machines    versioned.Interface
	ControlCore kubernetes.Interface
	// TargetCore is the target cluster's client; nil with
	// --target-kubeconfig=none.
	TargetCore kubernetes.Interface

	// MachineInformers and ControlInformers watch --namespace of the
	// control cluster.
	MachineInformers externalversions.SharedInformerFactory
	ControlInformers informers.SharedInformerFactory
	// TargetInformers watch the target cluster; nil without one.
	TargetInformers informers.SharedInformerFactory

	// Driver is the selected driver; nil when no selected controller
	// needs one and --driver is empty.
	Driver     driver.Driver
	Registerer prometheus.Registerer
	Recorder   record.EventRecorder
	Logger     logr.Logger

	// Gates are shared by the controllers of one run: a controller whose
	// table entry says ProvidesSafetyGate sets Gates.Safety, and is built
	// before the others, which read it.
	Gates *Gates
}

// SafetyGate is what the controllers ask before creating machines: the
// SafetyGate of packages machine, machineset and deployment.
type SafetyGate interface {
	Frozen(ctx context.Context) bool
}

// Gates are the gates one controller provides to the others.
type Gates struct {
	// Safety is the safety controller's gate; nil when it does not run.
	Safety SafetyGate
	// Replacement is the safety controller's replacement budget (with
	// --machine-max-unhealthy); nil when it does not run, and then the
	// machine controller uses its default, MCM's.
	Replacement machine.ReplacementGate
}

// Controller is an entry of the controller table.
type Controller struct {
	// Resources are the machine.sapcloud.io/v1alpha1 resources (plural)
	// the controller needs served. A controller whose resources are not
	// all served is skipped with a warning; the others run.
	Resources []string
	// NeedsDriver: the controller calls the driver, so --driver is
	// required when it is selected.
	NeedsDriver bool
	// ProvidesSafetyGate: New sets ControllerContext.Gates.Safety, so the
	// controller is built before the others.
	ProvidesSafetyGate bool
	// New builds the controller: it takes its informers from the
	// factories and registers its handlers, and returns the function that
	// runs it until its context ends.
	New func(ctx context.Context, cc ControllerContext) (Runnable, error)
}

// Controllers is the controller table: --controllers names entries.
type Controllers map[string]Controller

// DefaultControllers returns a fresh table of this module's controllers.
// Each further controller is one more line here.
func DefaultControllers() Controllers {
	return Controllers{
		"machine":           {Resources: []string{"machines", "machineclasses"}, NeedsDriver: true, New: newMachineController},
		"machineset":        {Resources: []string{"machinesets", "machines"}, New: newMachineSetController},
		"machinedeployment": {Resources: []string{"machinedeployments", "machinesets", "machines"}, New: newDeploymentController},
		"safety":            {Resources: []string{"machinedeployments", "machinesets", "machines"}, ProvidesSafetyGate: true, New: newSafetyController},
	}
}

// baseResources must be served before anything runs: without Machines
// and MachineClasses there is nothing to manage.
var baseResources = []string{"machines", "machineclasses"}

func newMachineController(_ context.Context, cc ControllerContext) (Runnable, error) {
	c := cc.Config
	evict := int32(c.MachineMaxEvictRetries)
	conditions := c.NodeConditions
	inf := machine.Informers{
		Machines: cc.MachineInformers.Machine().V1alpha1().Machines(),
		Classes:  cc.MachineInformers.Machine().V1alpha1().MachineClasses(),
		Secrets:  cc.ControlInformers.Core().V1().Secrets(),
	}
	target, nodes := cc.targetNodes()
	if target != nil {
		inf.Nodes = nodes
		// The drain reads pods, budgets and volumes from these caches.
		inf.Target = cc.TargetInformers
	}
	ctrl, err := machine.NewController(cc.Machines, cc.ControlCore, target, inf, cc.Driver, machine.Options{
		Machine: v1alpha1.MachineConfiguration{
			MachineCreationTimeout: &metav1.Duration{Duration: c.MachineCreationTimeout},
			MachineHealthTimeout:   &metav1.Duration{Duration: c.MachineHealthTimeout},
			MachineDrainTimeout:    &metav1.Duration{Duration: c.MachineDrainTimeout},
			MaxEvictRetries:        &evict,
			NodeConditions:         &conditions,
		},
		DrainOptions: drain.Options{Volumes: drain.VolumeOptions{
			DetachTimeout:   c.MachinePVDetachTimeout,
			ReattachTimeout: c.MachinePVReattachTimeout,
		}},
		ResourceExhaustedRetry: c.ResourceExhaustedRetry,
		SafetyGate:             cc.safetyGate(),
		ReplacementGate:        cc.replacementGate(),
		Logger:                 cc.Logger,
		Recorder:               cc.Recorder,
		Registerer:             cc.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("machine controller: %w", err)
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, c.ConcurrentSyncs) }, nil
}

func newMachineSetController(_ context.Context, cc ControllerContext) (Runnable, error) {
	ctrl, err := machineset.NewController(cc.Machines, machineset.Informers{
		MachineSets: cc.MachineInformers.Machine().V1alpha1().MachineSets(),
		Machines:    cc.MachineInformers.Machine().V1alpha1().Machines(),
		Classes:     cc.MachineInformers.Machine().V1alpha1().MachineClasses(),
	}, machineset.Options{SafetyGate: cc.safetyGate(), Logger: cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer})
	if err != nil {
		return nil, fmt.Errorf("machineset controller: %w", err)
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, cc.Config.ConcurrentSyncs) }, nil
}

func newDeploymentController(_ context.Context, cc ControllerContext) (Runnable, error) {
	inf := deployment.Informers{
		Deployments: cc.MachineInformers.Machine().V1alpha1().MachineDeployments(),
		MachineSets: cc.MachineInformers.Machine().V1alpha1().MachineSets(),
		Machines:    cc.MachineInformers.Machine().V1alpha1().Machines(),
	}
	target, nodes := cc.targetNodes()
	inf.Nodes = nodes
	ctrl, err := deployment.NewController(cc.Machines, target, inf, deployment.Options{
		SkipAutoscalerAnnotationDuringRollout: !cc.Config.AutoscalerScaleDownAnnotationDuringRollout,
		SafetyGate:                            cc.safetyGate(),
		Logger:                                cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("machinedeployment controller: %w", err)
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, cc.Config.ConcurrentSyncs) }, nil
}

func newSafetyController(_ context.Context, cc ControllerContext) (Runnable, error) {
	c := cc.Config
	inf := safety.Informers{
		MachineSets: cc.MachineInformers.Machine().V1alpha1().MachineSets(),
		Deployments: cc.MachineInformers.Machine().V1alpha1().MachineDeployments(),
		Machines:    cc.MachineInformers.Machine().V1alpha1().Machines(),
		Classes:     cc.MachineInformers.Machine().V1alpha1().MachineClasses(),
		Secrets:     cc.ControlInformers.Core().V1().Secrets(),
	}
	target, nodes := cc.targetNodes()
	inf.Nodes = nodes
	maxUnhealthy, err := safety.ParseMaxUnhealthy(c.MachineMaxUnhealthy)
	if err != nil {
		return nil, fmt.Errorf("--machine-max-unhealthy: %w", err) // validated with the flags
	}
	// Without a driver (none selected) there are no VMs to collect.
	ctrl, err := safety.NewController(cc.Machines, target, inf, cc.Driver, safety.Options{
		MaxUnhealthy: maxUnhealthy,
		SafetyUp:     c.SafetyUp, SafetyDown: c.SafetyDown, OvershootPeriod: c.OvershootPeriod, CreationTimeout: c.MachineCreationTimeout,
		StatusCheckPeriod: c.StatusCheckPeriod, StatusCheckTimeout: c.StatusCheckTimeout, ProbeNamespace: c.Namespace,
		OrphanVMsPeriod: c.OrphanVMsPeriod, OrphanGracePeriod: c.OrphanGracePeriod,
		Logger: cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer})
	if err != nil {
		return nil, fmt.Errorf("safety controller: %w", err)
	}
	if cc.Gates != nil {
		cc.Gates.Safety = ctrl
		cc.Gates.Replacement = ctrl.ReplacementGate()
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, 1) }, nil
}

// safetyGate is the safety controller's gate, or nil when it does not run
// (a nil interface, not an interface holding a nil pointer).
func (cc ControllerContext) safetyGate() SafetyGate {
	if cc.Gates == nil || cc.Gates.Safety == nil {
		return nil
	}
	return cc.Gates.Safety
}

// replacementGate is the safety controller's replacement budget, or nil
// when it does not run (a nil interface, not one holding a nil pointer).
func (cc ControllerContext) replacementGate() machine.ReplacementGate {
	if cc.Gates == nil || cc.Gates.Replacement == nil {
		return nil
	}
	return cc.Gates.Replacement
}

// targetNodes returns the target cluster's client and node informer, or
// two nil interfaces (not interfaces holding nil pointers) without a
// target cluster.
func (cc ControllerContext) targetNodes() (kubernetes.Interface, coreinformers.NodeInformer) {
	if cc.TargetCore == nil {
		return nil, nil
	}
	return cc.TargetCore, cc.TargetInformers.Core().V1().Nodes()
}
