package testenv

import (
	"context"
	"errors"
	"time"
)

// StopAPIServer kills the kube-apiserver, as a crash or a network outage
// would end it: at once, without draining. From now on every request to it
// is refused, while etcd, kube-controller-manager and kube-scheduler keep
// running and retrying. StartAPIServer ends the outage. Tests that use it
// must not run in parallel with others on the same Env.
func (e *Env) StopAPIServer() {
	e.cluster.apiserver.stop(0)
}

// StartAPIServer starts the kube-apiserver again after StopAPIServer, on
// the same port with the same flags and data, and waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	c := e.cluster
	if ended, _ := c.apiserver.exited(); !ended {
		return errors.New("testenv: the API server is running; stop it first")
	}
	p, err := c.startAPIServer(ctx)
	if p != nil {
		c.apiserver = p
	}
	return err
}

// RestartControllerManager restarts kube-controller-manager. A test that
// stopped the API server calls it once it is done: some controllers of
// kube-controller-manager (the service account controller, which Namespace
// waits for) were seen not to resume within a minute after the API server
// came back, which would fail the tests that run next instead of the one
// that caused it.
func (e *Env) RestartControllerManager(ctx context.Context) error {
	c := e.cluster
	c.kcm.stop(5 * time.Second)
	p, err := c.startKCM(ctx)
	if p != nil {
		c.kcm = p
	}
	return err
}
