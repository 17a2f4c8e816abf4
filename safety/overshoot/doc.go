// Package overshoot is the overshoot check, as MCM's
// machine-controller-manager runs it; with Options.MaxUnhealthy it also
// reports a replacement budget's remediation short-circuit on each
// deployment.
//
// A set with far more machines than it should have (machines created by
// hand into its selector, a controller bug) is frozen: label freeze=True
// and the Frozen condition (reason OverShootingReplicaCount) on the set and
// on its deployment, so that neither creates machines while scale-down
// goes on. MCM's thresholds: frozen at deployment replicas + maxSurge +
// SafetyUp machines (twice the set's replicas + SafetyUp without a
// deployment), unfrozen SafetyDown below, or by the annotation
// safety.machine.sapcloud.io/unfreeze on the set or its deployment. The
// controller checks a namespace whenever a machine appears or goes or a
// set or deployment changes, and every OvershootPeriod (each namespace is
// a key of its queue, "safety-overshoot", that requeues itself after the
// period; a failed check is retried with the queue's backoff). Unlike MCM
// it never lifts a freeze it did not make (a person's freeze=True label)
// except by the unfreeze annotation. The Frozen condition is this
// controller's alone: the MachineSet and MachineDeployment controllers keep
// it as it is.
//
// # Remediation condition
//
// With Options.MaxUnhealthy (the same value as the machine controller's
// budget, package safety/budget), every check also writes
// ConditionRemediationAllowed (mcmkit.io/RemediationAllowed) on each
// deployment of the namespace: False (reason TooManyUnhealthy, with the
// counts) while more of the deployment's machines are unhealthy (Unknown or
// Failed, not being deleted) than MaxUnhealthy allows, True otherwise, and
// a RemediationShortCircuited or RemediationResumed event when that
// changes. A deployment's machines are those its sets control, as the
// budget counts them. The condition is written against a fresh read of the
// deployment, again on a conflict: the deployment controller writes its
// own conditions too.
//
// # Usage
//
//	mf := externalversions.NewSharedInformerFactory(machineClient, 0)
//	c, err := overshoot.New(machineClient, overshoot.Informers{
//		MachineSets: mf.Machine().V1alpha1().MachineSets(),
//		Deployments: mf.Machine().V1alpha1().MachineDeployments(),
//		Machines:    mf.Machine().V1alpha1().Machines(),
//	}, overshoot.Options{MaxUnhealthy: ptr.To(intstr.FromString("40%")), Recorder: rec, Registerer: reg})
//	if err != nil {
//		return err
//	}
//	mf.Start(ctx.Done())
//	go c.Run(ctx, 1)
package overshoot
