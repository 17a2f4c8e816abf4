// Package rollout is kubectl mcm rollout's logic, pure: what a
// MachineDeployment's status says about its rollout (Status, in kubectl
// rollout status's words and exit), its revisions (History, from its
// sets' revision annotations and kubernetes.io/change-cause), and the
// patches of undo, pause, resume and restart.
//
// Undo sets spec.rollbackTo, as MCM's clients do, rather than copying the
// revision's template into the deployment as kubectl does for a
// Deployment: the MachineDeployment controller (MCM's and this module's)
// supports rollbackTo and the mcmkit.io/rollback-to-revision annotation,
// finds the revision itself and reports it (events
// DeploymentRollback, DeploymentRollbackRevisionNotFound,
// DeploymentRollbackTemplateUnchanged), and a template copied by a client
// would have to leave out exactly the fields the template hash leaves out
// (the machine-template-hash label, and the parts sets propagate in
// place), which the controller knows and a client would have to
// duplicate. Whether the revision's template is the current one already
// (kubectl's "skipped rollback") is told by deployment.PreviewChange, the
// controller's own rules.
//
// Restart sets the template annotation mcmkit.io/restartedAt
// (RestartedAtAnnotation). Template annotations are part of the template
// hash (package deployment, Template hash), so the controller creates a
// new set and replaces every machine under the deployment's strategy; for
// an InPlaceUpdate deployment the machines are updated in place instead.
//
// # Usage
//
//	msg, done, err := rollout.Status(d) // err wraps ErrDeadlineExceeded or ErrInPlaceUpdateFailed
//	patch, err := rollout.PausePatch(d, true)
//	_, err = client.MachineV1alpha1().MachineDeployments(ns).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{})
package rollout
