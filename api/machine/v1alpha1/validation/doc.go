// Package validation checks machine.sapcloud.io/v1alpha1 objects in Go.
//
// The CRDs reject invalid objects at admission with CEL rules and OpenAPI
// constraints. Objects can still be stored without those checks: they were
// written before the CRDs were installed or upgraded, under MCM's CRDs, or
// with a CRD that a person edited. The controllers run these functions on
// every object they act on and report the errors in its status instead of
// acting on it.
//
// Each function checks at least what the CRD checks, with the same messages,
// so a user sees one language whether the API server or a controller found
// the problem. Beyond that it checks what the API server would only reject
// later, when a controller writes a Node or a Machine from the object:
// syntactically valid label selectors, label keys and values, annotation
// keys, taints, object names and non-negative capacities.
//
// Field paths start at the object's root, as the API server's do: for
// example spec.template.spec.class.name, spec.strategy.rollingUpdate.maxSurge
// or (MachineClass keeps its fields at the top level) secretRef.name.
//
// The package imports only the API package, k8s.io/apimachinery and
// k8s.io/api, so admission webhooks and tools can use it without the
// controllers.
//
// # Usage
//
// Validate the object as it was read, before defaulting: the rules describe
// what may be stored, and the defaults in the API package only ever fill in
// values these functions accept.
//
//	if errs := validation.ValidateMachineDeployment(md); len(errs) > 0 {
//		// Report and stop; acting on an invalid object could, for example,
//		// adopt every machine in the namespace through an empty selector.
//		return setInvalidCondition(md, errs.ToAggregate().Error())
//	}
//	md = md.DeepCopy()
//	v1alpha1.SetMachineDeploymentDefaults(md)
//
// The status of a Machine is checked separately by ValidateMachineStatus,
// because the controllers write it and must be able to repair it. The
// statuses of MachineSets and MachineDeployments only hold counters and
// summaries the controllers recompute, so they have no validator.
package validation
