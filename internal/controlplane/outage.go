package controlplane

import (
	"context"
	"errors"
	"time"
)

// StopAPIServer kills the kube-apiserver, as a crash or a network outage
// would end it: at once, without draining. From now on every request to it
// is refused, while etcd, kube-controller-manager and kube-scheduler keep
// running and retrying. StartAPIServer ends the outage. Tests that use it
// must not run in parallel with others on the same cluster.
func (c *Cluster) StopAPIServer() {
	c.cluster.apiserver.stop(0)
}

// StartAPIServer starts the kube-apiserver again after StopAPIServer, on
// the same port with the same flags and data, and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	k := c.cluster
	if ended, _ := k.apiserver.exited(); !ended {
		return errors.New("controlplane: the API server is running; stop it first")
	}
	p, err := k.startAPIServer(ctx)
	if p != nil {
		k.apiserver = p
	}
	return err
}

// RestartControllerManager restarts kube-controller-manager. A test that
// stopped the API server calls it once it is done: some controllers of
// kube-controller-manager (the service account controller, which Namespace
// waits for) were seen not to resume within a minute after the API server
// came back, which would fail the tests that run next instead of the one
// that caused it.
func (c *Cluster) RestartControllerManager(ctx context.Context) error {
	k := c.cluster
	k.kcm.stop(5 * time.Second)
	p, err := k.startKCM(ctx)
	if p != nil {
		k.kcm = p
	}
	return err
}
