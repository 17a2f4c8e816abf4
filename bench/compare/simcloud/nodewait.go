package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/mcmkit/mcm/driver"
)

// nodeWait bounds how long CreateMachine waits for the new VM's Node. The
// simulated kubelet registers a booted VM's Node within milliseconds; a
// Node that takes longer is left to come later, as with the jittered
// boots, rather than holding a manager's worker.
const nodeWait = 10 * time.Second

// nodeWaitPoll is how often the node cache is looked at while waiting.
const nodeWaitPoll = 5 * time.Millisecond

// withNode is the ready-at-once boot model's driver: CreateMachine returns
// once the new VM's Node is registered, as with a driver whose VMs are up
// when the cloud call returns and whose node joins at once. A manager that
// reads the Node right after the call then finds it (if its own cache
// caught up), and neither has to come back for it.
type withNode struct {
	driver.Driver
	nodes corelisters.NodeLister
}

func (d withNode) CreateMachine(ctx context.Context, req *driver.CreateMachineRequest) (*driver.CreateMachineResponse, error) {
	resp, err := d.Driver.CreateMachine(ctx, req)
	if err != nil || resp.NodeName == "" {
		return resp, err
	}
	if err := d.waitForNode(ctx, resp.NodeName); err != nil {
		logr.FromContextOrDiscard(ctx).Info("Returning without the node", "node", resp.NodeName, "reason", err.Error())
	}
	return resp, nil
}

// waitForNode waits until the cache holds the node, at most nodeWait.
func (d withNode) waitForNode(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, nodeWait)
	defer cancel()
	tick := time.NewTicker(nodeWaitPoll)
	defer tick.Stop()
	for {
		_, err := d.nodes.Get(name)
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not registered: %w", name, ctx.Err())
		case <-tick.C:
		}
	}
}
