// Package bootstraptoken issues the bootstrap tokens with which the VMs of
// new machines join the target cluster, as MCM issues them, and revokes
// them once the machines have joined.
//
// A token is a bootstrap.kubernetes.io/token Secret bootstrap-token-<id>
// in the target's kube-system (the format of k8s.io/cluster-bootstrap,
// which this module does not depend on for these few names), usable to
// authenticate as system:bootstrap:<id> in system:bootstrappers and the
// Issuer's extra groups, and to sign the cluster-info ConfigMap. Its ID is
// MCM's for the machine's name, so that a token MCM created for a machine
// still being created when MCM was replaced is found and reused; a second
// ID serves the machine whose first is taken by another machine's token.
// Each token names its machine (annotation mcmkit.io/machine): no machine
// is ever handed, or deletes, a token that is not its own, and a token is
// renewed in place (a new expiration, the secret kept) rather than
// replaced.
//
// Failed API calls are returned as driver errors whose code says how the
// machine controller reports and retries them (PermissionDenied for RBAC,
// Unavailable for an API server out of reach, Aborted when the token IDs
// are taken).
//
// # Usage
//
//	tokens := &bootstraptoken.Issuer{Client: target, FieldManager: "mcm-machine-controller", Clock: clock.RealClock{}}
//	if bootstraptoken.HasPlaceholder(userData) {
//		token, err := tokens.Issue(ctx, m, creationTimeout, creationDeadline)
//		if err != nil {
//			return err
//		}
//		userData = bootstraptoken.Substitute(userData, token)
//	}
//	// ... once the machine's node has joined, or the machine is deleted:
//	err := tokens.Revoke(ctx, m)
package bootstraptoken
