// Package crds embeds the CustomResourceDefinitions of the
// machine.sapcloud.io API and installs them into a cluster.
//
// The YAML files next to this package are generated from the markers on the
// API types by hack/update-codegen.sh; never edit them by hand. They carry the
// structural schemas, the status and scale subresources, short names, printer
// columns and the CEL rules that reject invalid objects at admission.
//
// # Usage
//
// Install or update all CRDs and wait until the API server serves them:
//
//	if err := crds.Install(ctx, restConfig); err != nil {
//		return fmt.Errorf("installing machine CRDs: %w", err)
//	}
//
// Install uses server-side apply with the field manager "mcm", so running it
// again after an upgrade updates the definitions in place. The context bounds
// the whole operation, including the wait for the Established condition.
// Programs that manage CRDs themselves (Helm, GitOps) can read the manifests
// through Files or Objects instead.
package crds
