package v1alpha1

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Machine configuration defaults: the values a machine gets when neither the
// machine nor the controller sets them. They are the defaults of MCM's
// machine controller, so a machine behaves the same after moving from MCM.
const (
	// DefaultMachineDrainTimeout bounds a drain before remaining pods are force-deleted.
	DefaultMachineDrainTimeout = 2 * time.Hour
	// DefaultMachineHealthTimeout is how long a machine may be unhealthy before it is Failed.
	DefaultMachineHealthTimeout = 10 * time.Minute
	// DefaultMachineCreationTimeout is how long a new machine may take to join before it is Failed.
	DefaultMachineCreationTimeout = 20 * time.Minute
	// DefaultMachineInPlaceUpdateTimeout bounds an in-place update of a machine.
	DefaultMachineInPlaceUpdateTimeout = 20 * time.Minute
	// DefaultMachinePreserveTimeout is how long a preserved machine is kept,
	// MCM's default.
	DefaultMachinePreserveTimeout = 96 * time.Hour
	// DefaultDisableHealthTimeout leaves the health timeout in force.
	DefaultDisableHealthTimeout = false
	// DefaultMaxEvictRetries is MCM's value: one eviction attempt every 20s for the whole default drain timeout.
	DefaultMaxEvictRetries int32 = 360
	// DefaultNodeConditions are the node conditions that make a machine unhealthy while True.
	DefaultNodeConditions = "KernelDeadlock,ReadonlyFilesystem,DiskPressure,NetworkUnavailable"
)

// MachineDeployment and MachineSet defaults.
const (
	// DefaultMachineDeploymentStrategyType is the rollout strategy of a deployment that names none.
	DefaultMachineDeploymentStrategyType = RollingUpdateMachineDeploymentStrategyType
	// DefaultMaxSurge is a rolling update's maxSurge when unset: one machine above replicas.
	DefaultMaxSurge int32 = 1
	// DefaultMaxUnavailable is a rolling update's maxUnavailable when unset: capacity never drops.
	DefaultMaxUnavailable int32 = 0
	// DefaultOrchestrationType is an in-place update's orchestrationType when unset.
	DefaultOrchestrationType = OrchestrationTypeAuto
	// DefaultRevisionHistoryLimit is how many old MachineSets are kept, as for apps/v1 Deployments.
	DefaultRevisionHistoryLimit int32 = 10
	// DefaultProgressDeadlineSeconds is the apps/v1 Deployment deadline, counted on top of minReadySeconds.
	DefaultProgressDeadlineSeconds int32 = 600
	// DefaultAutoPreserveFailedMachineMax preserves no Failed machines.
	DefaultAutoPreserveFailedMachineMax int32 = 0
)

// SetMachineDeploymentDefaults fills the unset fields of md with the
// documented defaults. The CRDs declare no defaults, so what a client wrote
// is what is stored (and what MCM reads); controllers call this on the object
// they are about to act on.
//
// Call it on a DeepCopy, never on an object from an informer cache: the cache
// is shared, and a defaulted cache object would show every other reader
// values nobody stored. Do not write the defaulted copy back with Update
// either, or the defaults become stored values that no longer follow later
// changes (of minReadySeconds, for example); patch the fields you mean to
// change instead.
//
// Only unset fields are filled; a value that is set, even an invalid one, is
// kept for validation to report. Defaulting twice gives the same object as
// defaulting once, and defaulting an object the validation package accepts
// gives an object it still accepts. The defaults are:
//
//   - spec.strategy.type: RollingUpdate.
//   - spec.strategy.rollingUpdate (type RollingUpdate): maxSurge 1 and
//     maxUnavailable 0, so a rollout adds a machine before it removes one and
//     capacity never drops. MCM documents maxUnavailable 1; 0 is what the
//     API types promise and what a machine pool that runs workloads needs.
//   - spec.strategy.inPlaceUpdate.orchestrationType (type InPlaceUpdate): Auto.
//     Its maxSurge and maxUnavailable stay unset: their meaning for in-place
//     updates is the in-place controller's to define.
//   - spec.revisionHistoryLimit: 10, as for apps/v1 Deployments. MCM keeps all
//     old MachineSets when it is unset, which lets them pile up forever.
//   - spec.progressDeadlineSeconds: minReadySeconds + 600. With the
//     mcmkit.io/min-ready-seconds: apply opt-in (MinReadySecondsAnnotation) a
//     new machine makes no visible progress for minReadySeconds after it
//     becomes Running, so the 600 seconds apps/v1 uses are counted on top of
//     that wait; a flat 600 would turn a minReadySeconds of 600 or more (which
//     the CRD accepts while the deadline is unset) into a deadline that always
//     expires, and one the CRD's rule (deadline above minReadySeconds) would
//     reject if written. Without the opt-in, MCM's behaviour, machines count
//     as available once Running and the deadline is merely that much more
//     lenient; it does not follow the annotation, so that the default stays a
//     function of the spec alone. MCM sets no deadline at all when it is
//     unset.
//   - spec.autoPreserveFailedMachineMax: 0.
//
// spec.template is never touched: the controllers hash it to name
// MachineSets, and defaulting it would change the hash of every deployment
// written for MCM and roll all of its machines.
func SetMachineDeploymentDefaults(md *MachineDeployment) {
	spec := &md.Spec
	setStrategyDefaults(&spec.Strategy)
	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = new(DefaultRevisionHistoryLimit)
	}
	if spec.ProgressDeadlineSeconds == nil {
		spec.ProgressDeadlineSeconds = new(progressDeadlineSecondsFor(spec.MinReadySeconds))
	}
	if spec.AutoPreserveFailedMachineMax == nil {
		spec.AutoPreserveFailedMachineMax = new(DefaultAutoPreserveFailedMachineMax)
	}
}

func setStrategyDefaults(strategy *MachineDeploymentStrategy) {
	if strategy.Type == "" {
		strategy.Type = DefaultMachineDeploymentStrategyType
	}
	switch strategy.Type {
	case RollingUpdateMachineDeploymentStrategyType:
		if strategy.RollingUpdate == nil {
			strategy.RollingUpdate = &RollingUpdateMachineDeployment{}
		}
		update := &strategy.RollingUpdate.UpdateConfiguration
		if update.MaxSurge == nil {
			update.MaxSurge = new(intstr.FromInt32(DefaultMaxSurge))
		}
		if update.MaxUnavailable == nil {
			update.MaxUnavailable = new(intstr.FromInt32(DefaultMaxUnavailable))
		}
	case InPlaceUpdateMachineDeploymentStrategyType:
		// A missing inPlaceUpdate is an error validation reports; inventing
		// one here would hide it.
		if strategy.InPlaceUpdate != nil && strategy.InPlaceUpdate.OrchestrationType == "" {
			strategy.InPlaceUpdate.OrchestrationType = DefaultOrchestrationType
		}
	}
}

// progressDeadlineSecondsFor returns the default deadline for a deployment
// with the given minReadySeconds, saturating instead of overflowing int32.
func progressDeadlineSecondsFor(minReadySeconds int32) int32 {
	deadline := int64(max(minReadySeconds, 0)) + int64(DefaultProgressDeadlineSeconds)
	return int32(min(deadline, math.MaxInt32))
}

// SetMachineSetDefaults fills the unset fields of ms:
//
//   - spec.autoPreserveFailedMachineMax: 0 (unset and 0 mean the same; the
//     default lets code dereference it).
//
// Call it on a DeepCopy, never on a cached object, and do not write the
// result back; SetMachineDeploymentDefaults explains why. Only unset fields
// are filled, and defaulting is idempotent. spec.template is never touched,
// for the same reason as in SetMachineDeploymentDefaults.
func SetMachineSetDefaults(ms *MachineSet) {
	if ms.Spec.AutoPreserveFailedMachineMax == nil {
		ms.Spec.AutoPreserveFailedMachineMax = new(DefaultAutoPreserveFailedMachineMax)
	}
}

// DefaultMachineConfiguration returns a MachineConfiguration with every field
// set to its package default. Controllers start their flag defaults from it,
// so the flags, the docs and EffectiveMachineConfiguration agree. Each call
// returns fresh pointers the caller may modify.
func DefaultMachineConfiguration() MachineConfiguration {
	return MachineConfiguration{
		MachineDrainTimeout:         &metav1.Duration{Duration: DefaultMachineDrainTimeout},
		MachineHealthTimeout:        &metav1.Duration{Duration: DefaultMachineHealthTimeout},
		MachineCreationTimeout:      &metav1.Duration{Duration: DefaultMachineCreationTimeout},
		MachineInPlaceUpdateTimeout: &metav1.Duration{Duration: DefaultMachineInPlaceUpdateTimeout},
		MachinePreserveTimeout:      &metav1.Duration{Duration: DefaultMachinePreserveTimeout},
		DisableHealthTimeout:        new(DefaultDisableHealthTimeout),
		MaxEvictRetries:             new(DefaultMaxEvictRetries),
		NodeConditions:              new(DefaultNodeConditions),
	}
}

// EffectiveMachineConfiguration returns the configuration that applies to
// machine, with every field set. For each field the first of these wins:
//
//  1. for the creation timeout only, the machine's
//     EffectiveCreationTimeoutAnnotation, when it holds a non-negative Go
//     duration (the annotation is written by automation that tunes the
//     timeout; MCM lets it override the spec, and a malformed value is
//     ignored rather than stopping the machine from being handled);
//  2. the machine's own spec (its inline MachineConfiguration);
//  3. controller, the controller-wide configuration (typically from flags;
//     may be nil or partly set);
//  4. the package defaults (DefaultMachineConfiguration).
//
// There is no SetMachineDefaults: a machine's only defaults are these, and
// they depend on the controller's configuration, so they are resolved here
// instead of being written into the object.
//
// Neither machine nor controller is modified, and the result shares no
// pointers with them.
func EffectiveMachineConfiguration(machine *Machine, controller *MachineConfiguration) MachineConfiguration {
	var effective MachineConfiguration
	if machine.Spec.MachineConfiguration != nil {
		machine.Spec.MachineConfiguration.DeepCopyInto(&effective)
	}
	if controller != nil {
		fillUnsetConfiguration(&effective, controller.DeepCopy())
	}
	defaults := DefaultMachineConfiguration()
	fillUnsetConfiguration(&effective, &defaults)

	if value, ok := machine.Annotations[EffectiveCreationTimeoutAnnotation]; ok {
		if timeout, err := time.ParseDuration(value); err == nil && timeout >= 0 {
			effective.MachineCreationTimeout = &metav1.Duration{Duration: timeout}
		}
	}
	return effective
}

// fillUnsetConfiguration sets each nil field of c to from's field. It takes
// from's pointers as they are, so from must not be shared with anyone else.
func fillUnsetConfiguration(c, from *MachineConfiguration) {
	fillUnset(&c.MachineDrainTimeout, from.MachineDrainTimeout)
	fillUnset(&c.MachineHealthTimeout, from.MachineHealthTimeout)
	fillUnset(&c.MachineCreationTimeout, from.MachineCreationTimeout)
	fillUnset(&c.MachineInPlaceUpdateTimeout, from.MachineInPlaceUpdateTimeout)
	fillUnset(&c.MachinePreserveTimeout, from.MachinePreserveTimeout)
	fillUnset(&c.DisableHealthTimeout, from.DisableHealthTimeout)
	fillUnset(&c.MaxEvictRetries, from.MaxEvictRetries)
	fillUnset(&c.NodeConditions, from.NodeConditions)
}

func fillUnset[T any](field **T, value *T) {
	if *field == nil {
		*field = value
	}
}
