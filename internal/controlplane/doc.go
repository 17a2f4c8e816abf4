// Package controlplane runs a real Kubernetes control plane on loopback
// ports: etcd, kube-apiserver, kube-controller-manager (garbage collector,
// disruption, namespace, service-account, node-lifecycle, attach-detach and
// the other default controllers) and kube-scheduler, all as child
// processes, with their own CA, serving certificate, service-account keys,
// static-token authentication and RBAC. The `make run` demo and MCM's
// integration suite (e2e/mcmsuite) run on one; tests get theirs through
// internal/testsupport/testenv, which wraps this package for *testing.T.
// It does not import package testing, so binaries may link it.
//
// The binaries come from hack/testenv.sh (make testenv), which builds them
// from the Go module proxy into $MCM_TESTENV_DIR/bin (default
// ~/.cache/mcm/testenv/<version>/bin); BinDir finds them or says what is
// missing. Component logs are kept in the cluster's temp dir, which Stop
// removes unless MCM_TESTENV_KEEP=1.
//
// # Usage
//
//	c, err := controlplane.Start(ctx, "demo", controlplane.Options{}, crds.Install)
//	if err != nil {
//		return err // a *StartError carries the tail of the component logs
//	}
//	defer c.Stop()
//	client := versioned.NewForConfigOrDie(c.Config())
//	out, err := c.Kubectl(ctx, "get", "mc", "-A")
package controlplane
