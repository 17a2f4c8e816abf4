package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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
	"github.com/mcmkit/mcm/safety/budget"
	"github.com/mcmkit/mcm/safety/orphanvms"
	"github.com/mcmkit/mcm/safety/outage"
	"github.com/mcmkit/mcm/safety/overshoot"
	"github.com/mcmkit/mcm/safety/unmanaged"
	"github.com/mcmkit/mcm/workqueue"
)

// ControllerContext is what a controller is built from. The informer
// factories are shared by the controllers of every group that runs at a
// time, and may already run when a controller is built: a controller
// takes the informers it needs, must not start them, adds an index only
// when the informer lacks it (an informer refuses a name twice, and a
// controller built again finds its predecessor's) and removes its event
// handlers when its Runnable returns, as this module's controllers do.
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

	// controlCfg and targetCfg (nil without a target cluster) are what
	// the clients above are built from, so that each group can have its
	// own (withOwnClients).
	controlCfg, targetCfg *rest.Config

	// Outage is the manager's API-server outage gate, one for the
	// manager: every controller that creates machines asks it, and the
	// machine controller learns from it when an outage ended. Its check
	// runs as the safety controller (MachineControllerGroup); while that
	// does not run in this manager (not selected, or its group's lease is
	// held elsewhere), the gate is not frozen. Nil only in a context made
	// by hand.
	Outage *outage.Gate
	// Replacement is the manager's replacement budget, one for the
	// informers the groups share, for the machine controller: MCM's limit
	// of one replacement at a time per deployment (per set when no
	// controller to run needs MachineSets), with --machine-max-unhealthy's
	// short-circuit. Nil means the machine controller's own default.
	Replacement machine.ReplacementGate
}

// A Group is a set of controllers that run together under one lease: the
// controllers one of MCM's two processes runs, and that process's lease.
// While a manager holds a group's lease it runs the group's controllers,
// and only then; so against a running MCM process, or another manager,
// nothing runs twice.
type Group string

const (
	// MachineControllerGroup is what MCM's provider machine-controller
	// runs: the machine controller, and the safety controller that gates
	// it (API-server outages, replacement budget) and collects orphan VMs.
	MachineControllerGroup Group = "machine-controller"
	// MachineControllerManagerGroup is what MCM's machine-controller-manager
	// runs: the MachineSet and MachineDeployment controllers.
	MachineControllerManagerGroup Group = "machine-controller-manager"
)

// groups are the known groups, in the order their leases are campaigned
// for: the machine controller's first (see the package documentation).
var groups = []Group{MachineControllerGroup, MachineControllerManagerGroup}

// Controller is an entry of the controller table.
type Controller struct {
	// Resources are the machine.sapcloud.io/v1alpha1 resources (plural)
	// the controller needs served. A controller whose resources are not
	// all served is skipped with a warning; the others run.
	Resources []string
	// NeedsDriver: the controller calls the driver, so --driver is
	// required when it is selected.
	NeedsDriver bool
	// Group is the lease the controller runs under. Required.
	Group Group
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
		"machine": {Group: MachineControllerGroup, Resources: []string{"machines", "machineclasses"}, NeedsDriver: true,
			New: newMachineController},
		"safety": {Group: MachineControllerGroup, Resources: []string{"machinedeployments", "machinesets", "machines"},
			New: newSafetyController},
		"machineset": {Group: MachineControllerManagerGroup, Resources: []string{"machinesets", "machines"},
			New: newMachineSetController},
		"machinedeployment": {Group: MachineControllerManagerGroup, Resources: []string{"machinedeployments", "machinesets", "machines"},
			New: newDeploymentController},
		"overshoot": {Group: MachineControllerManagerGroup, Resources: []string{"machinedeployments", "machinesets", "machines"},
			New: newOvershootController},
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
			MachineCreationTimeout:      &metav1.Duration{Duration: c.MachineCreationTimeout},
			MachineHealthTimeout:        &metav1.Duration{Duration: c.MachineHealthTimeout},
			MachinePreserveTimeout:      &metav1.Duration{Duration: c.MachinePreserveTimeout},
			MachineInPlaceUpdateTimeout: &metav1.Duration{Duration: c.MachineInPlaceUpdateTimeout},
			MachineDrainTimeout:         &metav1.Duration{Duration: c.MachineDrainTimeout},
			MaxEvictRetries:             &evict,
			NodeConditions:              &conditions,
		},
		DrainOptions: drain.Options{Volumes: drain.VolumeOptions{
			DetachTimeout: c.MachinePVDetachTimeout,
			// As MCM: after a pod's volumes detached, wait for them to be
			// attached elsewhere, at most the timeout; 0 skips the wait.
			WaitForReattach: c.MachinePVReattachTimeout > 0,
			ReattachTimeout: c.MachinePVReattachTimeout,
		}},
		ResourceExhaustedRetry:        c.ResourceExhaustedRetry,
		MaxConcurrentCreations:        c.ConcurrentCreations,
		BootstrapTokenAuthExtraGroups: c.BootstrapTokenAuthExtraGroups,
		SafetyGate:                    cc.gate(),
		ReplacementGate:               cc.Replacement,
		Logger:                        cc.Logger,
		Recorder:                      cc.Recorder,
		Registerer:                    cc.Registerer,
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
	}, machineset.Options{
		MaxReplicas: cc.Config.MachineMaxReplicas, KeepPreservedOnScaleDown: cc.Config.MachineKeepPreservedOnScaleDown,
		SafetyGate: cc.gate(), Logger: cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer,
	})
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
		CriticalComponentsNotReadyTaint:       cc.Config.InPlaceCriticalComponentsTaint,
		MaxReplicas:                           cc.Config.MachineMaxReplicas,
		SafetyGate:                            cc.gate(),
		Logger:                                cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("machinedeployment controller: %w", err)
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, cc.Config.ConcurrentSyncs) }, nil
}

// newSafetyController is what MCM's provider machine-controller runs
// besides the machine controller: the check of the manager's outage gate,
// and, with a driver, the orphan VM collection and, with a target
// cluster, the marking of nodes no machine claims.
func newSafetyController(_ context.Context, cc ControllerContext) (Runnable, error) {
	c := cc.Config
	if cc.Outage == nil {
		return nil, errors.New("safety controller: the manager built no outage gate")
	}
	runs := []func(context.Context) error{cc.Outage.Run}
	// Without a driver (none selected) there are no VMs to collect.
	if cc.Driver != nil {
		orphans, err := orphanvms.New(cc.Machines, cc.Driver, orphanvms.Informers{
			Machines: cc.MachineInformers.Machine().V1alpha1().Machines(),
			Classes:  cc.MachineInformers.Machine().V1alpha1().MachineClasses(),
			Secrets:  cc.ControlInformers.Core().V1().Secrets(),
		}, orphanvms.Options{OrphanVMsPeriod: c.OrphanVMsPeriod, OrphanGracePeriod: c.OrphanGracePeriod, Outages: cc.Outage,
			Logger: cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer})
		if err != nil {
			return nil, fmt.Errorf("safety controller: %w", err)
		}
		runs = append(runs, orphans.Run)
	}
	if target, nodes := cc.targetNodes(); target != nil {
		marks, err := unmanaged.New(target, unmanaged.Informers{Machines: cc.MachineInformers.Machine().V1alpha1().Machines(), Nodes: nodes},
			unmanaged.Options{CreationTimeout: c.MachineCreationTimeout, Logger: cc.Logger, Registerer: cc.Registerer})
		if err != nil {
			return nil, fmt.Errorf("safety controller: %w", err)
		}
		runs = append(runs, func(ctx context.Context) error { return marks.Run(ctx, 1) })
	}
	return func(ctx context.Context) error { return workqueue.RunAll(ctx, runs...) }, nil
}

// newOvershootController is the overshoot check (and, with
// --machine-max-unhealthy, the deployments' remediation condition), which
// MCM's machine-controller-manager runs.
func newOvershootController(_ context.Context, cc ControllerContext) (Runnable, error) {
	c := cc.Config
	maxUnhealthy, err := budget.ParseMaxUnhealthy(c.MachineMaxUnhealthy)
	if err != nil {
		return nil, fmt.Errorf("--machine-max-unhealthy: %w", err) // validated with the flags
	}
	ctrl, err := overshoot.New(cc.Machines, overshoot.Informers{
		MachineSets: cc.MachineInformers.Machine().V1alpha1().MachineSets(),
		Deployments: cc.MachineInformers.Machine().V1alpha1().MachineDeployments(),
		Machines:    cc.MachineInformers.Machine().V1alpha1().Machines(),
	}, overshoot.Options{
		MaxUnhealthy: maxUnhealthy,
		SafetyUp:     c.SafetyUp, SafetyDown: c.SafetyDown, OvershootPeriod: c.OvershootPeriod,
		Logger: cc.Logger, Recorder: cc.Recorder, Registerer: cc.Registerer})
	if err != nil {
		return nil, fmt.Errorf("overshoot controller: %w", err)
	}
	return func(ctx context.Context) error { return ctrl.Run(ctx, 1) }, nil
}

// gate is the manager's outage gate as the controllers' Options take it:
// a nil interface, not one holding a nil pointer, without one.
func (cc ControllerContext) gate() safety.Gate {
	if cc.Outage == nil {
		return nil
	}
	return cc.Outage
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
